package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Idempotency keys of the push API:
//
//	'i' client key -> id(16) expiresAt(8, ns)
//
// (client a 2-byte length and its bytes), with an 'x' expiry entry the
// sweeper deletes it by. Claims are compared and set under
// Store.claimMu: one process holds the directory, so a mutex is the whole
// of the compare-and-set.
const prefixClaim = 'i'

func claimKey(client, key string) []byte {
	return append(appendField([]byte{prefixClaim}, client), key...)
}

// claim is a stored claim, or the zero claim when there is none (or it
// expired by now).
type claim struct {
	id        uuid.UUID
	expiresAt int64
}

func (s *Store) getClaim(k []byte, now int64) (claim, error) {
	v, err := s.get(k)
	if err != nil || v == nil {
		return claim{}, err
	}
	if len(v) != 24 {
		return claim{}, fmt.Errorf("idempotency claim: %w", errCorrupt)
	}
	c := claim{id: uuid.UUID(v[:16]), expiresAt: int64(binary.BigEndian.Uint64(v[16:]))}
	if c.expiresAt <= now {
		return claim{expiresAt: c.expiresAt}, nil // gone, but its expiry entry is still there
	}
	return c, nil
}

// ClaimIdempotencyKey implements storage.PushStore. One local read and,
// for a new claim, one durable write.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, client, key string, id uuid.UUID, ttl time.Duration) (uuid.UUID, error) {
	if err := storage.ValidateIdempotencyClaim(client, key, id, ttl); err != nil {
		return uuid.Nil, fmt.Errorf("embedded: claim idempotency key: %w", err)
	}
	if err := s.enter(ctx, "claim idempotency key"); err != nil {
		return uuid.Nil, err
	}
	defer s.leave()
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	k := claimKey(client, key)
	now := time.Now()
	cur, err := s.getClaim(k, now.UnixNano())
	if err != nil {
		return uuid.Nil, failed("claim idempotency key", err)
	}
	if cur.id != uuid.Nil {
		return cur.id, nil
	}
	b := s.db.NewBatch()
	if cur.expiresAt != 0 {
		b.Delete(expiryKey(cur.expiresAt, k), nil)
	}
	exp := now.Add(ttl).UnixNano()
	b.Set(k, binary.BigEndian.AppendUint64(append([]byte(nil), id[:]...), uint64(exp)), nil)
	b.Set(expiryKey(exp, k), nil, nil)
	if err := s.commit(b); err != nil {
		return uuid.Nil, failed("claim idempotency key", err)
	}
	return id, nil
}

// ReleaseIdempotencyKey implements storage.PushStore. One local read and,
// when the claim names id, one durable write.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, client, key string, id uuid.UUID) error {
	if err := storage.ValidateIdempotencyClaim(client, key, id, time.Second); err != nil {
		return fmt.Errorf("embedded: release idempotency key: %w", err)
	}
	if err := s.enter(ctx, "release idempotency key"); err != nil {
		return err
	}
	defer s.leave()
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	k := claimKey(client, key)
	cur, err := s.getClaim(k, time.Now().UnixNano())
	if err != nil {
		return failed("release idempotency key", err)
	}
	if cur.id != id {
		return nil
	}
	b := s.db.NewBatch()
	b.Delete(k, nil)
	b.Delete(expiryKey(cur.expiresAt, k), nil)
	if err := s.commit(b); err != nil {
		return failed("release idempotency key", err)
	}
	return nil
}

// expireClaim deletes a claim whose TTL has passed (the sweeper's step for
// a claim key), or only the entry when the claim has moved on (released,
// or claimed again with a later expiry).
func (s *Store) expireClaim(key, entry []byte, at int64, now time.Time) error {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	cur, err := s.getClaim(key, now.UnixNano())
	if err != nil {
		return err
	}
	if cur.id != uuid.Nil || cur.expiresAt != at {
		return s.db.Delete(entry, pebble.NoSync)
	}
	b := s.db.NewBatch()
	b.Delete(key, nil)
	b.Delete(entry, nil)
	return s.commit(b)
}
