package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/autopush-go/autopush/storage"
	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"
)

// Channels are keys without values under the user's channel prefix. They
// expire with the user: the sweeper drops them with the router record.

// AddChannel implements storage.Store. One durable write.
func (s *Store) AddChannel(ctx context.Context, uaid, chid uuid.UUID) error {
	return s.writeChannel(ctx, "add channel", uaid, chid, func(b *pebble.Batch, k []byte) { b.Set(k, nil, nil) })
}

// RemoveChannel implements storage.Store. One durable write.
func (s *Store) RemoveChannel(ctx context.Context, uaid, chid uuid.UUID) error {
	return s.writeChannel(ctx, "remove channel", uaid, chid, func(b *pebble.Batch, k []byte) { b.Delete(k, nil) })
}

func (s *Store) writeChannel(ctx context.Context, op string, uaid, chid uuid.UUID, write func(*pebble.Batch, []byte)) error {
	if err := storage.ValidateChannel(uaid, chid); err != nil {
		return fmt.Errorf("embedded: %s: %w", op, err)
	}
	if err := s.enter(ctx, op); err != nil {
		return err
	}
	defer s.leave()
	b := s.db.NewBatch()
	write(b, channelKey(uaid, chid))
	if err := s.commit(b); err != nil {
		return failed(op, err)
	}
	return nil
}

// Channels implements storage.Store. One local range scan.
func (s *Store) Channels(ctx context.Context, uaid uuid.UUID) ([]uuid.UUID, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return nil, fmt.Errorf("embedded: channels: %w", err)
	}
	if err := s.enter(ctx, "channels"); err != nil {
		return nil, err
	}
	defer s.leave()
	out := []uuid.UUID{}
	err := s.scan(channelPrefix(uaid), nil, func(k, _ []byte) (bool, error) {
		var c uuid.UUID
		copy(c[:], k[17:])
		out = append(out, c)
		return true, nil
	})
	if err != nil {
		return nil, failed("channels", err)
	}
	return out, nil
}

// CountChannels implements storage.Store. One local range scan of at most
// limit keys.
func (s *Store) CountChannels(ctx context.Context, uaid uuid.UUID, limit int) (int, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return 0, fmt.Errorf("embedded: count channels: %w", err)
	}
	if limit < 1 {
		return 0, fmt.Errorf("embedded: count channels: limit %d: %w", limit, storage.ErrInvalid)
	}
	if err := s.enter(ctx, "count channels"); err != nil {
		return 0, err
	}
	defer s.leave()
	n, err := s.countKeys(channelPrefix(uaid), limit)
	if err != nil {
		return 0, failed("count channels", err)
	}
	return n, nil
}

// countKeys counts the keys starting with prefix, stopping at limit.
func (s *Store) countKeys(prefix []byte, limit int) (int, error) {
	n := 0
	err := s.scan(prefix, nil, func(_, _ []byte) (bool, error) {
		n++
		return n < limit, nil
	})
	return n, err
}

// HasChannel implements storage.Store. One local read.
func (s *Store) HasChannel(ctx context.Context, uaid, chid uuid.UUID) (bool, error) {
	if err := storage.ValidateChannel(uaid, chid); err != nil {
		return false, fmt.Errorf("embedded: has channel: %w", err)
	}
	if err := s.enter(ctx, "has channel"); err != nil {
		return false, err
	}
	defer s.leave()
	_, closer, err := s.db.Get(channelKey(uaid, chid))
	if err == pebble.ErrNotFound {
		return false, nil
	}
	if err != nil {
		return false, failed("has channel", err)
	}
	return true, closer.Close()
}

// Subscription implements storage.Store: two local reads under one
// entry.
func (s *Store) Subscription(ctx context.Context, uaid, chid uuid.UUID) (storage.User, bool, error) {
	if err := storage.ValidateChannel(uaid, chid); err != nil {
		return storage.User{}, false, fmt.Errorf("embedded: subscription: %w", err)
	}
	if err := s.enter(ctx, "subscription"); err != nil {
		return storage.User{}, false, err
	}
	defer s.leave()
	rec, ok, err := s.getRecord(uaid)
	if err != nil {
		return storage.User{}, false, failed("subscription", err)
	}
	if !ok || rec.ExpiresAt <= time.Now().UnixNano() {
		return storage.User{}, false, fmt.Errorf("embedded: subscription %s: %w", uaid, storage.ErrNotFound)
	}
	_, closer, err := s.db.Get(channelKey(uaid, chid))
	if err == pebble.ErrNotFound {
		return rec.User, false, nil
	}
	if err != nil {
		return storage.User{}, false, failed("subscription", err)
	}
	return rec.User, true, closer.Close()
}

// scan calls fn for each key with the given prefix, from lower (or the
// prefix) onwards, until fn returns false. The slices are only valid
// during the call.
func (s *Store) scan(prefix, lower []byte, fn func(k, v []byte) (bool, error)) error {
	if lower == nil {
		lower = prefix
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		more, err := fn(it.Key(), v)
		if err != nil || !more {
			it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	return it.Close()
}
