// Package storage is the persistence contract of the push service: router
// records (which connection node holds a user agent), the user's channels,
// and messages stored for offline or busy user agents.
//
// The contract is shaped by what the tiers do, not by tables. Two backends
// implement it: storage/embedded (Pebble on disk, the default, nothing to
// install) and storage/scylla (ScyllaDB or Cassandra through gocql). Both run
// the same conformance suite in storage/storagetest.
//
// This package must never import a backend, a tier, or do I/O itself.
package storage
