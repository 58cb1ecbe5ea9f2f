package scylla

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// The push API's idempotency keys: table push_idempotency, one row per
// (client, key), written with its TTL by INSERT ... IF NOT EXISTS (an
// LWT: of concurrent claims one applies, the others read its id in the
// answer) and removed by DELETE ... IF id = ?.
var (
	qClaimAdd  = messageLWT(`INSERT INTO push_idempotency (client, key, id) VALUES (?, ?, ?) IF NOT EXISTS USING TTL ?`)
	qClaimGet  = read(`SELECT id FROM push_idempotency WHERE client = ? AND key = ?`)
	qClaimFree = messageLWT(`DELETE FROM push_idempotency WHERE client = ? AND key = ? IF id = ?`)
)

// ClaimIdempotencyKey implements storage.PushStore: an LWT. An error with
// an unknown outcome (a timeout) is settled by a serial read, which
// completes any transaction in flight on the row. 1 LWT (and a serial read
// after a timeout).
func (s *Store) ClaimIdempotencyKey(ctx context.Context, client, key string, id uuid.UUID, ttl time.Duration) (uuid.UUID, error) {
	if err := storage.ValidateIdempotencyClaim(client, key, id, ttl); err != nil {
		return uuid.Nil, fmt.Errorf("scylla: claim idempotency key: %w", err)
	}
	if err := s.open("claim idempotency key"); err != nil {
		return uuid.Nil, err
	}
	row := map[string]any{}
	applied, err := s.query(ctx, qClaimAdd, client, key, uuidArg(id), int32(ttl/time.Second)).MapScanCAS(row)
	if err != nil {
		stored, found, rerr := s.readClaim(ctx, client, key)
		if rerr != nil || !found {
			return uuid.Nil, wrap("claim idempotency key", err)
		}
		return stored, nil
	}
	if applied {
		return id, nil
	}
	stored, ok := row["id"].(gocql.UUID)
	if !ok {
		return uuid.Nil, fmt.Errorf("scylla: claim idempotency key: the stored claim has no id")
	}
	return uuid.UUID(stored), nil
}

// readClaim reads a claim at SERIAL consistency.
func (s *Store) readClaim(ctx context.Context, client, key string) (uuid.UUID, bool, error) {
	var raw [16]byte
	err := s.serialRead(ctx, qClaimGet, client, key).Scan(&raw)
	if errors.Is(err, gocql.ErrNotFound) {
		return uuid.Nil, false, nil
	}
	return raw, err == nil, err
}

// ReleaseIdempotencyKey implements storage.PushStore: an LWT.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, client, key string, id uuid.UUID) error {
	if err := storage.ValidateIdempotencyClaim(client, key, id, time.Second); err != nil {
		return fmt.Errorf("scylla: release idempotency key: %w", err)
	}
	if err := s.open("release idempotency key"); err != nil {
		return err
	}
	_, err := s.query(ctx, qClaimFree, client, key, uuidArg(id)).MapScanCAS(map[string]any{})
	if err != nil {
		if stored, found, rerr := s.readClaim(ctx, client, key); rerr == nil && (!found || stored != id) {
			return nil // released after all, or another's
		}
		return wrap("release idempotency key", err)
	}
	return nil
}
