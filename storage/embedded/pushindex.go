package embedded

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// The push API's indexes of outbound pushes, written in the push's own
// batch (putPush, dropPush), so they never disagree with it:
//
//	'k' client pushKey ^created(8) id  -> by-key entry (empty value), under
//	                                      the push's client and under
//	                                      storage.AllClients
//	'o' client id                      -> open entry (empty value), while
//	                                      the push is not final
//
// client and pushKey are each a 2-byte length and the bytes. ^created
// (the bitwise complement) makes a key's newest push its first entry. A
// by-key entry goes with its push when the sweeper expires it (dropPush).
const (
	prefixByKey = 'k'
	prefixOpen  = 'o'
)

// appendField appends a string field: its length (2 bytes) and bytes.
func appendField(k []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint16(k, uint16(len(s))), s...)
}

func byKeyPrefix(client, pushKey string) []byte {
	return appendField(appendField([]byte{prefixByKey}, client), pushKey)
}

func byKeyKey(client string, p *storage.Push) []byte {
	k := binary.BigEndian.AppendUint64(byKeyPrefix(client, p.PushKey), ^uint64(p.Created))
	return append(k, p.ID[:]...)
}

func openPrefix(client string) []byte { return appendField([]byte{prefixOpen}, client) }

func openKey(p *storage.Push) []byte { return append(openPrefix(p.Client), p.ID[:]...) }

// putIndexes adds the writes of p's by-key and open entries to b.
func putIndexes(b *pebble.Batch, p *storage.Push) {
	b.Set(byKeyKey(p.Client, p), nil, nil)
	b.Set(byKeyKey(storage.AllClients, p), nil, nil)
	if !p.State.Final() {
		b.Set(openKey(p), nil, nil)
	}
}

// dropIndexes adds the deletes of p's by-key and open entries to b.
func dropIndexes(b *pebble.Batch, p *storage.Push) {
	b.Delete(byKeyKey(p.Client, p), nil)
	b.Delete(byKeyKey(storage.AllClients, p), nil)
	b.Delete(openKey(p), nil)
}

// PushesByKey implements storage.PushStore: one range read of the key's
// entries from the cursor, then a read of each push. The cursor is the
// last entry's ^created and id.
func (s *Store) PushesByKey(ctx context.Context, client, pushKey, cursor string, limit int) ([]storage.Push, string, error) {
	if err := storage.ValidateKeyPage(client, pushKey, limit); err != nil {
		return nil, "", fmt.Errorf("embedded: pushes by key: %w", err)
	}
	prefix := byKeyPrefix(client, pushKey)
	from := prefix
	if cursor != "" {
		c, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(c) != 24 {
			return nil, "", fmt.Errorf("embedded: pushes by key: bad cursor: %w", storage.ErrInvalid)
		}
		from = append(append(append([]byte(nil), prefix...), c...), 0) // just after the last entry
	}
	if err := s.enter(ctx, "pushes by key"); err != nil {
		return nil, "", err
	}
	defer s.leave()
	var ids []uuid.UUID
	var last []byte
	err := s.scan(prefix, from, func(k, _ []byte) (bool, error) {
		if len(k) == len(prefix)+24 {
			ids = append(ids, uuid.UUID(k[len(prefix)+8:]))
			last = append(last[:0], k[len(prefix):]...)
		}
		return len(ids) < limit, nil
	})
	if err != nil {
		return nil, "", failed("pushes by key", err)
	}
	next := ""
	if len(ids) == limit {
		next = base64.RawURLEncoding.EncodeToString(last)
	}
	now := time.Now().UnixNano()
	out := make([]storage.Push, 0, len(ids))
	for _, id := range ids {
		r, found, err := s.getPush(id)
		if err != nil {
			return nil, "", failed("pushes by key", err)
		}
		// Entries and push are written in one batch: a push not found
		// or expired is one the sweeper has not reached yet.
		if found && (r.ExpiresAt == 0 || r.ExpiresAt > now) {
			out = append(out, r.Push)
		}
	}
	return out, next, nil
}

// CountOpen implements storage.PushStore: one range read of the client's
// open entries, at most limit of them.
func (s *Store) CountOpen(ctx context.Context, client string, limit int) (int, error) {
	if err := storage.ValidateOpenCount(client, limit); err != nil {
		return 0, fmt.Errorf("embedded: count open: %w", err)
	}
	if err := s.enter(ctx, "count open"); err != nil {
		return 0, err
	}
	defer s.leave()
	n, err := s.countKeys(openPrefix(client), limit)
	if err != nil {
		return 0, failed("count open", err)
	}
	return n, nil
}
