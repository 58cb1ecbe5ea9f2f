// Package embedded is the default storage backend: Pebble on local disk
// inside the process, so one binary runs the whole service with nothing to
// install. It is for a single node (the single-node server autopush, small deployments); a
// cluster of nodes shares storage/scylla instead.
//
// Writes are durable when they return: every batch commits with fsync, and
// Pebble's commit pipeline lets concurrent committers share one fsync
// (group commit). TTLs are enforced on every read and by a background
// sweeper that walks an expiry index.
//
// It must never block an event loop: callers run it off the loop.
//
// Size: it is one implementation of one interface, storage.Store, whose
// parts (router, messages, broadcasts, the sender's pushes, rate shares,
// idempotency keys, fates and receipts) share the Pebble instance, the
// key prefixes, the group commit, the lock stripes and the expiry sweep;
// one file per part keeps the concepts apart.
package embedded
