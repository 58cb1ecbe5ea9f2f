// Package backup is the single-node server's backup and restore
// (autopush backup DIR, autopush restore DIR; docs/operations.md,
// Backups): a backup directory holds a checkpoint of the embedded store
// and copies of the key files the server keeps beside it (crypto-key-file,
// push-api-key-file), named in its backup.json. A running node writes
// the backup itself, asked over POST /__backup__ on metrics-listen
// (Handler, Ask); with no node running the command writes it.
//
// It links no storage backend: the store comes in as a Checkpointer, and
// restore's check of the store it copied as a function.
package backup
