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

// Fates (storage.FateStore) use seven key spaces:
//
//	'f' uaid id                  -> fate: what never changes (fateFixed)
//	't' uaid id                  -> fate: where it is (fateState, small)
//	'e' expiry(8, ns) uaid id    -> unsettled fate by message expiry (empty value)
//	'n' state reason stripe      -> milestone count of one lock stripe (8 bytes)
//	'l' state stripe             -> fates of one lock stripe in a non-terminal state now (8 bytes, two's complement)
//	'g' sub                      -> receipt subscription
//	'w' sub at(8, ns) id         -> receipt
//
// plus an 'x' expiry entry per settled fate (at settling + FateKeep) and
// per receipt (at settling + ReceiptKeep) that the sweeper removes them by.
//
// singleWrite: an 'e' entry, a receipt and a receipt's 'x' entry are
// each written once (their keys hold a time and the fate's id, and a
// fate is tracked, graced and settled once) and deleted soon after:
// the 'e' entry when its fate settles, the receipt when it is
// acknowledged, often within the same memtable. They are deleted with
// Pebble's SingleDelete, which with the one write it deletes leaves
// nothing in a flush or compaction where a Delete's tombstone is written
// and carried down to the last level. SingleDelete is only correct for a
// key written once since it was last deleted: no other key may take it.
// A second SingleDelete of the same key (an ack repeated, a sweep
// revisiting an entry) is harmless.
//
// A fate is two records so that a move rewrites only the small one: the
// message id, topic and receipt subscription ('f', about 250 bytes with
// an endpoint's message id) are written once by Track, and each Reach
// and Settle writes the state ('t', about 20 bytes). Every byte a move
// writes passes through Pebble's flushes and compactions, which were
// most of a tracked message's cost (docs/benchmarks.md). Stores written
// before the split hold each fate whole in 'f' (fateCodecWhole) and no
// 't': such a fate's state is read from its 'f' until its first move
// writes its 't', which wins from then on.
//
// A fate is read, changed and written under its user's stripe lock, and
// the change, its count and its receipt go in one synced batch: a crash
// keeps all of them or none. Each count is split by stripe and a stripe's
// count is only written under that stripe's lock, so the read-increment-
// write of a count is exact without a lock of its own; MilestoneCounts
// and LiveCounts sum the stripes. A move of a fate adds its live counts
// (-1 the state it left, +1 the one it reached) to the batch that
// writes it, so they are exact too. The stripe keeps its counts' values
// in memory once read (stripeCounts), so a move reads no count from
// Pebble.
const (
	prefixFate       = 'f'
	prefixFateState  = 't'
	prefixFateExpiry = 'e'
	prefixCount      = 'n'
	prefixLive       = 'l'
	prefixReceiptSub = 'g'
	prefixReceipt    = 'w'
	prefixHook       = 'h'
	prefixKeyHook    = 'j' // key hash, subscription id: CountReceiptHooks

	fateCodec = 1
	// fateCodecWhole is an 'f' record of a store written before the
	// split: the whole fate, state included. fateCodecFixed is the 'f'
	// of a fate with a 't' (fateCodecState).
	fateCodecWhole = fateCodec
	fateCodecFixed = 2
	fateCodecState = 1
	// fateEntryLen is an 'e' key's length: prefix, expiry, uaid, id.
	fateEntryLen = 1 + 8 + 16 + 16
)

func fatePrefix(uaid uuid.UUID) []byte { return append([]byte{prefixFate}, uaid[:]...) }

func fateKey(uaid uuid.UUID, id storage.FateID) []byte {
	return append(fatePrefix(uaid), id[:]...)
}

func fateExpiryKey(expiry int64, uaid uuid.UUID, id storage.FateID) []byte {
	k := binary.BigEndian.AppendUint64([]byte{prefixFateExpiry}, uint64(expiry))
	return append(append(k, uaid[:]...), id[:]...)
}

func countKey(m storage.Milestone, stripe byte) []byte {
	return []byte{prefixCount, byte(m.State), byte(m.Reason), stripe}
}

// fateRecord is the stored fate plus when it was settled.
type fateRecord struct {
	storage.Fate
	SettledAt int64 // ns; 0 while unsettled
	// Graced: its Expiry was moved on by FateAckGrace (postpone).
	Graced bool
}

func fateStateKey(uaid uuid.UUID, id storage.FateID) []byte {
	return append(append([]byte{prefixFateState}, uaid[:]...), id[:]...)
}

// encodeFixed is f's 'f' record: what Track wrote.
func encodeFixed(f *fateRecord) []byte {
	b := make([]byte, 0, 40+len(f.Topic)+len(f.MessageID))
	b = append(b, fateCodecFixed)
	b = append(b, f.CHID[:]...)
	b = append(b, f.Receipt[:]...)
	b = appendString(b, f.Topic)
	return appendString(b, f.MessageID)
}

// encodeState is f's 't' record: where it is.
func encodeState(f *fateRecord) []byte {
	b := make([]byte, 0, 24)
	b = append(b, fateCodecState, byte(f.State), byte(f.Reason), boolByte(f.Graced))
	b = binary.AppendVarint(b, f.Expiry.UnixNano())
	return binary.AppendVarint(b, f.SettledAt)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// decodeState reads a 't' record into f.
func decodeState(f *fateRecord, b []byte) error {
	if len(b) < 4 || b[0] != fateCodecState {
		return errCorrupt
	}
	f.State, f.Reason, f.Graced = storage.FateState(b[1]), storage.DropReason(b[2]), b[3] == 1
	r := reader{b: b[4:]}
	f.Expiry = time.Unix(0, r.varint())
	f.SettledAt = r.varint()
	return r.done()
}

// decodeFate reads an 'f' record, of either form; a fixed one leaves
// the state to decodeState.
func decodeFate(uaid uuid.UUID, id storage.FateID, b []byte) (fateRecord, error) {
	f := fateRecord{Fate: storage.Fate{UAID: uaid, ID: id}}
	if len(b) == 0 || b[0] != fateCodecWhole && b[0] != fateCodecFixed {
		return f, errCorrupt
	}
	r := reader{b: b[1:]}
	copy(f.CHID[:], r.bytes(16))
	copy(f.Receipt[:], r.bytes(16))
	if b[0] == fateCodecWhole {
		if sr := r.bytes(3); sr != nil {
			f.State, f.Reason, f.Graced = storage.FateState(sr[0]), storage.DropReason(sr[1]), sr[2] == 1
		}
		f.Expiry = time.Unix(0, r.varint())
		f.SettledAt = r.varint()
	}
	f.Topic = r.string()
	f.MessageID = r.string()
	return f, r.done()
}

// getFate reads the fate (uaid, id) whole: its 'f' and its 't'.
func (s *Store) getFate(uaid uuid.UUID, id storage.FateID) (fateRecord, bool, error) {
	v, err := s.get(fateKey(uaid, id))
	if err != nil || v == nil {
		return fateRecord{}, false, err
	}
	f, err := decodeFate(uaid, id, v)
	if err == nil {
		err = s.readState(&f, v[0] == fateCodecWhole)
	}
	if err != nil {
		return fateRecord{}, false, fmt.Errorf("fate %s/%x: %w", uaid, id, err)
	}
	return f, true, nil
}

// readState reads f's 't' into f; whole: its 'f' is of the form before
// the split, whose state stands while it has no 't'.
func (s *Store) readState(f *fateRecord, whole bool) error {
	v, err := s.get(fateStateKey(f.UAID, f.ID))
	switch {
	case err != nil:
		return err
	case v == nil && whole:
		return nil
	case v == nil:
		return errCorrupt // a fixed 'f' is written with its 't'
	}
	return decodeState(f, v)
}

// getState reads where the fate (uaid, id) is, without what never
// changes (Reach, postpone): its 't' alone when it has one. found is
// false for a fate that does not exist.
func (s *Store) getState(uaid uuid.UUID, id storage.FateID) (f fateRecord, found bool, err error) {
	f.UAID, f.ID = uaid, id
	v, err := s.get(fateStateKey(uaid, id))
	if err != nil {
		return f, false, err
	}
	if v == nil {
		// No 't': a fate of a store before the split, or none.
		return s.getFate(uaid, id)
	}
	if err := decodeState(&f, v); err != nil {
		return f, false, fmt.Errorf("fate state %s/%x: %w", uaid, id, err)
	}
	return f, true, nil
}

// count adds one to milestone m in b; the caller holds uaid's stripe.
func (s *Store) count(b *countBatch, uaid uuid.UUID, m storage.Milestone) error {
	return b.add(countKey(m, stripeIndex(uaid)), 1)
}

// move adds a fate of uaid's move from the state from to the state to
// to the live counts in b: -1 from, +1 to, where either is non-terminal
// (0: none, as Track's from); a terminal state's count is its
// milestone's. The caller holds uaid's stripe.
func (s *Store) move(b *countBatch, uaid uuid.UUID, from, to storage.FateState) error {
	if from == to {
		return nil
	}
	for _, c := range [2]struct {
		st    storage.FateState
		delta uint64
	}{{from, ^uint64(0)}, {to, 1}} {
		if c.st == 0 || c.st.Terminal() {
			continue
		}
		if err := b.add([]byte{prefixLive, byte(c.st), stripeIndex(uaid)}, c.delta); err != nil {
			return err
		}
	}
	return nil
}

// Track implements storage.FateStore. One local read and one durable
// write, under the user's stripe lock.
func (s *Store) Track(ctx context.Context, f storage.Fate) error {
	if err := storage.ValidateFate(&f); err != nil {
		return fmt.Errorf("embedded: track: %w", err)
	}
	if err := s.enter(ctx, "track"); err != nil {
		return err
	}
	defer s.leave()
	l := s.stripe(f.UAID)
	l.Lock()
	defer l.Unlock()
	if v, err := s.get(fateKey(f.UAID, f.ID)); err != nil || v != nil {
		if err == nil {
			return fmt.Errorf("embedded: track %s/%x: exists: %w", f.UAID, f.ID, storage.ErrConflict)
		}
		return failed("track", err)
	}
	f.Reason = storage.DropNone
	rec := fateRecord{Fate: f}
	b := s.newCountBatch(f.UAID)
	b.Set(fateKey(f.UAID, f.ID), encodeFixed(&rec), nil)
	b.Set(fateStateKey(f.UAID, f.ID), encodeState(&rec), nil)
	b.Set(fateExpiryKey(f.Expiry.UnixNano(), f.UAID, f.ID), nil, nil)
	if err := errors.Join(s.count(b, f.UAID, storage.Milestone{State: storage.FateReceived}),
		s.move(b, f.UAID, 0, storage.FateReceived)); err != nil {
		b.Close()
		return failed("track", err)
	}
	if err := b.commit(s.wo); err != nil {
		return failed("track", err)
	}
	return nil
}

// Reach implements storage.FateStore: ReachAll of the one fate.
func (s *Store) Reach(ctx context.Context, uaid uuid.UUID, id storage.FateID, st storage.FateState) (bool, error) {
	n, err := s.ReachAll(ctx, uaid, []storage.FateID{id}, st)
	return n == 1, err
}

// reachIn adds Reach's writes to b, under the user's stripe lock held by
// the caller: the state and the counts, for a settled fate the milestone
// count alone, for a missing one nothing.
func (s *Store) reachIn(b *countBatch, uaid uuid.UUID, id storage.FateID, st storage.FateState) (bool, error) {
	f, found, err := s.getState(uaid, id)
	if err != nil || !found {
		return false, err
	}
	err = s.count(b, uaid, storage.Milestone{State: st})
	if f.State.Terminal() {
		return false, err
	}
	err = errors.Join(err, s.move(b, uaid, f.State, st))
	f.State = st
	b.Set(fateStateKey(uaid, id), encodeState(&f), nil)
	return err == nil, err
}

// ReachAll implements storage.FateStore. One local read of each fate's
// state and one write, not synced, under the user's stripe lock: the
// states and the counts, or for a settled fate the milestone count alone.
func (s *Store) ReachAll(ctx context.Context, uaid uuid.UUID, ids []storage.FateID, st storage.FateState) (int, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return 0, fmt.Errorf("embedded: reach: %w", err)
	}
	if err := storage.ValidateReach(st); err != nil {
		return 0, fmt.Errorf("embedded: %w", err)
	}
	if err := s.enter(ctx, "reach"); err != nil {
		return 0, err
	}
	defer s.leave()
	l := s.stripe(uaid)
	l.Lock()
	defer l.Unlock()
	b := s.newCountBatch(uaid)
	n := 0
	for _, id := range ids {
		moved, err := s.reachIn(b, uaid, id, st)
		if err != nil {
			b.Close()
			return 0, failed("reach", err)
		}
		if moved {
			n++
		}
	}
	// Not synced (storage.FateStore.Reach): the next synced write carries
	// it; an intermediate milestone lost in a crash costs one count.
	if err := b.commit(pebble.NoSync); err != nil {
		return 0, failed("reach", err)
	}
	return n, nil
}

// GetFate implements storage.FateStore. One local read.
func (s *Store) GetFate(ctx context.Context, uaid uuid.UUID, id storage.FateID) (storage.Fate, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return storage.Fate{}, fmt.Errorf("embedded: get fate: %w", err)
	}
	if err := s.enter(ctx, "get fate"); err != nil {
		return storage.Fate{}, err
	}
	defer s.leave()
	f, found, err := s.getFate(uaid, id)
	if err != nil {
		return storage.Fate{}, failed("get fate", err)
	}
	if !found || f.SettledAt != 0 && f.SettledAt+int64(storage.FateKeep) <= time.Now().UnixNano() {
		return storage.Fate{}, fmt.Errorf("embedded: get fate %s/%x: %w", uaid, id, storage.ErrNotFound)
	}
	return f.Fate, nil
}

// MilestoneCounts implements storage.FateStore. One local range scan of
// every stripe's counts.
func (s *Store) MilestoneCounts(ctx context.Context) (map[storage.Milestone]int64, error) {
	if err := s.enter(ctx, "milestone counts"); err != nil {
		return nil, err
	}
	defer s.leave()
	out := make(map[storage.Milestone]int64)
	for _, m := range storage.Milestones() {
		out[m] = 0
	}
	err := s.scan([]byte{prefixCount}, nil, func(k, v []byte) (bool, error) {
		if len(k) != 4 || len(v) != 8 {
			return false, fmt.Errorf("count %x: %w", k, errCorrupt)
		}
		m := storage.Milestone{State: storage.FateState(k[1]), Reason: storage.DropReason(k[2])}
		out[m] += int64(binary.BigEndian.Uint64(v))
		return true, nil
	})
	if err != nil {
		return nil, failed("milestone counts", err)
	}
	return out, nil
}

// LiveCounts implements storage.FateStore: one local range scan of every
// stripe's live counts, and MilestoneCounts' for the terminal states.
func (s *Store) LiveCounts(ctx context.Context) (map[storage.FateState]int64, error) {
	milestones, err := s.MilestoneCounts(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.enter(ctx, "live counts"); err != nil {
		return nil, err
	}
	defer s.leave()
	out := make(map[storage.FateState]int64, len(storage.FateStates))
	for _, st := range storage.FateStates {
		out[st] = 0
	}
	for m, n := range milestones {
		if m.State.Terminal() {
			out[m.State] += n
		}
	}
	err = s.scan([]byte{prefixLive}, nil, func(k, v []byte) (bool, error) {
		if len(k) != 3 || len(v) != 8 || storage.FateState(k[1]).Terminal() {
			return false, fmt.Errorf("live count %x: %w", k, errCorrupt)
		}
		out[storage.FateState(k[1])] += int64(binary.BigEndian.Uint64(v))
		return true, nil
	})
	if err != nil {
		return nil, failed("live counts", err)
	}
	return out, nil
}

// expireFate deletes a settled fate past FateKeep (the sweeper's step for
// a fate key; the caller holds the stripe).
func (s *Store) expireFate(key, entry []byte, now time.Time) error {
	if len(key) != 1+16+16 {
		return s.db.Delete(entry, pebble.NoSync)
	}
	uaid, id := uuid.UUID(key[1:17]), storage.FateID(key[17:])
	f, found, err := s.getState(uaid, id)
	if err != nil {
		return err
	}
	if !found || f.SettledAt == 0 || f.SettledAt+int64(storage.FateKeep) > now.UnixNano() {
		return s.db.Delete(entry, pebble.NoSync)
	}
	b := s.db.NewBatch()
	b.Delete(key, nil)
	b.Delete(fateStateKey(uaid, id), nil)
	b.Delete(entry, nil)
	return s.commit(b)
}
