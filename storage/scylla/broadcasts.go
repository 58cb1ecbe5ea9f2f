package scylla

import (
	"context"
	"fmt"

	"github.com/autopush-go/autopush/storage"
)

// Broadcasts live in one partition of the broadcast table (schema.cql).
var (
	qPutBroadcast = messageWrite(`INSERT INTO broadcast (scope, id, version) VALUES (0, ?, ?)`)
	qBroadcasts   = read(`SELECT id, version FROM broadcast WHERE scope = 0`)
)

// PutBroadcast implements storage.Store: one insert, 1 RT. Safe for
// concurrent use; concurrent puts of one id: the last write wins.
func (s *Store) PutBroadcast(ctx context.Context, id, version string) error {
	if err := storage.ValidateBroadcast(id, version); err != nil {
		return fmt.Errorf("scylla: put broadcast: %w", err)
	}
	if err := s.open("put broadcast"); err != nil {
		return err
	}
	return wrap("put broadcast", s.query(ctx, qPutBroadcast, id, version).Exec())
}

// Broadcasts implements storage.Store: one partition read, 1 RT. Safe for
// concurrent use.
func (s *Store) Broadcasts(ctx context.Context) (map[string]string, error) {
	if err := s.open("broadcasts"); err != nil {
		return nil, err
	}
	out := map[string]string{}
	iter := s.query(ctx, qBroadcasts).Iter()
	var id, version string
	for iter.Scan(&id, &version) {
		out[id] = version
	}
	if err := iter.Close(); err != nil {
		return nil, wrap("broadcasts", err)
	}
	return out, nil
}
