package scylla

import (
	"math"
	"time"
)

// Write timestamps. Cassandra keeps, per cell, the value with the highest
// write timestamp; at equal timestamps a tombstone beats a live cell, then
// (Cassandra >= 4) the cell expiring later wins, then the larger value. Every
// timestamp that orders anything is derived from the data, all in
// microseconds since the Unix epoch, the servers' own scale: ScyllaDB
// rejects USING TIMESTAMP values more than three days ahead of its clock
// (restrict_future_timestamp, on by default), so a finer scale is not an
// option.
//
//   - Connection cells at ConnectedAt*1000; the node_id tombstone of
//     ClearNode at the cleared connection's ConnectedAt*1000.
//   - Messages and the cursor at SortKey/1000. storage.NewSortKey gives
//     every key of one process its own microsecond, so two versions of a
//     topic message, or two cursors, from one node never tie. Keys from two
//     nodes can share a microsecond; a tie between two versions of the same
//     topic message would then be settled cell by cell (a mixed row), which
//     needs two pushes to the same subscription and topic through two nodes
//     within one microsecond. A cursor tie can leave the cursor behind, which
//     costs a re-read of acked (deleted) rows, never a redelivery.
//   - Deletes that name no version (DropUser, a sender's topic delete),
//     channel rows and their refresh: now.

// connTimestamp is the write timestamp of the cells a connection writes,
// and of the tombstone that clears its node_id.
func connTimestamp(connectedAtMS int64) int64 { return connectedAtMS * 1000 }

// sortKeyTimestamp is the write timestamp of a message and of the cursor.
// Callers have checked sortKey <= math.MaxInt64 (validSortKey).
func sortKeyTimestamp(sortKey uint64) int64 { return int64(sortKey / 1000) }

// nowMicros is the write timestamp of writes and deletes that name no
// version.
func nowMicros(now time.Time) int64 { return now.UnixMicro() }

// validSortKey reports whether k fits the bigint columns and timestamps
// (every nanosecond time until the year 2262 does).
func validSortKey(k uint64) bool { return k <= math.MaxInt64 }
