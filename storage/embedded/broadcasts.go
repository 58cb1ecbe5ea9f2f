package embedded

import (
	"context"
	"fmt"

	"github.com/autopush-go/autopush/storage"
)

// Broadcasts are keys 'b' id with the version as value (keys.go): a few
// dozen at most, read whole by every node's poll.
const prefixBroadcast = 'b'

func broadcastKey(id string) []byte { return append([]byte{prefixBroadcast}, id...) }

// PutBroadcast implements storage.Store. One durable write.
func (s *Store) PutBroadcast(ctx context.Context, id, version string) error {
	if err := storage.ValidateBroadcast(id, version); err != nil {
		return fmt.Errorf("embedded: put broadcast: %w", err)
	}
	if err := s.enter(ctx, "put broadcast"); err != nil {
		return err
	}
	defer s.leave()
	if err := s.db.Set(broadcastKey(id), []byte(version), s.wo); err != nil {
		return failed("put broadcast", err)
	}
	return nil
}

// Broadcasts implements storage.Store. One local range scan.
func (s *Store) Broadcasts(ctx context.Context) (map[string]string, error) {
	if err := s.enter(ctx, "broadcasts"); err != nil {
		return nil, err
	}
	defer s.leave()
	out := map[string]string{}
	err := s.scan([]byte{prefixBroadcast}, nil, func(k, v []byte) (bool, error) {
		out[string(k[1:])] = string(v)
		return true, nil
	})
	if err != nil {
		return nil, failed("broadcasts", err)
	}
	return out, nil
}
