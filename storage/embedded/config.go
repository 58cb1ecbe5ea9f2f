package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config of the embedded backend. The zero value of every field but Dir
// means its default.
type Config struct {
	// Dir is the data directory; created if missing. Required.
	Dir string
	// IdleTTL: a user that has not connected for this long expires with
	// its channels and messages. Default 60 days.
	IdleTTL time.Duration
	// SweepInterval: how often expired messages and users are deleted
	// from disk. Reads never return expired data in between. Default 1m.
	SweepInterval time.Duration
	// CacheBytes is Pebble's block cache. Default 64 MiB.
	CacheBytes int64
	// MemTableBytes is the size Pebble's memtables grow to (from 256 KiB,
	// doubling) before they are flushed. The writes here are small (a
	// router record, a channel key, a message) and each new user agent's
	// first register writes its record and channel: the memtables fill as
	// connections arrive, so on a node at its 19,000 connections their
	// size is part of the memory per connection (docs/benchmarks.md).
	// Default 1 MiB (Pebble's 4 MiB).
	MemTableBytes uint64
	// L0Compaction is how many sublevels deep Pebble's level 0 grows
	// (each flushed memtable is one, until compacted) before it is
	// compacted into the level below. The keys here are spread over
	// every user agent, so each such compaction rewrites most of that
	// level, stored messages included: with 1 MiB memtables, Pebble's 4
	// made compactions most of the CPU of a drain of tracked messages
	// (docs/benchmarks.md). Reads look through up to this many memtables'
	// files more. Default 16.
	L0Compaction int
	// SyncShare: while at least SyncShareFrom calls are in progress, a
	// WAL fsync waits until this long after the previous one, so the
	// commits arriving meanwhile share it. On this project's VM an fsync
	// returns in ~0.16 ms and costs far more CPU than the commit it makes
	// durable: a burst of registers synced one or two at a time (measured:
	// 20 µs of the node's system CPU per new user agent's hello+register,
	// docs/benchmarks.md). A lone writer never waits. Default 200µs;
	// negative turns it off.
	SyncShare time.Duration
	// SyncShareFrom is how many calls in progress make a WAL fsync wait
	// (SyncShare): with fewer the wait would only slow them. Default 8.
	SyncShareFrom int
	// NoSync commits without fsync: a crash may lose the last writes.
	// Only for benchmarks and throwaway dev data. Default false.
	NoSync bool
	// Logger receives sweeper errors. Default slog.Default().
	Logger *slog.Logger
}

// Defaults of Config, one place.
const (
	DefaultIdleTTL       = 60 * 24 * time.Hour
	DefaultSweepInterval = time.Minute
	DefaultCacheBytes    = 64 << 20
	DefaultMemTableBytes = 1 << 20
	DefaultL0Compaction  = 16
	DefaultSyncShare     = 200 * time.Microsecond
	DefaultSyncShareFrom = 8
)

func (c *Config) withDefaults() Config {
	out := *c
	if out.IdleTTL == 0 {
		out.IdleTTL = DefaultIdleTTL
	}
	if out.SweepInterval == 0 {
		out.SweepInterval = DefaultSweepInterval
	}
	if out.CacheBytes == 0 {
		out.CacheBytes = DefaultCacheBytes
	}
	if out.MemTableBytes == 0 {
		out.MemTableBytes = DefaultMemTableBytes
	}
	if out.L0Compaction == 0 {
		out.L0Compaction = DefaultL0Compaction
	}
	if out.SyncShare == 0 {
		out.SyncShare = DefaultSyncShare
	}
	if out.SyncShareFrom == 0 {
		out.SyncShareFrom = DefaultSyncShareFrom
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("embedded: config: Dir is required")
	case c.IdleTTL < 0:
		return fmt.Errorf("embedded: config: IdleTTL %v is negative", c.IdleTTL)
	case c.SweepInterval < 0:
		return fmt.Errorf("embedded: config: SweepInterval %v is negative", c.SweepInterval)
	case c.L0Compaction < 0:
		return fmt.Errorf("embedded: config: L0Compaction %d is negative", c.L0Compaction)
	case c.CacheBytes < 0:
		return fmt.Errorf("embedded: config: CacheBytes %d is negative", c.CacheBytes)
	}
	return nil
}
