package embedded

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Outbound pushes (the sender's) use two more key spaces:
//
//	'p' id                       -> push (JSON, attempt log included)
//	's' state(1) at(8) id        -> state index entry (empty value)
//
// and the push API's indexes by key and of open pushes (pushindex.go),
// plus an 'x' expiry entry for pushes written with a TTL (final states).
// The state index is ordered by (state, At), so the due pushes of a state
// are one bounded range read from its start.
const (
	prefixPush  = 'p'
	prefixState = 's'
)

func pushKey(id uuid.UUID) []byte { return append([]byte{prefixPush}, id[:]...) }

func statePrefix(s storage.PushState) []byte {
	for i, v := range storage.PushStates {
		if v == s {
			return []byte{prefixState, byte(i + 1)}
		}
	}
	return []byte{prefixState, 0}
}

func stateKey(s storage.PushState, at int64, id uuid.UUID) []byte {
	k := binary.BigEndian.AppendUint64(statePrefix(s), uint64(at))
	return append(k, id[:]...)
}

// pushRecord is the stored form: the push plus when it expires.
type pushRecord struct {
	storage.Push
	ExpiresAt int64 `json:",omitempty"` // ns; 0: never
}

func (s *Store) getPush(id uuid.UUID) (pushRecord, bool, error) {
	v, err := s.get(pushKey(id))
	if err != nil || v == nil {
		return pushRecord{}, false, err
	}
	var r pushRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return pushRecord{}, false, fmt.Errorf("push %s: %w", id, errCorrupt)
	}
	return r, true, nil
}

// putPush adds the writes of p to b: the record, its index entry and, for
// a push with a TTL, its expiry entry.
func putPush(b *pebble.Batch, p *storage.Push) error {
	r := pushRecord{Push: *p}
	if p.TTL > 0 {
		r.ExpiresAt = time.UnixMilli(p.Updated).Add(time.Duration(p.TTL) * time.Second).UnixNano()
		b.Set(expiryKey(r.ExpiresAt, pushKey(p.ID)), nil, nil)
	}
	v, err := json.Marshal(&r)
	if err != nil {
		return err
	}
	b.Set(pushKey(p.ID), v, nil)
	b.Set(stateKey(p.State, p.At, p.ID), nil, nil)
	putIndexes(b, p)
	return nil
}

// dropPush adds the deletes of a stored push to b.
func dropPush(b *pebble.Batch, r *pushRecord) {
	b.Delete(stateKey(r.State, r.At, r.ID), nil)
	dropIndexes(b, &r.Push)
	if r.ExpiresAt > 0 {
		b.Delete(expiryKey(r.ExpiresAt, pushKey(r.ID)), nil)
	}
}

// SavePush implements storage.PushStore. One durable write.
func (s *Store) SavePush(ctx context.Context, p storage.Push) error {
	if err := storage.ValidatePush(&p); err != nil {
		return fmt.Errorf("embedded: save push: %w", err)
	}
	if p.Version != 1 || p.TTL != 0 {
		return fmt.Errorf("embedded: save push: a new push has version 1 and no TTL: %w", storage.ErrInvalid)
	}
	if err := s.enter(ctx, "save push"); err != nil {
		return err
	}
	defer s.leave()
	l := s.stripe(p.ID)
	l.Lock()
	defer l.Unlock()
	if _, found, err := s.getPush(p.ID); err != nil || found {
		if err == nil {
			return fmt.Errorf("embedded: save push %s: exists: %w", p.ID, storage.ErrConflict)
		}
		return failed("save push", err)
	}
	b := s.db.NewBatch()
	if err := putPush(b, &p); err != nil {
		b.Close()
		return failed("save push", err)
	}
	if err := s.commit(b); err != nil {
		return failed("save push", err)
	}
	return nil
}

// GetPush implements storage.PushStore. One local read.
func (s *Store) GetPush(ctx context.Context, id uuid.UUID) (storage.Push, error) {
	if err := s.enter(ctx, "get push"); err != nil {
		return storage.Push{}, err
	}
	defer s.leave()
	r, found, err := s.getPush(id)
	if err != nil {
		return storage.Push{}, failed("get push", err)
	}
	if !found || r.ExpiresAt > 0 && r.ExpiresAt <= time.Now().UnixNano() {
		return storage.Push{}, fmt.Errorf("embedded: get push %s: %w", id, storage.ErrNotFound)
	}
	return r.Push, nil
}

// UpdatePush implements storage.PushStore: the compare of the version and
// the write are exact under the push's stripe lock. One local read and one
// durable write.
func (s *Store) UpdatePush(ctx context.Context, prev *storage.Push, next storage.Push) error {
	return s.UpdatePushes(ctx, []storage.PushUpdate{{Prev: prev, Next: next}})[0]
}

// UpdatePushes implements storage.PushStore: every update that applies
// goes in one batch, one durable write. The pushes' stripes are locked
// in ascending order (no other path holds two at once), so each version
// compared stays the stored one until the batch is committed.
func (s *Store) UpdatePushes(ctx context.Context, updates []storage.PushUpdate) []error {
	errs := make([]error, len(updates))
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if len(updates) > storage.MaxPushBatch {
		return fail(fmt.Errorf("embedded: update pushes: %d updates, over %d: %w", len(updates), storage.MaxPushBatch, storage.ErrInvalid))
	}
	var stripes [256]bool
	for i, u := range updates {
		if err := storage.ValidatePushUpdate(u.Prev, &u.Next); err != nil {
			errs[i] = fmt.Errorf("embedded: update push: %w", err)
			continue
		}
		stripes[stripeIndex(u.Next.ID)] = true
	}
	if err := s.enter(ctx, "update push"); err != nil {
		return fail(err)
	}
	defer s.leave()
	for i := range stripes {
		if stripes[i] {
			s.stripes[i].Lock()
			defer s.stripes[i].Unlock()
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	applied := false
	seen := map[uuid.UUID]bool{}
	for i, u := range updates {
		if errs[i] != nil {
			continue
		}
		if seen[u.Next.ID] { // the batch reads the store, not itself
			errs[i] = fmt.Errorf("embedded: update push %s: twice in one batch: %w", u.Next.ID, storage.ErrInvalid)
			continue
		}
		seen[u.Next.ID] = true
		cur, found, err := s.getPush(u.Next.ID)
		switch {
		case err != nil:
			errs[i] = failed("update push", err)
		case !found:
			errs[i] = fmt.Errorf("embedded: update push %s: %w", u.Next.ID, storage.ErrNotFound)
		case cur.Version != u.Prev.Version:
			errs[i] = fmt.Errorf("embedded: update push %s: version %d, not %d: %w", u.Next.ID, cur.Version, u.Prev.Version, storage.ErrConflict)
		default:
			dropPush(b, &cur)
			if err := putPush(b, &u.Next); err != nil {
				return fail(failed("update push", err))
			}
			applied = true
		}
	}
	if applied {
		if err := b.Commit(s.wo); err != nil {
			return fail(failed("update push", err))
		}
	}
	return errs
}

// DuePushes implements storage.PushStore: one range read of the state's
// index from its start up to before, then a read of each push.
func (s *Store) DuePushes(ctx context.Context, state storage.PushState, before int64, limit int) ([]storage.Push, error) {
	if err := storage.ValidatePushPage(state, limit); err != nil {
		return nil, fmt.Errorf("embedded: due pushes: %w", err)
	}
	if err := s.enter(ctx, "due pushes"); err != nil {
		return nil, err
	}
	defer s.leave()
	upper := binary.BigEndian.AppendUint64(statePrefix(state), uint64(max(before, 0))+1)
	out, _, err := s.readIndex(state, statePrefix(state), upper, limit)
	return out, err
}

// ListPushes implements storage.PushStore. The cursor is the index key
// (At and id) of the last push returned.
func (s *Store) ListPushes(ctx context.Context, state storage.PushState, cursor string, limit int) ([]storage.Push, string, error) {
	if err := storage.ValidatePushPage(state, limit); err != nil {
		return nil, "", fmt.Errorf("embedded: list pushes: %w", err)
	}
	from := statePrefix(state)
	if cursor != "" {
		c, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(c) != 24 {
			return nil, "", fmt.Errorf("embedded: list pushes: bad cursor: %w", storage.ErrInvalid)
		}
		from = append(append(from, c...), 0) // just after the last key
	}
	if err := s.enter(ctx, "list pushes"); err != nil {
		return nil, "", err
	}
	defer s.leave()
	// A page may hold fewer pushes than entries read (an expired push the
	// sweeper has not reached yet): whether more follow is the index's
	// to say, not the page's length.
	out, last, err := s.readIndex(state, from, prefixEnd(statePrefix(state)), limit)
	if err != nil || last == nil {
		return out, "", err
	}
	return out, base64.RawURLEncoding.EncodeToString(last[2:]), nil
}

// readIndex reads up to limit live pushes of state whose index keys are in
// [from, upper), returning them and the last index key read.
// readIndex reads up to limit index entries of state in [from, upper) and
// the pushes they name that are still in state. The key returned is the
// last entry read when limit entries were read (more may follow), else nil.
func (s *Store) readIndex(state storage.PushState, from, upper []byte, limit int) ([]storage.Push, []byte, error) {
	var ids []uuid.UUID
	var last []byte
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: upper})
	if err != nil {
		return nil, nil, failed("read push index", err)
	}
	for ok := it.First(); ok && len(ids) < limit; ok = it.Next() {
		if k := it.Key(); len(k) == 2+8+16 {
			ids = append(ids, uuid.UUID(k[10:26]))
			last = append(last[:0], k...)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, nil, failed("read push index", err)
	}
	if len(ids) < limit {
		last = nil // the range is read to its end
	}
	now := time.Now().UnixNano()
	out := make([]storage.Push, 0, len(ids))
	for _, id := range ids {
		r, found, err := s.getPush(id)
		if err != nil {
			return nil, nil, failed("read push", err)
		}
		// Index and push are written in one batch, so a mismatch is only
		// an expired push the sweeper has not reached.
		if found && r.State == state && (r.ExpiresAt == 0 || r.ExpiresAt > now) {
			out = append(out, r.Push)
		}
	}
	return out, last, nil
}

// expirePush deletes a push whose TTL has passed (the sweeper's step for
// a push key; the caller holds the stripe).
func (s *Store) expirePush(key []byte, entry []byte, now time.Time) error {
	id, ok := uaidOf(key)
	if !ok {
		return s.db.Delete(entry, pebble.NoSync)
	}
	r, found, err := s.getPush(id)
	if err != nil {
		return err
	}
	if !found || r.ExpiresAt == 0 || r.ExpiresAt > now.UnixNano() {
		return s.db.Delete(entry, pebble.NoSync) // moved on: a newer entry exists, or none is needed
	}
	b := s.db.NewBatch()
	dropPush(b, &r)
	b.Delete(key, nil)
	b.Delete(entry, nil)
	return s.commit(b)
}
