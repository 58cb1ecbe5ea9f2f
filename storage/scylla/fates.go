package scylla

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Fates of tracked messages (storage.FateStore): tables fate, fate_expiry,
// fate_bucket, fate_count, receipt_sub and receipt; schema.cql says why
// each is shaped as it is.
//
// Every write of a fate row is a lightweight transaction, so exactly one
// settler wins across nodes and no plain write (ordered by its writer's
// clock) can undo a Paxos one. Only the winner of a transaction counts
// its milestone and writes the receipt.
const (
	fateRead = `SELECT chid, topic, message_id, expiry, receipt, state, reason, settled, winner, graced FROM fate`
	// fateSettleSet rewrites every column with the settle's TTL, so the
	// row expires whole.
	fateSettleSet = `UPDATE fate USING TTL ? SET chid = ?, topic = ?, message_id = ?, expiry = ?, receipt = ?,
		state = ?, reason = ?, settled = ?, winner = ?, graced = ? WHERE uaid = ? AND id = ?`
)

var (
	qFateTrack = messageLWT(`INSERT INTO fate (uaid, id, chid, topic, message_id, expiry, receipt, state, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, 1, 0) IF NOT EXISTS USING TTL ?`)
	// The states of the conditions are FateReceived..FateTransmitted
	// (TestFateStateValues holds them to storage's).
	qFateReach       = messageLWT(`UPDATE fate USING TTL ? SET state = ? WHERE uaid = ? AND id = ? IF state IN (1, 2, 3, 4)`)
	qFateSettle      = messageLWT(fateSettleSet + ` IF state IN (1, 2, 3, 4)`)
	qFateSettleStill = messageLWT(fateSettleSet + ` IF state IN (1, 2)`) // SettleTopic: still received or stored
	qFateGet         = read(fateRead + ` WHERE uaid = ? AND id = ?`)
	// qFatePostpone gives a fate on its way to its user agent
	// FateAckGrace once (postpone): every column rewritten with the new
	// TTL, on condition that it is still in the state (storage.InHands)
	// and with the expiry read, so of nodes postponing at once one does,
	// and a state that moved on meanwhile is not written back.
	qFatePostpone = messageLWT(`UPDATE fate USING TTL ? SET chid = ?, topic = ?, message_id = ?, expiry = ?, receipt = ?,
		state = ?, reason = ?, graced = true WHERE uaid = ? AND id = ? IF state = ? AND expiry = ?`)
	qFateUser = read(`SELECT id, chid, topic, message_id, expiry, receipt, state, reason FROM fate WHERE uaid = ?`)

	qFateExpiryAdd = messageWrite(`INSERT INTO fate_expiry (bucket, expiry, uaid, id) VALUES (?, ?, ?, ?) USING TTL ?`)
	qFateExpiryDel = messageWrite(`DELETE FROM fate_expiry WHERE bucket = ? AND expiry = ? AND uaid = ? AND id = ?`)
	qFateDue       = read(`SELECT expiry, uaid, id FROM fate_expiry
		WHERE bucket = ? AND (expiry, uaid, id) > (?, ?, ?) AND expiry < ? LIMIT ?`)
	qFateBucketAdd = messageWrite(`INSERT INTO fate_bucket (scope, bucket) VALUES (0, ?) USING TTL ?`)
	qFateBucketDel = messageWrite(`DELETE FROM fate_bucket WHERE scope = 0 AND bucket = ?`)
	qFateBuckets   = read(`SELECT bucket FROM fate_bucket WHERE scope = 0 AND bucket > ? AND bucket <= ? LIMIT ?`)

	qFateCount  = counterWrite(`UPDATE fate_count SET n = n + 1 WHERE shard = ? AND milestone = ?`)
	qFateCounts = read(`SELECT milestone, n FROM fate_count WHERE shard = ?`)

	qReceiptSubAdd = messageLWT(`INSERT INTO receipt_sub (id, key_hash, webhook, webhook_secret, created)
		VALUES (?, ?, ?, ?, ?) IF NOT EXISTS`)
	qReceiptSubGet  = read(`SELECT key_hash, webhook, webhook_secret, created FROM receipt_sub WHERE id = ?`)
	qReceiptHookAdd = messageWrite(`INSERT INTO receipt_hook (scope, id, webhook, webhook_secret) VALUES (0, ?, ?, ?)`)
	qReceiptHooks   = read(`SELECT id, webhook, webhook_secret FROM receipt_hook WHERE scope = 0 AND id > ? LIMIT ?`)
	qKeyHookAdd     = messageWrite(`INSERT INTO receipt_hook_by_key (key_hash, id) VALUES (?, ?)`)
	qKeyHooks       = read(`SELECT id FROM receipt_hook_by_key WHERE key_hash = ? LIMIT ?`)
	qReceiptAdd     = messageWrite(`INSERT INTO receipt (sub, at, id, message_id, state, reason)
		VALUES (?, ?, ?, ?, ?, ?) USING TTL ?`)
	qReceipts   = read(`SELECT at, id, message_id, state, reason FROM receipt WHERE sub = ? LIMIT ?`)
	qReceiptDel = messageWrite(`DELETE FROM receipt WHERE sub = ? AND at = ? AND id = ?`)
)

const (
	// fateBucket is the width of a fate_expiry partition.
	fateBucket = time.Minute
	// lateTrack is how far in the past an expiry may be and still be
	// indexed under its own minute (a TTL 0 message's expiry is its
	// Track's now, less the time the push took).
	lateTrack = time.Minute
	// bucketMargin is how long after its minute ends a bucket stays
	// listed even when swept empty: a Track writes into a minute at most
	// lateTrack after it ended, and this leaves another minute for clock
	// skew between nodes.
	bucketMargin = lateTrack + time.Minute
	// countShards is how many fate_count partitions each milestone's
	// increments spread over. Part of the schema: changing it leaves the
	// counts of the shards that go away unread.
	countShards = 16
	// bucketPage is how many buckets a sweep lists per read.
	bucketPage = 64
)

// fateRow is a fate row as read.
type fateRow struct {
	storage.Fate
	settled int64
	winner  uuid.UUID
	graced  bool // its expiry was moved on by FateAckGrace (postpone)
}

// expiryEnd is when the row of a fate expiring at expiry and written at
// now ends: storage.FateKeep after the later of the two.
func expiryEnd(expiry, now time.Time) time.Time {
	if expiry.Before(now) {
		expiry = now
	}
	return expiry.Add(storage.FateKeep)
}

// ttlUntil is the TTL in whole seconds, rounded up, of a cell written at
// now that must live until end (at least 1: 0 means "no TTL" to CQL).
func ttlUntil(end, now time.Time) int32 {
	left := (end.Sub(now) + time.Second - 1) / time.Second
	return int32(max(1, min(int64(left), math.MaxInt32)))
}

// bucketOf is the fate_expiry partition of a fate expiring at expiry
// tracked at now: the minute of its expiry, unless that is more than
// lateTrack before now (a Track long after its message expired); then
// the minute of now, so no Track writes into a minute a sweep may have
// unlisted already (see sweepBucket).
func bucketOf(expiry, now time.Time) int64 {
	if expiry.Before(now.Add(-lateTrack)) {
		expiry = now
	}
	return bucketStart(expiry)
}

func bucketStart(t time.Time) int64 {
	ms := t.UnixMilli()
	return ms - ms%fateBucket.Milliseconds()
}

// countShard spreads a milestone's increments by fate.
func countShard(id storage.FateID) int8 { return int8(id[0] % countShards) }

// receiptArg is the receipt column's value: an empty blob for none (a
// null would write a tombstone).
func receiptArg(r storage.ReceiptSubID) []byte {
	if r == (storage.ReceiptSubID{}) {
		return []byte{}
	}
	return r[:]
}

// Track implements storage.FateStore: the expiry entry (and its bucket,
// the first time this node sees it) in parallel, then the fate's INSERT
// ... IF NOT EXISTS, then the count. 2 RT: the entry comes first so that
// a crash leaves an entry without a fate (dropped by the sweep), never a
// fate that never expires.
func (s *Store) Track(ctx context.Context, f storage.Fate) error {
	if err := storage.ValidateFate(&f); err != nil {
		return fmt.Errorf("scylla: track: %w", err)
	}
	if err := s.open("track"); err != nil {
		return err
	}
	now := time.Now()
	ttl := ttlUntil(expiryEnd(f.Expiry, now), now)
	bucket := bucketOf(f.Expiry, now)
	err := each(2, func(i int) error {
		if i == 0 {
			return s.registerBucket(ctx, bucket, ttl)
		}
		return s.query(ctx, qFateExpiryAdd, bucket, f.Expiry.UnixNano(), uuidArg(f.UAID), f.ID[:], ttl).Exec()
	})
	if err != nil {
		return wrap("track: expiry entry", err)
	}
	applied, err := s.query(ctx, qFateTrack, uuidArg(f.UAID), f.ID[:], uuidArg(f.CHID), f.Topic, f.MessageID,
		f.Expiry.UnixNano(), receiptArg(f.Receipt), ttl).MapScanCAS(map[string]any{})
	if err != nil {
		// The outcome is unknown: a serial read completes the
		// transaction if it is in flight and tells.
		got, found, rerr := s.readFate(ctx, f.UAID, f.ID, true)
		if rerr != nil || !found || got.CHID != f.CHID || got.MessageID != f.MessageID {
			return wrap("track", err)
		}
		applied = true
	}
	if !applied {
		return fmt.Errorf("scylla: track: fate %x of %s: %w", f.ID, f.UAID, storage.ErrConflict)
	}
	s.count(ctx, f.ID, storage.Milestone{State: storage.FateReceived})
	return nil
}

// registerBucket lists bucket in fate_bucket unless this node did so
// already. Its TTL is the entry's, which outlives every entry written
// into it by the first.
func (s *Store) registerBucket(ctx context.Context, bucket int64, ttl int32) error {
	if s.buckets.has(bucket) {
		return nil
	}
	if err := s.query(ctx, qFateBucketAdd, bucket, ttl+int32(storage.FateKeep/time.Second)).Exec(); err != nil {
		return err
	}
	s.buckets.add(bucket, bucketStart(time.Now().Add(-bucketMargin)))
	return nil
}

// Reach implements storage.FateStore: a read, then an LWT conditional on
// the fate not being settled. A lost answer is settled by a serial read:
// a settled fate reports false, else the error is returned (the state
// may or may not have moved; either is a state the fate may be in).
func (s *Store) Reach(ctx context.Context, uaid uuid.UUID, id storage.FateID, st storage.FateState) (bool, error) {
	if err := storage.ValidateReach(st); err != nil || uaid == uuid.Nil {
		return false, fmt.Errorf("scylla: reach %s: %w", st, storage.ErrInvalid)
	}
	if err := s.open("reach"); err != nil {
		return false, err
	}
	row, found, err := s.readFate(ctx, uaid, id, false)
	if err != nil {
		return false, wrap("reach", err)
	}
	if !found {
		return false, nil
	}
	// Counted whether or not it is settled (storage.FateStore.Reach):
	// the message reached st; only the record came late.
	defer s.count(ctx, id, storage.Milestone{State: st})
	if row.State.Terminal() {
		return false, nil
	}
	now := time.Now()
	ttl := ttlUntil(expiryEnd(row.Expiry, now), now)
	applied, err := s.query(ctx, qFateReach, ttl, int8(st), uuidArg(uaid), id[:]).MapScanCAS(map[string]any{})
	if err != nil {
		if got, found, rerr := s.readFate(ctx, uaid, id, true); rerr == nil && (!found || got.State.Terminal()) {
			return false, nil
		}
		return false, wrap("reach", err)
	}
	return applied, nil
}

// Settle implements storage.FateStore: a read (the fate's columns, which
// the settle rewrites with its TTL), then the LWT. A winner whose receipt
// could not be written reports true with the error.
func (s *Store) Settle(ctx context.Context, uaid uuid.UUID, id storage.FateID, st storage.FateState, reason storage.DropReason) (bool, error) {
	if err := storage.ValidateSettle(st, reason); err != nil {
		return false, fmt.Errorf("scylla: settle: %w", err)
	}
	if err := storage.ValidateUAID(uaid); err != nil {
		return false, fmt.Errorf("scylla: settle: %w", err)
	}
	if err := s.open("settle"); err != nil {
		return false, err
	}
	row, found, err := s.readFate(ctx, uaid, id, false)
	if err != nil {
		return false, wrap("settle", err)
	}
	if !found {
		return false, nil
	}
	return s.settleRow(ctx, qFateSettle, row, st, reason)
}

// settleRow settles the fate read as row by the LWT st (its condition
// says which states may be settled), then counts and writes the receipt
// when it won. A lost answer is settled by a serial read of the winner.
func (s *Store) settleRow(ctx context.Context, lwt statement, row fateRow, st storage.FateState, reason storage.DropReason) (bool, error) {
	if row.State.Terminal() {
		return false, nil
	}
	now := time.Now()
	winner := uuid.New()
	f := &row.Fate
	applied, err := s.query(ctx, lwt, ttlUntil(expiryEnd(f.Expiry, now), now), uuidArg(f.CHID), f.Topic, f.MessageID,
		f.Expiry.UnixNano(), receiptArg(f.Receipt), int8(st), int8(reason), now.UnixNano(), uuidArg(winner), row.graced,
		uuidArg(f.UAID), f.ID[:]).MapScanCAS(map[string]any{})
	if err != nil {
		got, found, rerr := s.readFate(ctx, f.UAID, f.ID, true)
		if rerr != nil || !found || got.winner != winner {
			if rerr == nil && (!found || got.State.Terminal()) {
				return false, nil // another settled it (or it is gone)
			}
			return false, wrap("settle", err)
		}
		applied = true
	}
	if !applied {
		return false, nil
	}
	m := storage.Milestone{State: st}
	if st == storage.FateDropped {
		m.Reason = reason
	}
	s.count(ctx, f.ID, m)
	if f.Receipt == (storage.ReceiptSubID{}) {
		return true, nil
	}
	err = s.query(ctx, qReceiptAdd, f.Receipt[:], now.UnixNano(), f.ID[:], f.MessageID, int8(st), int8(reason),
		int32(storage.ReceiptKeep/time.Second)).Exec()
	if err != nil {
		return true, wrap("settle: the winner's receipt", err)
	}
	return true, nil
}

// count increments milestone m once. A counter increment is not
// idempotent: the driver never retries one that may have been applied
// (counterWrite), and a failure is logged and counted here, never
// returned, since the transaction it counts has applied and cannot be
// redone. A count may be short by the failures, never counted twice.
func (s *Store) count(ctx context.Context, id storage.FateID, m storage.Milestone) {
	if err := s.query(ctx, qFateCount, countShard(id), m.String()).Exec(); err != nil {
		n := s.lostCounts.Add(1)
		s.logger().Warn("scylla: milestone count lost", "milestone", m.String(), "lost", n, "err", err)
	}
}

// LostMilestoneCounts is how many milestone increments this Store could
// not apply since it opened: the milestone counts may be short by that
// many (autoendpoint_milestone_counts_lost_total).
func (s *Store) LostMilestoneCounts() int64 { return s.lostCounts.Load() }

// SettleUser implements storage.FateStore: the user's partition, read
// whole (paged), then an LWT for each unsettled fate (of chid, unless
// uuid.Nil).
func (s *Store) SettleUser(ctx context.Context, uaid, chid uuid.UUID, reason storage.DropReason) (int, error) {
	if err := storage.ValidateSettle(storage.FateDropped, reason); err != nil {
		return 0, fmt.Errorf("scylla: settle user: %w", err)
	}
	return s.settleWhere(ctx, "settle user", qFateSettle, uaid, reason, func(r *fateRow) bool {
		return chid == uuid.Nil || r.CHID == chid
	})
}

// SettleTopic implements storage.FateStore like SettleUser, with an LWT
// whose condition is "still received or stored".
func (s *Store) SettleTopic(ctx context.Context, uaid, chid uuid.UUID, topic string, keep storage.FateID) (int, error) {
	if topic == "" || chid == uuid.Nil {
		return 0, fmt.Errorf("scylla: settle topic: no topic or channel: %w", storage.ErrInvalid)
	}
	return s.settleWhere(ctx, "settle topic", qFateSettleStill, uaid, storage.DropTopicReplaced, func(r *fateRow) bool {
		return r.CHID == chid && r.Topic == topic && r.ID != keep &&
			(r.State == storage.FateReceived || r.State == storage.FateStored)
	})
}

// settleWhere drops, by the LWT lwt, the unsettled fates of uaid that
// match. The settles run one after another: a user has few fates in
// flight, and an error stops the rest.
func (s *Store) settleWhere(ctx context.Context, op string, lwt statement, uaid uuid.UUID, reason storage.DropReason, match func(*fateRow) bool) (int, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return 0, fmt.Errorf("scylla: %s: %w", op, err)
	}
	if err := s.open(op); err != nil {
		return 0, err
	}
	rows, err := s.userFates(ctx, uaid)
	if err != nil {
		return 0, wrap(op, err)
	}
	n := 0
	for i := range rows {
		if rows[i].State.Terminal() || !match(&rows[i]) {
			continue
		}
		won, err := s.settleRow(ctx, lwt, rows[i], storage.FateDropped, reason)
		if won {
			n++
		}
		if err != nil {
			return n, fmt.Errorf("scylla: %s: %w", op, err)
		}
	}
	return n, nil
}

// userFates reads every fate of uaid.
func (s *Store) userFates(ctx context.Context, uaid uuid.UUID) ([]fateRow, error) {
	iter := s.query(ctx, qFateUser, uuidArg(uaid)).PageSize(256).Iter()
	var out []fateRow
	for {
		r := fateRow{Fate: storage.Fate{UAID: uaid}}
		var id, receipt []byte
		var expiry int64
		var state, reason int8
		if !iter.Scan(&id, (*[16]byte)(&r.CHID), &r.Topic, &r.MessageID, &expiry, &receipt, &state, &reason) {
			break
		}
		if state == 0 {
			continue // cells expiring apart: a row on its way out
		}
		fillFate(&r.Fate, id, receipt, expiry, state, reason)
		out = append(out, r)
	}
	return out, iter.Close()
}

func fillFate(f *storage.Fate, id, receipt []byte, expiry int64, state, reason int8) {
	copy(f.ID[:], id)
	copy(f.Receipt[:], receipt)
	f.Expiry = time.Unix(0, expiry)
	f.State, f.Reason = storage.FateState(state), storage.DropReason(reason)
}

// readFate reads a fate at the read consistency, or at LOCAL_SERIAL when
// serial (which completes a transaction in flight on it first).
func (s *Store) readFate(ctx context.Context, uaid uuid.UUID, id storage.FateID, serial bool) (fateRow, bool, error) {
	query := s.query
	if serial {
		query = s.serialRead
	}
	r := fateRow{Fate: storage.Fate{UAID: uaid, ID: id}}
	var receipt []byte
	var expiry, settled *int64
	var state, reason *int8
	var winner *[16]byte
	var graced *bool
	err := query(ctx, qFateGet, uuidArg(uaid), id[:]).Scan((*[16]byte)(&r.CHID), &r.Topic, &r.MessageID,
		&expiry, &receipt, &state, &reason, &settled, &winner, &graced)
	if errors.Is(err, gocql.ErrNotFound) || err == nil && (state == nil || expiry == nil) {
		return fateRow{}, false, nil
	}
	if err != nil {
		return fateRow{}, false, err
	}
	fillFate(&r.Fate, id[:], receipt, *expiry, *state, deref(reason))
	if settled != nil {
		r.settled = *settled
	}
	if winner != nil {
		r.winner = *winner
	}
	r.graced = graced != nil && *graced
	return r, true, nil
}

// GetFate implements storage.FateStore. 1 RT.
func (s *Store) GetFate(ctx context.Context, uaid uuid.UUID, id storage.FateID) (storage.Fate, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return storage.Fate{}, fmt.Errorf("scylla: get fate: %w", err)
	}
	if err := s.open("get fate"); err != nil {
		return storage.Fate{}, err
	}
	r, found, err := s.readFate(ctx, uaid, id, false)
	if err != nil {
		return storage.Fate{}, wrap("get fate", err)
	}
	if !found {
		return storage.Fate{}, fmt.Errorf("scylla: get fate %x of %s: %w", id, uaid, storage.ErrNotFound)
	}
	return r.Fate, nil
}

// MilestoneCounts implements storage.FateStore: the 16 shards read in
// parallel and summed. Names no longer in storage.Milestones() are
// skipped.
func (s *Store) MilestoneCounts(ctx context.Context) (map[storage.Milestone]int64, error) {
	if err := s.open("milestone counts"); err != nil {
		return nil, err
	}
	byName := map[string]storage.Milestone{}
	out := map[storage.Milestone]int64{}
	for _, m := range storage.Milestones() {
		byName[m.String()] = m
		out[m] = 0
	}
	var shards [countShards]map[string]int64
	err := each(countShards, func(i int) error {
		got := map[string]int64{}
		iter := s.query(ctx, qFateCounts, int8(i)).Iter()
		var name string
		var n int64
		for iter.Scan(&name, &n) {
			got[name] = n
		}
		shards[i] = got
		return iter.Close()
	})
	if err != nil {
		return nil, wrap("milestone counts", err)
	}
	for _, got := range shards {
		for name, n := range got {
			if m, ok := byName[name]; ok {
				out[m] += n
			}
		}
	}
	return out, nil
}
