package embedded

import (
	"encoding/binary"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// sweepBatch bounds the work of one sweep transaction so that a backlog
// of expiries never holds the store's locks for long.
const sweepBatch = 512

func (s *Store) sweepLoop() {
	defer s.swept.Done()
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if _, err := s.Sweep(time.Now()); err != nil {
				s.log.Error("sweep expired data", "component", "storage.embedded", "error", err)
			}
		}
	}
}

// Sweep deletes the messages and users whose expiry is before now, and
// the fates settled and receipts written more than FateKeep and
// ReceiptKeep before it; it returns how many index entries it processed.
// It runs by itself every SweepInterval; exported for tools and tests.
// Safe for concurrent use.
func (s *Store) Sweep(now time.Time) (int, error) {
	total := 0
	for {
		n, err := s.sweepOnce(now)
		total += n
		if err != nil || n < sweepBatch {
			return total, err
		}
		select {
		case <-s.stop:
			return total, nil
		default:
		}
	}
}

func (s *Store) sweepOnce(now time.Time) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, nil
	}
	upper := binary.BigEndian.AppendUint64([]byte{prefixExpiry}, uint64(now.UnixNano()))
	var due [][]byte
	err := s.scan([]byte{prefixExpiry}, nil, func(k, _ []byte) (bool, error) {
		if string(k) >= string(upper) {
			return false, nil
		}
		due = append(due, append([]byte(nil), k...))
		return len(due) < sweepBatch, nil
	})
	if err != nil {
		return 0, err
	}
	for _, entry := range due {
		if err := s.expire(entry, now); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}

// expire handles one due index entry: its target is deleted only if it is
// still there and still expired (a topic replacement or a reconnect moved
// its expiry and wrote a new entry).
func (s *Store) expire(entry []byte, now time.Time) error {
	at, key, ok := splitExpiry(entry)
	if !ok {
		return s.db.Delete(entry, pebble.NoSync)
	}
	if key[0] == prefixClaim {
		return s.expireClaim(key, entry, at, now)
	}
	uaid, ok := uaidOf(key)
	if !ok {
		return s.db.Delete(entry, pebble.NoSync)
	}
	l := s.stripe(uaid)
	l.Lock()
	defer l.Unlock()
	switch key[0] {
	case prefixUser:
		rec, found, err := s.getRecord(uaid)
		if err != nil {
			return err
		}
		if found && rec.ExpiresAt <= now.UnixNano() {
			return s.dropLocked(uaid, &rec)
		}
	case prefixPush:
		return s.expirePush(key, entry, now)
	case prefixFate:
		return s.expireFate(key, entry, now)
	case prefixReceipt:
		// A receipt's one entry is at its settling + ReceiptKeep: due.
		b := s.db.NewBatch()
		b.Delete(key, nil)
		b.Delete(entry, nil)
		return s.commit(b)
	case prefixMessage:
		m, found, err := s.getMessage(key)
		if err != nil {
			return err
		}
		if found && m.Expired(now) {
			b := s.db.NewBatch()
			b.Delete(key, nil)
			b.Delete(entry, nil)
			return s.commit(b)
		}
	}
	// Expiry is idempotent: losing this delete in a crash only means
	// the entry is visited again.
	return s.db.Delete(entry, pebble.NoSync)
}
