package scylla

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// SaveMessage inserts m with TTL = its remaining lifetime (rounded up to a
// second, Cassandra's TTL granularity; reads filter the last fraction) and
// write timestamp m.SortKey/1000 (timestamps.go). A message
// already expired is not stored. 1 RT. Safe for concurrent use.
//
// Topic messages share the row (kind 1, sortkey 0, chid, topic): a newer
// version has a higher timestamp and replaces every cell of the older one,
// and an older version arriving late loses every cell, whatever the
// arrival order. Timestamp messages get their own row (kind 2, sortkey).
func (s *Store) SaveMessage(ctx context.Context, uaid uuid.UUID, m storage.Message) error {
	if err := storage.ValidateMessage(uaid, &m); err != nil {
		return fmt.Errorf("scylla: save message: %w", err)
	}
	if !validSortKey(m.SortKey) {
		return fmt.Errorf("scylla: save message: sort key %d exceeds int64: %w", m.SortKey, storage.ErrInvalid)
	}
	if err := s.open("save message"); err != nil {
		return err
	}
	ttl := remainingTTL(&m, time.Now())
	if ttl <= 0 {
		return nil
	}
	kind, sortkey := kindTimestamp, int64(m.SortKey)
	if m.Topic != "" {
		kind, sortkey = kindTopic, 0
	}
	// headers is a frozen map: one cell, replaced whole by a newer topic
	// version; bound never nil, since a null would write a tombstone.
	err := s.query(ctx, qSaveMessage, uuidArg(uaid), kind, sortkey, uuidArg(m.CHID), m.Topic,
		int64(m.SortKey), m.Version, int32(m.TTL), m.Data, nonNil(m.Headers), m.Tracked,
		ttl, sortKeyTimestamp(m.SortKey)).Exec()
	return wrap("save message", err)
}

// remainingTTL is the whole seconds until m expires, rounded up; <= 0 when
// it has.
func remainingTTL(m *storage.Message, now time.Time) int {
	left := m.Expiry().Sub(now)
	if left <= 0 {
		return 0
	}
	return int(min((left+time.Second-1)/time.Second, math.MaxInt32))
}

// DeleteMessage writes a row tombstone for the message k names. 1 RT. Safe
// for concurrent use.
//
// A topic message is deleted with write timestamp k.SortKey/1000: it
// shadows the version acked (a tombstone wins a tie) and any older one,
// never a newer replacement (higher timestamp), whatever the arrival order.
// k.SortKey 0 (a sender's delete, naming no version) uses now, shadowing
// every version received so far. A timestamp message is deleted with write
// timestamp k.SortKey/1000 too, exactly its own, so the delete wins even when
// this node's clock is behind the writer's.
func (s *Store) DeleteMessage(ctx context.Context, uaid uuid.UUID, k storage.MessageKey) error {
	if err := storage.ValidateKey(uaid, k); err != nil {
		return fmt.Errorf("scylla: delete message: %w", err)
	}
	if !validSortKey(k.SortKey) {
		return fmt.Errorf("scylla: delete message: sort key %d exceeds int64: %w", k.SortKey, storage.ErrInvalid)
	}
	if err := s.open("delete message"); err != nil {
		return err
	}
	ts := sortKeyTimestamp(k.SortKey)
	kind, sortkey := kindTimestamp, int64(k.SortKey)
	if k.Topic != "" {
		kind, sortkey = kindTopic, 0
		if k.SortKey == 0 {
			ts = nowMicros(time.Now())
		}
	}
	err := s.query(ctx, qDeleteMessage, ts, uuidArg(uaid), kind, sortkey, uuidArg(k.CHID), k.Topic).Exec()
	return wrap("delete message", err)
}

// TopicMessages returns up to limit unexpired topic messages. It pages
// through the kind-1 rows limit at a time, skipping rows whose message has
// expired (Cassandra's TTL is whole seconds), until it has limit messages or
// the rows run out; so a short result means there are no more. 1 RT unless
// expired rows fill a page. Safe for concurrent use.
func (s *Store) TopicMessages(ctx context.Context, uaid uuid.UUID, limit int) ([]storage.Message, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return nil, fmt.Errorf("scylla: topic messages: %w", err)
	}
	if err := storage.ValidateLimit(limit); err != nil {
		return nil, fmt.Errorf("scylla: topic messages: %w", err)
	}
	if err := s.open("topic messages"); err != nil {
		return nil, err
	}
	now := time.Now()
	out := []storage.Message{}
	var page []byte
	for {
		iter := s.query(ctx, qTopicMessages, uuidArg(uaid)).PageSize(limit).PageState(page).Iter()
		next := iter.PageState()
		for len(out) < limit {
			var m storage.Message
			var received int64
			if !iter.Scan((*[16]byte)(&m.CHID), &m.Topic, &received, &m.Version, &m.TTL, &m.Data, &m.Headers, &m.Tracked) {
				break
			}
			m.SortKey = uint64(received)
			if !m.Expired(now) {
				out = append(out, m)
			}
		}
		if err := iter.Close(); err != nil {
			return nil, wrap("topic messages", err)
		}
		if len(out) == limit || len(next) == 0 {
			return out, nil
		}
		page = next
	}
}

// TimestampMessages returns up to limit unexpired timestamp messages with
// SortKey > after, in SortKey order: `sortkey > ? LIMIT limit` per query,
// skipping expired rows and continuing after the last row read until it has
// limit messages or a query returns fewer rows than asked for, so a short
// result means there are no more. 1 RT unless expired rows fill a page.
// Safe for concurrent use.
func (s *Store) TimestampMessages(ctx context.Context, uaid uuid.UUID, after uint64, limit int) ([]storage.Message, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return nil, fmt.Errorf("scylla: timestamp messages: %w", err)
	}
	if err := storage.ValidateLimit(limit); err != nil {
		return nil, fmt.Errorf("scylla: timestamp messages: %w", err)
	}
	if err := s.open("timestamp messages"); err != nil {
		return nil, err
	}
	out := []storage.Message{}
	if !validSortKey(after) {
		return out, nil // no sort key is greater
	}
	now := time.Now()
	cursor := int64(after)
	for {
		iter := s.query(ctx, qTimestampMessages, uuidArg(uaid), cursor, limit).Iter()
		rows := 0
		for len(out) < limit {
			var m storage.Message
			var sortkey int64
			if !iter.Scan(&sortkey, (*[16]byte)(&m.CHID), &m.Version, &m.TTL, &m.Data, &m.Headers, &m.Tracked) {
				break
			}
			rows++
			cursor = sortkey
			m.SortKey = uint64(sortkey)
			if !m.Expired(now) {
				out = append(out, m)
			}
		}
		if err := iter.Close(); err != nil {
			return nil, wrap("timestamp messages", err)
		}
		if len(out) == limit || rows < limit {
			return out, nil
		}
	}
}
