package embedded

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a copy of the open store into dir, which must not
// exist (its parent must), while the store keeps serving. The copy is
// one state the store was in: every write that returned before the call
// is in it, a write made meanwhile is in it whole or not at all, and
// none made after it returns is. Pebble links the immutable table files
// (copies them on another file system) and copies the WAL and MANIFEST;
// the copy opens as a store of its own (Open). Safe for concurrent use.
func (s *Store) Checkpoint(ctx context.Context, dir string) error {
	if err := s.enter(ctx, "checkpoint"); err != nil {
		return err
	}
	defer s.leave()
	// Every write here is synced before it returns (Sync), so the WAL
	// flush only covers a NoSync store's writes.
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("embedded: checkpoint into %s: %w", dir, err)
	}
	return nil
}
