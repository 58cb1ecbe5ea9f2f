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
//
// A move (Reach, Settle) is conditional on the state it was read in
// (IF state = ?), so its winner knows the state it moved the fate from:
// it adds -1 to that state's live count and +1 to the state reached, in
// fate_count beside the milestones (live_<state> rows), with the
// milestone's increment in one counter batch. A move that finds the
// state moved on reads it again (at SERIAL) and tries again, up to
// moveTries times.
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
	// Each move is conditional on the state it was read in; winner names
	// the move, so an unknown outcome can be told by a serial read.
	qFateReach  = messageLWT(`UPDATE fate USING TTL ? SET state = ?, winner = ? WHERE uaid = ? AND id = ? IF state = ?`)
	qFateSettle = messageLWT(fateSettleSet + ` IF state = ?`)
	qFateGet    = read(fateRead + ` WHERE uaid = ? AND id = ?`)
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

	qFateCount  = counterWrite(`UPDATE fate_count SET n = n + ? WHERE shard = ? AND milestone = ?`)
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
	// moveTries bounds the tries of one move whose fate's state keeps
	// moving under it (each try a serial read and an LWT). Each failed
	// try is another mover's success, and each mover succeeds once: a
	// fate has an endpoint node's, a connection node's and a sweep's at
	// once, far fewer.
	moveTries = 8
	// livePrefix names a live count's fate_count row: live_<state>.
	livePrefix = "live_"
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
	s.count(ctx, f.ID, storage.Milestone{State: storage.FateReceived}, 0, storage.FateReceived)
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
// the state read, again after a serial read while the state moved on. A
// lost answer is settled by a serial read: the move's own winner there
// means it applied; a settled fate reports false; else the error is
// returned (the state may or may not have moved; either is a state the
// fate may be in, and a move that cannot be told is a lost count).
func (s *Store) Reach(ctx context.Context, uaid uuid.UUID, id storage.FateID, st storage.FateState) (bool, error) {
	if err := storage.ValidateReach(st); err != nil || uaid == uuid.Nil {
		return false, fmt.Errorf("scylla: reach %s: %w", st, storage.ErrInvalid)
	}
	if err := s.open("reach"); err != nil {
		return false, err
	}
	row, found, err := s.readFate(ctx, uaid, id, false)
	for try := 1; ; try++ {
		if err != nil {
			return false, wrap("reach", err)
		}
		if !found {
			return false, nil
		}
		if row.State.Terminal() {
			// Counted all the same (storage.FateStore.Reach): the
			// message reached st; only the record came late.
			s.count(ctx, id, storage.Milestone{State: st}, 0, 0)
			return false, nil
		}
		var moved, done bool
		if moved, done, err = s.reachRow(ctx, row, st); done || err != nil {
			return moved, err
		}
		if try == moveTries {
			return false, fmt.Errorf("scylla: reach %s: the fate's state moved %d times: %w", st, try, storage.ErrUnavailable)
		}
		row, found, err = s.readFate(ctx, uaid, id, true)
	}
}

// reachRow is one try of Reach on the fate read as row (unsettled):
// done unless its state moved on since it was read.
func (s *Store) reachRow(ctx context.Context, row fateRow, st storage.FateState) (moved, done bool, err error) {
	now := time.Now()
	mover := uuid.New()
	f := &row.Fate
	applied, err := s.query(ctx, qFateReach, ttlUntil(expiryEnd(f.Expiry, now), now), int8(st), uuidArg(mover),
		uuidArg(f.UAID), f.ID[:], int8(row.State)).MapScanCAS(map[string]any{})
	if err != nil {
		got, found, rerr := s.readFate(ctx, f.UAID, f.ID, true)
		if rerr != nil || !found || got.winner != mover {
			s.count(ctx, f.ID, storage.Milestone{State: st}, 0, 0)
			if rerr != nil || !found || got.State != row.State || got.winner != row.winner {
				s.lost(storage.Milestone{State: st}, 2, err) // applied or not: cannot be told
			}
			if rerr == nil && (!found || got.State.Terminal()) {
				return false, true, nil
			}
			return false, true, wrap("reach", err)
		}
		applied = true
	}
	if !applied {
		return false, false, nil
	}
	s.count(ctx, f.ID, storage.Milestone{State: st}, row.State, st)
	return true, true, nil
}

// ReachAll implements storage.FateStore: a Reach of each id in turn.
func (s *Store) ReachAll(ctx context.Context, uaid uuid.UUID, ids []storage.FateID, st storage.FateState) (int, error) {
	n := 0
	for _, id := range ids {
		moved, err := s.Reach(ctx, uaid, id, st)
		if err != nil {
			return n, err
		}
		if moved {
			n++
		}
	}
	return n, nil
}

// DeleteDelivered implements storage.FateStore: DeleteMessage, then
// Settle. A CAS cannot share a batch with the delete, which is in
// another table.
func (s *Store) DeleteDelivered(ctx context.Context, uaid uuid.UUID, k storage.MessageKey, id storage.FateID) (bool, error) {
	if err := s.DeleteMessage(ctx, uaid, k); err != nil {
		return false, err
	}
	return s.Settle(ctx, uaid, id, storage.FateDelivered, storage.DropNone)
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
	return s.settleRow(ctx, row, st, reason, nil)
}

// settleRow settles the fate read as row unless it is settled or, when
// must is set, must rejects it (SettleTopic's states): an LWT
// conditional on the state read, again after a serial read while the
// state moved on. The winner counts and writes the receipt.
func (s *Store) settleRow(ctx context.Context, row fateRow, st storage.FateState, reason storage.DropReason, must func(*fateRow) bool) (bool, error) {
	for try := 1; ; try++ {
		if row.State.Terminal() || must != nil && !must(&row) {
			return false, nil
		}
		won, done, err := s.settleTry(ctx, row, st, reason)
		if done || err != nil {
			return won, err
		}
		if try == moveTries {
			return false, fmt.Errorf("scylla: settle: the fate's state moved %d times: %w", try, storage.ErrUnavailable)
		}
		got, found, err := s.readFate(ctx, row.UAID, row.ID, true)
		if err != nil || !found {
			return false, wrap("settle", err)
		}
		row = got
	}
}

// settleTry is one try of settleRow on the fate read as row (unsettled):
// done unless its state moved on since it was read. A lost answer is
// settled by a serial read of the winner.
func (s *Store) settleTry(ctx context.Context, row fateRow, st storage.FateState, reason storage.DropReason) (won, done bool, err error) {
	now := time.Now()
	winner := uuid.New()
	f := &row.Fate
	applied, err := s.query(ctx, qFateSettle, ttlUntil(expiryEnd(f.Expiry, now), now), uuidArg(f.CHID), f.Topic, f.MessageID,
		f.Expiry.UnixNano(), receiptArg(f.Receipt), int8(st), int8(reason), now.UnixNano(), uuidArg(winner), row.graced,
		uuidArg(f.UAID), f.ID[:], int8(row.State)).MapScanCAS(map[string]any{})
	if err != nil {
		got, found, rerr := s.readFate(ctx, f.UAID, f.ID, true)
		if rerr != nil || !found || got.winner != winner {
			if rerr == nil && (!found || got.State.Terminal()) {
				return false, true, nil // another settled it (or it is gone)
			}
			return false, true, wrap("settle", err)
		}
		applied = true
	}
	if !applied {
		return false, false, nil
	}
	m := storage.Milestone{State: st}
	if st == storage.FateDropped {
		m.Reason = reason
	}
	s.count(ctx, f.ID, m, row.State, st)
	if f.Receipt == (storage.ReceiptSubID{}) {
		return true, true, nil
	}
	err = s.query(ctx, qReceiptAdd, f.Receipt[:], now.UnixNano(), f.ID[:], f.MessageID, int8(st), int8(reason),
		int32(storage.ReceiptKeep/time.Second)).Exec()
	if err != nil {
		return true, true, wrap("settle: the winner's receipt", err)
	}
	return true, true, nil
}

// count adds one to milestone m and moves a fate's live counts from the
// state from to the state to (0: none; a terminal state is counted by its
// milestone), in one counter batch on the fate's shard. A counter
// increment is not idempotent: the driver never retries one that may
// have been applied (counterWrite), and a failure is logged and counted
// here, never returned, since the transaction it counts has applied and
// cannot be redone. A count may be short by the failures, never counted
// twice.
func (s *Store) count(ctx context.Context, id storage.FateID, m storage.Milestone, from, to storage.FateState) {
	shard := countShard(id)
	b := s.session.BatchWithContext(ctx, gocql.CounterBatch)
	b.SetConsistency(s.levels[qFateCount.class])
	b.RetryPolicy(s.once)
	b.Query(qFateCount.cql, int64(1), shard, m.String())
	for _, c := range [2]struct {
		st storage.FateState
		n  int64
	}{{from, -1}, {to, 1}} {
		if from != to && c.st != 0 && !c.st.Terminal() {
			b.Query(qFateCount.cql, c.n, shard, livePrefix+c.st.String())
		}
	}
	var err error
	if b.Size() == 1 {
		err = s.query(ctx, qFateCount, int64(1), shard, m.String()).Exec()
	} else {
		for i := range b.Entries {
			b.Entries[i].Idempotent = false
		}
		err = s.session.ExecuteBatch(b)
	}
	if err != nil {
		s.lost(m, b.Size(), err)
	}
}

// lost counts and logs n count increments for milestone m that failed,
// or whose outcome is unknown.
func (s *Store) lost(m storage.Milestone, n int, err error) {
	total := s.lostCounts.Add(int64(n))
	s.logger().Warn("scylla: milestone count lost", "milestone", m.String(), "counts", n, "lost", total, "err", err)
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
	return s.settleWhere(ctx, "settle user", uaid, reason, func(r *fateRow) bool {
		return chid == uuid.Nil || r.CHID == chid
	})
}

// SettleTopic implements storage.FateStore like SettleUser: each LWT is
// conditional on the state read, received or stored, and a fate whose
// state moved on is read again and settled only if it still is one.
func (s *Store) SettleTopic(ctx context.Context, uaid, chid uuid.UUID, topic string, keep storage.FateID) (int, error) {
	if topic == "" || chid == uuid.Nil {
		return 0, fmt.Errorf("scylla: settle topic: no topic or channel: %w", storage.ErrInvalid)
	}
	return s.settleWhere(ctx, "settle topic", uaid, storage.DropTopicReplaced, func(r *fateRow) bool {
		return r.CHID == chid && r.Topic == topic && r.ID != keep &&
			(r.State == storage.FateReceived || r.State == storage.FateStored)
	})
}

// settleWhere drops the unsettled fates of uaid that match, as read and
// as read again if their state moves under the settle. The settles run
// one after another: a user has few fates in flight, and an error stops
// the rest.
func (s *Store) settleWhere(ctx context.Context, op string, uaid uuid.UUID, reason storage.DropReason, match func(*fateRow) bool) (int, error) {
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
		won, err := s.settleRow(ctx, rows[i], storage.FateDropped, reason, match)
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
	byName, err := s.counts(ctx, "milestone counts")
	if err != nil {
		return nil, err
	}
	out := map[storage.Milestone]int64{}
	for _, m := range storage.Milestones() {
		out[m] = byName[m.String()]
	}
	return out, nil
}

// LiveCounts implements storage.FateStore: the 16 shards of fate_count
// read in parallel, the live_<state> rows for the states not settled,
// the milestones for the settled ones.
func (s *Store) LiveCounts(ctx context.Context) (map[storage.FateState]int64, error) {
	byName, err := s.counts(ctx, "live counts")
	if err != nil {
		return nil, err
	}
	out := map[storage.FateState]int64{}
	for _, st := range storage.FateStates {
		out[st] = byName[livePrefix+st.String()]
	}
	for _, m := range storage.Milestones() {
		if m.State.Terminal() {
			out[m.State] += byName[m.String()]
		}
	}
	return out, nil
}

// counts reads every row of fate_count, summed over the shards by name,
// for the operation op.
func (s *Store) counts(ctx context.Context, op string) (map[string]int64, error) {
	if err := s.open(op); err != nil {
		return nil, err
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
		return nil, wrap(op, err)
	}
	out := map[string]int64{}
	for _, got := range shards {
		for name, n := range got {
			out[name] += n
		}
	}
	return out, nil
}
