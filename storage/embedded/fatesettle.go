package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Settling fates (storage.FateStore): the first Settle of a fate wins
// under its user's stripe lock; the ack of a stored message settles in
// its delete's batch; users', topics' and expired fates are listed, then
// settled one by one. The key spaces are fates.go's.

// Settle implements storage.FateStore. One local read and, for the
// winner, one durable write of the fate, its count and its receipt, under
// the user's stripe lock: the lock makes the first Settle the only one.
func (s *Store) Settle(ctx context.Context, uaid uuid.UUID, id storage.FateID, st storage.FateState, reason storage.DropReason) (bool, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return false, fmt.Errorf("embedded: settle: %w", err)
	}
	if err := storage.ValidateSettle(st, reason); err != nil {
		return false, fmt.Errorf("embedded: settle: %w", err)
	}
	if err := s.enter(ctx, "settle"); err != nil {
		return false, err
	}
	defer s.leave()
	ok, err := s.settle(uaid, id, st, reason, nil)
	if err != nil {
		return false, failed("settle", err)
	}
	return ok, nil
}

// settle settles the fate (uaid, id) unless it is missing, settled, or
// when must is set, must rejects it as read under the lock (SettleTopic's
// states, which a Reach may have moved past since it listed them).
func (s *Store) settle(uaid uuid.UUID, id storage.FateID, st storage.FateState, reason storage.DropReason, must func(*fateRecord) bool) (bool, error) {
	l := s.stripe(uaid)
	l.Lock()
	defer l.Unlock()
	b := s.newCountBatch(uaid)
	ok, err := s.settleIn(b, uaid, id, st, reason, must)
	if err != nil || !ok {
		b.Close()
		return false, err
	}
	if err := b.commit(s.wo); err != nil {
		return false, err
	}
	return true, nil
}

// settleIn adds settle's writes to b, under the user's stripe lock held
// by the caller; false (b unchanged) when there is nothing to settle.
func (s *Store) settleIn(b *countBatch, uaid uuid.UUID, id storage.FateID, st storage.FateState, reason storage.DropReason, must func(*fateRecord) bool) (bool, error) {
	f, found, err := s.getFate(uaid, id)
	if err != nil || !found || f.State.Terminal() || must != nil && !must(&f) {
		return false, err
	}
	now := time.Now().UnixNano()
	if err := s.move(b, uaid, f.State, st); err != nil {
		return false, err
	}
	f.State, f.Reason, f.SettledAt = st, reason, now
	key := fateKey(uaid, id)
	b.Set(fateStateKey(uaid, id), encodeState(&f), nil)
	b.SingleDelete(fateExpiryKey(f.Expiry.UnixNano(), uaid, id), nil) // written once (singleWrite)
	b.Set(expiryKey(now+int64(storage.FateKeep), key), nil, nil)
	if f.Receipt != (storage.ReceiptSubID{}) {
		rk := receiptKey(f.Receipt, now, id)
		b.Set(rk, encodeReceipt(&f), nil)
		b.Set(expiryKey(now+int64(storage.ReceiptKeep), rk), nil, nil)
	}
	if err := s.count(b, uaid, storage.Milestone{State: st, Reason: reason}); err != nil {
		return false, err
	}
	return true, nil
}

// DeleteDelivered implements storage.FateStore: DeleteMessage's read and
// Settle's, then one durable write of both under the user's stripe lock,
// where the two calls make two.
func (s *Store) DeleteDelivered(ctx context.Context, uaid uuid.UUID, k storage.MessageKey, id storage.FateID) (bool, error) {
	if err := storage.ValidateKey(uaid, k); err != nil {
		return false, fmt.Errorf("embedded: delete delivered: %w", err)
	}
	if err := s.enter(ctx, "delete delivered"); err != nil {
		return false, err
	}
	defer s.leave()
	l := s.stripe(uaid)
	l.Lock()
	defer l.Unlock()
	b := s.newCountBatch(uaid)
	if err := s.deleteIn(b.Batch, uaid, k); err != nil {
		b.Close()
		return false, failed("delete delivered", err)
	}
	settled, err := s.settleIn(b, uaid, id, storage.FateDelivered, storage.DropNone, nil)
	if err != nil {
		b.Close()
		return false, failed("delete delivered", err)
	}
	if b.Empty() {
		b.Close()
		return false, nil
	}
	if err := b.commit(s.wo); err != nil {
		return false, failed("delete delivered", err)
	}
	return settled, nil
}

// SettleUser implements storage.FateStore: one range scan of the user's
// fates, then a Settle of each unsettled one.
func (s *Store) SettleUser(ctx context.Context, uaid, chid uuid.UUID, reason storage.DropReason) (int, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return 0, fmt.Errorf("embedded: settle user: %w", err)
	}
	if err := storage.ValidateSettle(storage.FateDropped, reason); err != nil {
		return 0, fmt.Errorf("embedded: settle user: %w", err)
	}
	return s.settleListed(ctx, "settle user", uaid, reason, func(f *fateRecord) bool {
		return chid == uuid.Nil || f.CHID == chid
	})
}

// SettleTopic implements storage.FateStore: one range scan of the user's
// fates, then a Settle of each of the topic still received or stored.
func (s *Store) SettleTopic(ctx context.Context, uaid, chid uuid.UUID, topic string, keep storage.FateID) (int, error) {
	if err := storage.ValidateChannel(uaid, chid); err != nil {
		return 0, fmt.Errorf("embedded: settle topic: %w", err)
	}
	if topic == "" || len(topic) > storage.MaxTopicLen {
		return 0, fmt.Errorf("embedded: settle topic: topic of %d bytes: %w", len(topic), storage.ErrInvalid)
	}
	return s.settleListed(ctx, "settle topic", uaid, storage.DropTopicReplaced, func(f *fateRecord) bool {
		return f.CHID == chid && f.Topic == topic && f.ID != keep &&
			(f.State == storage.FateReceived || f.State == storage.FateStored)
	})
}

// settleListed settles FateDropped/reason the unsettled fates of uaid
// that match, checking match again under the lock of each.
func (s *Store) settleListed(ctx context.Context, op string, uaid uuid.UUID, reason storage.DropReason, match func(*fateRecord) bool) (int, error) {
	if err := s.enter(ctx, op); err != nil {
		return 0, err
	}
	defer s.leave()
	var ids []storage.FateID
	err := s.scan(fatePrefix(uaid), nil, func(k, v []byte) (bool, error) {
		if len(k) != 1+16+16 {
			return true, nil // not a fate key: fateKey writes none such
		}
		id := storage.FateID(k[17:])
		f, err := decodeFate(uaid, id, v)
		if err == nil {
			err = s.readState(&f, v[0] == fateCodecWhole)
		}
		if err != nil {
			return false, fmt.Errorf("fate %s/%x: %w", uaid, id, err)
		}
		if !f.State.Terminal() && match(&f) {
			ids = append(ids, id)
		}
		return true, nil
	})
	if err != nil {
		return 0, failed(op, err)
	}
	n := 0
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("embedded: %s: %w: %w", op, storage.ErrUnavailable, err)
		}
		ok, err := s.settle(uaid, id, storage.FateDropped, reason, match)
		if err != nil {
			return n, failed(op, err)
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// SettleExpired implements storage.FateStore: range reads of the expiry
// index from its start, a Settle for each entry. Concurrent callers may
// read the same entries; the stripe lock lets one settle each.
func (s *Store) SettleExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("embedded: settle expired: limit %d: %w", limit, storage.ErrInvalid)
	}
	if err := s.enter(ctx, "settle expired"); err != nil {
		return 0, err
	}
	defer s.leave()
	lower := []byte{prefixFateExpiry}
	upper := binary.BigEndian.AppendUint64([]byte{prefixFateExpiry}, uint64(now.UnixNano()))
	n := 0
	for n < limit {
		entries, err := s.keysIn(lower, upper, sweepBatch)
		if err != nil {
			return n, failed("settle expired", err)
		}
		for _, e := range entries {
			if n == limit {
				return n, nil
			}
			if err := ctx.Err(); err != nil {
				return n, fmt.Errorf("embedded: settle expired: %w: %w", storage.ErrUnavailable, err)
			}
			ok, err := s.settleEntry(e)
			if err != nil {
				return n, failed("settle expired", err)
			}
			if ok {
				n++
			}
		}
		if len(entries) < sweepBatch {
			break
		}
		lower = append(entries[len(entries)-1], 0) // just after the last one read
	}
	return n, nil
}

// keysIn reads up to most keys in [lower, upper) (expiry entries).
func (s *Store) keysIn(lower, upper []byte, most int) ([][]byte, error) {
	var out [][]byte
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	for ok := it.First(); ok && len(out) < most; ok = it.Next() {
		out = append(out, append([]byte(nil), it.Key()...))
	}
	return out, errors.Join(it.Error(), it.Close())
}

// settleEntry settles FateExpired the fate an 'e' entry names; an entry
// of a fate already settled or gone is only deleted.
func (s *Store) settleEntry(e []byte) (bool, error) {
	if len(e) != fateEntryLen {
		return false, s.db.Delete(e, pebble.NoSync)
	}
	uaid, id := uuid.UUID(e[9:25]), storage.FateID(e[25:])
	if later, err := s.postpone(uaid, id, e); later || err != nil {
		return false, err
	}
	ok, err := s.settle(uaid, id, storage.FateExpired, storage.DropNone, nil)
	if err != nil || ok {
		return ok, err
	}
	// Not ours to settle: the winner's batch deleted the entry, or the
	// fate is gone. Losing this delete in a crash only means a revisit.
	return false, s.db.SingleDelete(e, pebble.NoSync)
}

// postpone gives the fate an expiry entry e names FateAckGrace more when
// its message is on its way to a user agent (storage.InHands: received,
// with a node or written) and has not had it yet: its Expiry and entry
// move on by that. It reports whether it did.
func (s *Store) postpone(uaid uuid.UUID, id storage.FateID, e []byte) (bool, error) {
	l := s.stripe(uaid)
	l.Lock()
	defer l.Unlock()
	f, found, err := s.getState(uaid, id)
	if err != nil || !found || !storage.InHands(f.State) || f.Graced {
		return false, err
	}
	f.Expiry, f.Graced = f.Expiry.Add(storage.FateAckGrace), true
	b := s.db.NewBatch()
	b.SingleDelete(e, nil)
	b.Set(fateStateKey(uaid, id), encodeState(&f), nil)
	b.Set(fateExpiryKey(f.Expiry.UnixNano(), uaid, id), nil, nil)
	if err := s.commit(b); err != nil {
		return false, err
	}
	return true, nil
}
