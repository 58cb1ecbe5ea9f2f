package scylla

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// The sweep of expired fates (SettleExpired). fate_bucket lists the
// minutes fate_expiry has entries in; a sweep reads it from its start up
// to now's minute (a margin more), and each listed minute's due entries
// in expiry order, a page at a time. Every entry read is settled through the fate's LWT
// (so of several nodes sweeping at once, each fate settles once) and
// then deleted, whoever won. A minute read empty is unlisted once no
// Track can still write into it (bucketMargin after it ended).

// expiryEntry is one row of fate_expiry.
type expiryEntry struct {
	expiry int64
	uaid   uuid.UUID
	id     storage.FateID
}

// SettleExpired implements storage.FateStore. Oldest first within each
// minute, and minute after minute; a fate tracked more than lateTrack
// after its expiry is listed under its Track's minute, so it comes in
// that minute's order.
// Each page of entries (at most the settles left to make) is settled in
// parallel: a read and an LWT each, then the entry's delete.
func (s *Store) SettleExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := storage.ValidateLimit(limit); err != nil {
		return 0, fmt.Errorf("scylla: settle expired: %w", err)
	}
	if err := s.open("settle expired"); err != nil {
		return 0, err
	}
	settled := 0
	after := int64(math.MinInt64)
	// A fate tracked after now (by the wall clock, or a node's clock
	// ahead) may be listed up to its Track's minute; the entries read
	// are still only those expiring before now.
	last := bucketStart(later(now, time.Now()).Add(bucketMargin))
	for settled < limit {
		buckets, err := s.listBuckets(ctx, after, last)
		if err != nil {
			return settled, wrap("settle expired: buckets", err)
		}
		for _, b := range buckets {
			n, err := s.sweepBucket(ctx, b, now, limit-settled)
			settled += n
			if err != nil {
				return settled, fmt.Errorf("scylla: settle expired: %w", err)
			}
			if settled == limit {
				return settled, nil
			}
		}
		if len(buckets) < bucketPage {
			break
		}
		after = buckets[len(buckets)-1]
	}
	return settled, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (s *Store) listBuckets(ctx context.Context, after, last int64) ([]int64, error) {
	iter := s.query(ctx, qFateBuckets, after, last, bucketPage).Iter()
	var out []int64
	var b int64
	for iter.Scan(&b) {
		out = append(out, b)
	}
	return out, iter.Close()
}

// sweepBucket settles up to limit fates of bucket due before now. It
// unlists the bucket when it read it to the end, every entry of it is
// due (now is past its minute) and no Track still writes into it.
func (s *Store) sweepBucket(ctx context.Context, bucket int64, now time.Time, limit int) (int, error) {
	settled := 0
	cursor := expiryEntry{expiry: math.MinInt64}
	for settled < limit {
		want := limit - settled
		page, err := s.dueEntries(ctx, bucket, cursor, now, want)
		if err != nil {
			return settled, wrap("due entries", err)
		}
		n, err := s.expireEntries(ctx, bucket, page, now)
		settled += n
		if err != nil {
			return settled, err
		}
		if len(page) < want {
			end := bucket + fateBucket.Milliseconds()
			if end <= now.UnixMilli() && end+bucketMargin.Milliseconds() <= time.Now().UnixMilli() {
				if err := s.query(ctx, qFateBucketDel, bucket).Exec(); err != nil {
					return settled, wrap("unlist bucket", err)
				}
			}
			return settled, nil
		}
		cursor = page[len(page)-1]
	}
	return settled, nil
}

// dueEntries reads up to limit entries of bucket after cursor that expire
// before now.
func (s *Store) dueEntries(ctx context.Context, bucket int64, cursor expiryEntry, now time.Time, limit int) ([]expiryEntry, error) {
	iter := s.query(ctx, qFateDue, bucket, cursor.expiry, uuidArg(cursor.uaid), cursor.id[:], now.UnixNano(), limit).Iter()
	var out []expiryEntry
	for {
		var e expiryEntry
		var id []byte
		if !iter.Scan(&e.expiry, (*[16]byte)(&e.uaid), &id) {
			break
		}
		copy(e.id[:], id)
		out = append(out, e)
	}
	return out, iter.Close()
}

// expireEntries settles the fates of page FateExpired, in parallel, and
// deletes each entry whose fate is settled (by anyone), gone, or not due
// after all (an entry of a second Track of the id, which conflicted).
// Returns how many this call settled.
func (s *Store) expireEntries(ctx context.Context, bucket int64, page []expiryEntry, now time.Time) (int, error) {
	var won atomic.Int64
	err := each(len(page), func(i int) error {
		e := page[i]
		row, found, err := s.readFate(ctx, e.uaid, e.id, false)
		if err != nil {
			return wrap("read fate", err)
		}
		if found && !row.State.Terminal() && row.Expiry.Before(now) && graceDue(&row) {
			if err := s.postpone(ctx, row, now); err != nil {
				return err // keep the entry: the next sweep tries again
			}
			return wrap("delete entry", s.delEntry(ctx, bucket, e))
		}
		if found && !row.State.Terminal() && row.Expiry.Before(now) {
			// Read again if its state moves under the settle: expired
			// still, unless it is now owed its grace, which the next
			// sweep gives it by this entry (postponed by another node
			// instead, it has an entry of its own).
			owed := false
			ok, err := s.settleRow(ctx, row, storage.FateExpired, storage.DropNone, func(r *fateRow) bool {
				owed = graceDue(r) && r.Expiry.Before(now)
				return r.Expiry.Before(now) && !owed
			})
			if !ok && (err != nil || owed) {
				return err // the fate may be unsettled: keep its entry
			}
			if ok {
				won.Add(1)
				// Settled, its receipt perhaps lost (err): the entry
				// has served either way.
				if err != nil {
					return errors.Join(err, wrap("delete entry", s.delEntry(ctx, bucket, e)))
				}
			}
		}
		return wrap("delete entry", s.delEntry(ctx, bucket, e))
	})
	return int(won.Load()), err
}

// graceDue reports whether the fate r, once expired, is owed
// FateAckGrace: on its way to its user agent, and not given it yet.
func graceDue(r *fateRow) bool { return storage.InHands(r.State) && !r.graced }

// postpone gives an expired fate whose message is on its way to a user
// agent (storage.InHands) FateAckGrace more for its ack
// (storage.FateStore.SettleExpired): its new expiry entry first (as
// Track, so a crash leaves an entry, never an unindexed fate), then the
// row, on condition (qFatePostpone). Lost to another node, to a settle
// or to a move to another state, nothing more is needed: the new entry,
// due later, finds the fate as it is then.
func (s *Store) postpone(ctx context.Context, row fateRow, now time.Time) error {
	f := &row.Fate
	next := f.Expiry.Add(storage.FateAckGrace)
	ttl := ttlUntil(expiryEnd(next, now), now)
	bucket := bucketOf(next, now)
	if err := s.registerBucket(ctx, bucket, ttl); err != nil {
		return wrap("postpone: list bucket", err)
	}
	if err := s.query(ctx, qFateExpiryAdd, bucket, next.UnixNano(), uuidArg(f.UAID), f.ID[:], ttl).Exec(); err != nil {
		return wrap("postpone: expiry entry", err)
	}
	_, err := s.query(ctx, qFatePostpone, ttl, uuidArg(f.CHID), f.Topic, f.MessageID, next.UnixNano(), receiptArg(f.Receipt),
		int8(f.State), int8(f.Reason), uuidArg(f.UAID), f.ID[:], int8(f.State), f.Expiry.UnixNano()).MapScanCAS(map[string]any{})
	return wrap("postpone", err)
}

func (s *Store) delEntry(ctx context.Context, bucket int64, e expiryEntry) error {
	return s.query(ctx, qFateExpiryDel, bucket, e.expiry, uuidArg(e.uaid), e.id[:]).Exec()
}

// bucketSet is the buckets this node listed in fate_bucket, so each
// node lists each minute once. Safe for concurrent use.
type bucketSet struct {
	mu  sync.Mutex
	set map[int64]struct{}
}

func (b *bucketSet) has(bucket int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.set[bucket]
	return ok
}

// add remembers bucket, and forgets the buckets before floor (minutes
// now past, which no Track of this node writes into again) when the set
// has grown: one entry per minute of expiry, up to a month of them.
func (b *bucketSet) add(bucket, floor int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.set == nil {
		b.set = map[int64]struct{}{}
	}
	if len(b.set) >= 4096 {
		for k := range b.set {
			if k < floor {
				delete(b.set, k)
			}
		}
	}
	b.set[bucket] = struct{}{}
}
