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

// messageKey is where m lives.
func messageKey(uaid uuid.UUID, m *storage.Message) []byte {
	if m.Topic != "" {
		return topicKey(uaid, m.CHID, m.Topic)
	}
	return timestampKey(uaid, m.SortKey, m.CHID)
}

// SaveMessage implements storage.Store. One durable write for a timestamp
// message; a topic message also reads the stored version, under the user's
// stripe lock, so an older version arriving late never replaces a newer
// one. A message already expired is not stored.
func (s *Store) SaveMessage(ctx context.Context, uaid uuid.UUID, m storage.Message) error {
	if err := storage.ValidateMessage(uaid, &m); err != nil {
		return fmt.Errorf("embedded: save message: %w", err)
	}
	if err := s.enter(ctx, "save message"); err != nil {
		return err
	}
	defer s.leave()
	if m.Expired(time.Now()) {
		return nil
	}
	key := messageKey(uaid, &m)
	b := s.db.NewBatch()
	if m.Topic != "" {
		l := s.stripe(uaid)
		l.Lock()
		defer l.Unlock()
		old, found, err := s.getMessage(key)
		if err != nil {
			b.Close()
			return failed("save message", err)
		}
		if found {
			if old.SortKey > m.SortKey {
				b.Close()
				return nil
			}
			b.Delete(expiryKey(old.Expiry().UnixNano(), key), nil)
		}
	}
	b.Set(key, encodeMessage(&m), nil)
	b.Set(expiryKey(m.Expiry().UnixNano(), key), nil, nil)
	if err := s.commit(b); err != nil {
		return failed("save message", err)
	}
	return nil
}

func (s *Store) getMessage(key []byte) (storage.Message, bool, error) {
	v, err := s.get(key)
	if err != nil || v == nil {
		return storage.Message{}, false, err
	}
	m, err := decodeMessage(v)
	if err != nil {
		return storage.Message{}, false, fmt.Errorf("message %x: %w", key, err)
	}
	return m, true, nil
}

// DeleteMessage implements storage.Store. One local read and one durable
// write; topic messages under the user's stripe lock.
func (s *Store) DeleteMessage(ctx context.Context, uaid uuid.UUID, k storage.MessageKey) error {
	if err := storage.ValidateKey(uaid, k); err != nil {
		return fmt.Errorf("embedded: delete message: %w", err)
	}
	if err := s.enter(ctx, "delete message"); err != nil {
		return err
	}
	defer s.leave()
	if k.Topic != "" {
		l := s.stripe(uaid)
		l.Lock()
		defer l.Unlock()
	}
	b := s.db.NewBatch()
	if err := s.deleteIn(b, uaid, k); err != nil {
		b.Close()
		return failed("delete message", err)
	}
	if b.Empty() {
		b.Close()
		return nil
	}
	if err := s.commit(b); err != nil {
		return failed("delete message", err)
	}
	return nil
}

// deleteIn adds the deletes of the message k names to b, if it is there;
// a topic message's caller holds the user's stripe lock.
func (s *Store) deleteIn(b *pebble.Batch, uaid uuid.UUID, k storage.MessageKey) error {
	key := timestampKey(uaid, k.SortKey, k.CHID)
	if k.Topic != "" {
		key = topicKey(uaid, k.CHID, k.Topic)
	}
	old, found, err := s.getMessage(key)
	// A topic message newer than the acked version is its replacement.
	if err != nil || !found || k.Topic != "" && k.SortKey != 0 && old.SortKey > k.SortKey {
		return err
	}
	b.Delete(key, nil)
	b.Delete(expiryKey(old.Expiry().UnixNano(), key), nil)
	return nil
}

// TopicMessages implements storage.Store. One local range scan.
func (s *Store) TopicMessages(ctx context.Context, uaid uuid.UUID, limit int) ([]storage.Message, error) {
	return s.readMessages(ctx, "topic messages", uaid, messagePrefix(uaid, kindTopic), nil, limit)
}

// TimestampMessages implements storage.Store. One local range scan
// starting just after the given sort key.
func (s *Store) TimestampMessages(ctx context.Context, uaid uuid.UUID, after uint64, limit int) ([]storage.Message, error) {
	prefix := messagePrefix(uaid, kindTimestamp)
	var lower []byte
	if after < ^uint64(0) {
		lower = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), after+1)
	} else {
		lower = prefixEnd(prefix)
	}
	return s.readMessages(ctx, "timestamp messages", uaid, prefix, lower, limit)
}

// readMessages collects up to limit unexpired messages; expired ones are
// skipped here and deleted by the sweeper.
func (s *Store) readMessages(ctx context.Context, op string, uaid uuid.UUID, prefix, lower []byte, limit int) ([]storage.Message, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return nil, fmt.Errorf("embedded: %s: %w", op, err)
	}
	if err := storage.ValidateLimit(limit); err != nil {
		return nil, fmt.Errorf("embedded: %s: %w", op, err)
	}
	if err := s.enter(ctx, op); err != nil {
		return nil, err
	}
	defer s.leave()
	now := time.Now()
	out := []storage.Message{}
	err := s.scan(prefix, lower, func(k, v []byte) (bool, error) {
		m, err := decodeMessage(v)
		if err != nil {
			return false, fmt.Errorf("message %x: %w", k, err)
		}
		if !m.Expired(now) {
			out = append(out, m)
		}
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, failed(op, err)
	}
	return out, nil
}
