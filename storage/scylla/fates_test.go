package scylla

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// twoNodes opens two stores on one fresh keyspace: two nodes of a
// deployment.
func twoNodes(t *testing.T) (*Store, *Store, Config) {
	t.Helper()
	cfg := testConfig(t)
	a := newTestStoreWith(t, cfg)
	b, err := New(tctx(t), cfg)
	ok(t, err, "open the second node")
	t.Cleanup(func() { _ = b.Close() })
	return a, b, cfg
}

func newFate(expiry time.Time) storage.Fate {
	version := uuid.NewString()
	return storage.Fate{UAID: uuid.New(), ID: storage.NewFateID(version), CHID: uuid.New(),
		MessageID: version, Expiry: expiry, State: storage.FateReceived}
}

func counts(t *testing.T, s *Store) map[storage.Milestone]int64 {
	t.Helper()
	c, err := s.MilestoneCounts(tctx(t))
	ok(t, err, "milestone counts")
	if len(c) != len(storage.Milestones()) {
		t.Fatalf("%d milestones counted, want every one of %d", len(c), len(storage.Milestones()))
	}
	return c
}

// TestFateStateValues: the states are stored as their numbers, 1..4 not
// settled; every move of a fate is conditional on the state it was read
// in, so that its winner knows which live count it leaves.
func TestFateStateValues(t *testing.T) {
	for _, st := range storage.FateStates {
		if notSettled := st >= 1 && st <= 4; st.Terminal() == notSettled {
			t.Errorf("%s (%d): terminal %v, but the stored numbers say otherwise", st, st, st.Terminal())
		}
	}
	for _, q := range []statement{qFateReach, qFateSettle} {
		if !strings.HasSuffix(q.cql, "IF state = ?") {
			t.Errorf("a move not conditional on the state read: %s", q.cql)
		}
	}
	if !strings.HasSuffix(qFatePostpone.cql, "IF state = ? AND expiry = ?") {
		t.Errorf("postpone not conditional on the state and expiry read: %s", qFatePostpone.cql)
	}
}

// TestTrackedMessage: Message.Tracked round-trips through both kinds of
// message, and a newer untracked version of a topic message is untracked.
func TestTrackedMessage(t *testing.T) {
	s := newTestStore(t)
	uaid, chid := uuid.New(), uuid.New()
	save := func(topic string, tracked bool) storage.Message {
		m := storage.Message{CHID: chid, Topic: topic, Version: uuid.NewString(), TTL: 60,
			SortKey: storage.NewSortKey(), Tracked: tracked}
		ok(t, s.SaveMessage(tctx(t), uaid, m), "save")
		return m
	}
	save("", true)
	save("", false)
	save("t", true)
	got, err := s.TimestampMessages(tctx(t), uaid, 0, 10)
	ok(t, err, "timestamp messages")
	if len(got) != 2 || !got[0].Tracked || got[1].Tracked {
		t.Fatalf("timestamp messages %+v, want tracked then untracked", got)
	}
	topics, err := s.TopicMessages(tctx(t), uaid, 10)
	ok(t, err, "topic messages")
	if len(topics) != 1 || !topics[0].Tracked {
		t.Fatalf("topic messages %+v, want one tracked", topics)
	}
	save("t", false)
	topics, err = s.TopicMessages(tctx(t), uaid, 10)
	ok(t, err, "topic messages")
	if len(topics) != 1 || topics[0].Tracked {
		t.Fatalf("topic messages after an untracked version %+v, want it untracked", topics)
	}
}

// TestSchemaAddsTrackedColumn: a keyspace whose message table predates
// tracked gets it from ApplySchema, and a message saved before reads as
// untracked.
func TestSchemaAddsTrackedColumn(t *testing.T) {
	cfg := testConfig(t)
	for _, stmt := range schemaStatements(cfg.Keyspace, testReplication) {
		if strings.HasPrefix(stmt, "ALTER TABLE") {
			continue
		}
		ok(t, admin(t).Query(strings.Replace(stmt, ",\n  tracked boolean", "", 1)).Exec(), "the old schema: "+firstLine(stmt))
	}
	t.Cleanup(func() { dropKeyspace(t, cfg) })
	uaid, chid := uuid.New(), uuid.New()
	sortkey := storage.NewSortKey()
	ok(t, admin(t).Query("INSERT INTO "+cfg.Keyspace+".message (uaid, kind, sortkey, chid, topic, received, version, ttl, data, headers) "+
		"VALUES (?, 2, ?, ?, '', ?, 'v0', 60, 'd', {}) USING TTL 60", uaid[:], int64(sortkey), chid[:], int64(sortkey)).Exec(), "a message saved before")
	for range 2 {
		ok(t, ApplySchema(tctx(t), cfg, testReplication), "apply the schema again")
	}
	s, err := New(tctx(t), cfg)
	ok(t, err, "open")
	defer s.Close()
	m := storage.Message{CHID: chid, Version: "v1", TTL: 60, SortKey: storage.NewSortKey(), Tracked: true}
	ok(t, s.SaveMessage(tctx(t), uaid, m), "save tracked")
	got, err := s.TimestampMessages(tctx(t), uaid, 0, 10)
	ok(t, err, "read")
	if len(got) != 2 || got[0].Version != "v0" || got[0].Tracked || !got[1].Tracked {
		t.Fatalf("messages %+v, want v0 untracked, v1 tracked", got)
	}
}

// TestFateOneSettlerAcrossNodes: of concurrent Settles on two nodes, one
// wins per fate; counts, live counts too, add up across the nodes; the
// winner's receipt is written once.
func TestFateOneSettlerAcrossNodes(t *testing.T) {
	a, b, _ := twoNodes(t)
	nodes := []*Store{a, b}
	sub := storage.ReceiptSub{ID: storage.ReceiptSubID(uuid.New()), Webhook: "https://example.com/r", Created: time.Now()}
	ok(t, a.PutReceiptSub(tctx(t), sub), "put receipt sub")
	if err := b.PutReceiptSub(tctx(t), sub); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("the same subscription from the other node: %v, want ErrConflict", err)
	}
	got, err := b.GetReceiptSub(tctx(t), sub.ID)
	if err != nil || got.Webhook != sub.Webhook || !got.Created.Equal(sub.Created) {
		t.Fatalf("receipt sub %+v, %v", got, err)
	}

	const fates = 8
	var fs []storage.Fate
	for i := range fates {
		f := newFate(time.Now().Add(time.Hour))
		f.Receipt = sub.ID
		ok(t, nodes[i%2].Track(tctx(t), f), "track")
		if err := nodes[(i+1)%2].Track(tctx(t), f); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("tracked twice, on the other node: %v, want ErrConflict", err)
		}
		fs = append(fs, f)
	}
	settles := []struct {
		s      storage.FateState
		reason storage.DropReason
	}{{storage.FateDelivered, 0}, {storage.FateExpired, 0}, {storage.FateDropped, storage.DropUnsubscribed}, {storage.FateErrored, 0}}
	winners := map[storage.FateID]storage.FateState{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, f := range fs {
		for i, st := range settles {
			wg.Add(1)
			go func() {
				defer wg.Done()
				won, err := nodes[i%2].Settle(tctx(t), f.UAID, f.ID, st.s, st.reason)
				if err != nil {
					t.Errorf("settle: %v", err)
				}
				if won {
					mu.Lock()
					defer mu.Unlock()
					if prev, dup := winners[f.ID]; dup {
						t.Errorf("fate %x settled twice: %s and %s", f.ID, prev, st.s)
					}
					winners[f.ID] = st.s
				}
			}()
		}
	}
	wg.Wait()
	if len(winners) != fates {
		t.Fatalf("%d fates had a winner, want %d", len(winners), fates)
	}
	perState := map[storage.FateState]int64{}
	for _, f := range fs {
		got, err := b.GetFate(tctx(t), f.UAID, f.ID)
		ok(t, err, "get fate")
		if got.State != winners[f.ID] || got.MessageID != f.MessageID || got.CHID != f.CHID || !got.Expiry.Equal(f.Expiry) || got.Receipt != sub.ID {
			t.Fatalf("fate %+v, want the winner's %s and the tracked fields of %+v", got, winners[f.ID], f)
		}
		perState[got.State]++
		if won, err := a.Settle(tctx(t), f.UAID, f.ID, storage.FateDelivered, 0); won || err != nil {
			t.Fatalf("a settled fate settled again: %v, %v", won, err)
		}
		if moved, err := b.Reach(tctx(t), f.UAID, f.ID, storage.FateStored); moved || err != nil {
			t.Fatalf("a settled fate reached stored: %v, %v", moved, err)
		}
	}
	ca, cb := counts(t, a), counts(t, b)
	if fmt.Sprint(ca) != fmt.Sprint(cb) {
		t.Fatalf("the nodes' counts differ:\n%v\n%v", ca, cb)
	}
	if ca[storage.Milestone{State: storage.FateReceived}] != fates {
		t.Fatalf("received counted %d, want %d", ca[storage.Milestone{State: storage.FateReceived}], fates)
	}
	for _, st := range settles {
		m := storage.Milestone{State: st.s, Reason: st.reason}
		if ca[m] != perState[st.s] {
			t.Errorf("%s counted %d, want %d", m, ca[m], perState[st.s])
		}
	}
	if a.lostCounts.Load()+b.lostCounts.Load() != 0 {
		t.Fatal("counts lost")
	}
	// The live counts too: each fate left received once, on whichever
	// node won, and is counted in its one terminal state.
	la, err := a.LiveCounts(tctx(t))
	ok(t, err, "live counts")
	lb, err := b.LiveCounts(tctx(t))
	ok(t, err, "live counts")
	if fmt.Sprint(la) != fmt.Sprint(lb) || la[storage.FateReceived] != 0 {
		t.Fatalf("live counts %v and %v, want equal, none received", la, lb)
	}
	for st, n := range perState {
		if la[st] != n {
			t.Errorf("live %s %d, want %d", st, la[st], n)
		}
	}

	rs, err := a.Receipts(tctx(t), sub.ID, 100)
	ok(t, err, "receipts")
	if len(rs) != fates {
		t.Fatalf("%d receipts, want one per fate (%d)", len(rs), fates)
	}
	for i, r := range rs {
		if i > 0 && r.At.Before(rs[i-1].At) {
			t.Fatalf("receipts not oldest first: %v", rs)
		}
		if len(r.ID) > 64 || !r.State.Terminal() || r.MessageID == "" {
			t.Fatalf("receipt %+v", r)
		}
	}
	ok(t, b.AckReceipts(tctx(t), sub.ID, []string{rs[0].ID, rs[2].ID, "unknown", "1-00", rs[0].ID}), "ack")
	left, err := a.Receipts(tctx(t), sub.ID, 100)
	ok(t, err, "receipts after ack")
	if len(left) != fates-2 || left[0].ID != rs[1].ID {
		t.Fatalf("after acking two: %d receipts starting %v", len(left), left)
	}
}

// TestReachAndDrops: Reach moves an unsettled fate and counts; SettleTopic
// drops only the topic's received or stored fates other than keep;
// SettleUser drops the rest of a channel, then of the user.
func TestReachAndDrops(t *testing.T) {
	cfg := testConfig(t)
	s := newTestStoreWith(t, cfg)
	uaid, chid, other := uuid.New(), uuid.New(), uuid.New()
	track := func(ch uuid.UUID, topic string) storage.Fate {
		f := newFate(time.Now().Add(time.Hour))
		f.UAID, f.CHID, f.Topic = uaid, ch, topic
		ok(t, s.Track(tctx(t), f), "track")
		return f
	}
	if moved, err := s.Reach(tctx(t), uaid, storage.NewFateID("none"), storage.FateStored); moved || err != nil {
		t.Fatalf("reach of a missing fate: %v, %v", moved, err)
	}
	if won, err := s.Settle(tctx(t), uaid, storage.NewFateID("none"), storage.FateDelivered, 0); won || err != nil {
		t.Fatalf("settle of a missing fate: %v, %v", won, err)
	}
	if _, err := s.Reach(tctx(t), uaid, storage.NewFateID("none"), storage.FateDelivered); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("reach of a terminal state: %v", err)
	}
	stored, sent, keep := track(chid, "t"), track(chid, "t"), track(chid, "t")
	plain, elsewhere := track(chid, ""), track(other, "t")
	for _, f := range []storage.Fate{stored, sent} {
		if moved, err := s.Reach(tctx(t), uaid, f.ID, storage.FateStored); !moved || err != nil {
			t.Fatalf("reach stored: %v, %v", moved, err)
		}
	}
	if moved, err := s.Reach(tctx(t), uaid, sent.ID, storage.FateTransmitted); !moved || err != nil {
		t.Fatalf("reach transmitted: %v, %v", moved, err)
	}
	n, err := s.SettleTopic(tctx(t), uaid, chid, "t", keep.ID)
	if err != nil || n != 1 {
		t.Fatalf("settle topic: %d, %v; want only the stored one", n, err)
	}
	state := func(f storage.Fate) storage.Fate {
		got, err := s.GetFate(tctx(t), uaid, f.ID)
		ok(t, err, "get fate")
		return got
	}
	if got := state(stored); got.State != storage.FateDropped || got.Reason != storage.DropTopicReplaced {
		t.Fatalf("the stored topic fate: %s/%s", got.State, got.Reason)
	}
	if state(sent).State != storage.FateTransmitted || state(keep).State != storage.FateReceived {
		t.Fatal("SettleTopic dropped a transmitted fate or the kept one")
	}
	n, err = s.SettleUser(tctx(t), uaid, chid, storage.DropUnsubscribed)
	if err != nil || n != 3 {
		t.Fatalf("settle channel: %d, %v; want sent, keep and plain", n, err)
	}
	if state(elsewhere).State != storage.FateReceived || state(plain).Reason != storage.DropUnsubscribed {
		t.Fatal("SettleUser of a channel settled another channel's fate, or not its own")
	}
	n, err = s.SettleUser(tctx(t), uaid, uuid.Nil, storage.DropUserGone)
	if err != nil || n != 1 {
		t.Fatalf("settle user: %d, %v; want the other channel's one", n, err)
	}
	c := counts(t, s)
	for m, want := range map[storage.Milestone]int64{
		{State: storage.FateReceived}: 5, {State: storage.FateStored}: 2, {State: storage.FateTransmitted}: 1,
		{State: storage.FateDropped, Reason: storage.DropTopicReplaced}: 1,
		{State: storage.FateDropped, Reason: storage.DropUnsubscribed}:  3,
		{State: storage.FateDropped, Reason: storage.DropUserGone}:      1,
	} {
		if c[m] != want {
			t.Errorf("%s counted %d, want %d", m, c[m], want)
		}
	}
	// Settled fates are kept FateKeep past their expiry or settling,
	// whichever is later: the whole row, every cell.
	wantTTL(t, cfg, uaid, storage.FateKeep+time.Hour)
}

// wantTTL checks that every cell of uaid's fates expires about want from
// now (a minute less, for the test's own time).
func wantTTL(t *testing.T, cfg Config, uaid uuid.UUID, want time.Duration) {
	t.Helper()
	iter := admin(t).Query("SELECT TTL(message_id), TTL(state), TTL(expiry) FROM "+cfg.Keyspace+".fate WHERE uaid = ?", uaid[:]).Iter()
	hi, lo := int(want/time.Second)+5, int((want-time.Minute)/time.Second)
	var ttls [3]int
	rows := 0
	for iter.Scan(&ttls[0], &ttls[1], &ttls[2]) {
		rows++
		for _, ttl := range ttls {
			if ttl < lo || ttl > hi {
				t.Fatalf("a fate cell's TTL %d s, want %d to %d", ttl, lo, hi)
			}
		}
	}
	ok(t, iter.Close(), "ttl")
	if rows == 0 {
		t.Fatal("no fate rows")
	}
}

// TestSettleExpiredTwoNodes: two nodes sweeping at once settle each due
// fate once, leave the others, and count them once; a sweep later in time
// settles the rest; a minute swept empty and long past is unlisted.
func TestSettleExpiredTwoNodes(t *testing.T) {
	a, b, cfg := twoNodes(t)
	now := time.Now()
	var due, later []storage.Fate
	for i := range 30 {
		// Expiries before Track: a TTL 0 message, or a late Track.
		// Stored, as a received fate gets FateAckGrace first.
		f := newFate(now.Add(time.Duration(i-30) * 100 * time.Millisecond))
		ok(t, []*Store{a, b}[i%2].Track(tctx(t), f), "track")
		reachStored(t, a, f)
		due = append(due, f)
	}
	for range 5 {
		f := newFate(now.Add(time.Hour))
		ok(t, a.Track(tctx(t), f), "track")
		reachStored(t, a, f)
		later = append(later, f)
	}
	sweepAt := time.Now()
	var total atomic.Int64
	var wg sync.WaitGroup
	for i, s := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit := 7 + i
			for {
				n, err := s.SettleExpired(tctx(t), sweepAt, limit)
				if err != nil {
					t.Errorf("settle expired: %v", err)
					return
				}
				if n > limit {
					t.Errorf("settled %d over the limit %d", n, limit)
				}
				total.Add(int64(n))
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if total.Load() != int64(len(due)) {
		t.Fatalf("the sweeps settled %d, want each of %d due fates once", total.Load(), len(due))
	}
	for _, f := range due {
		if got, err := b.GetFate(tctx(t), f.UAID, f.ID); err != nil || got.State != storage.FateExpired {
			t.Fatalf("due fate: %+v, %v", got, err)
		}
	}
	for _, f := range later {
		if got, err := a.GetFate(tctx(t), f.UAID, f.ID); err != nil || got.State != storage.FateStored {
			t.Fatalf("a fate not due: %+v, %v", got, err)
		}
	}
	// Settled after its expiry, a fate is kept FateKeep from then.
	wantTTL(t, cfg, due[0].UAID, storage.FateKeep)
	if c := counts(t, b)[storage.Milestone{State: storage.FateExpired}]; c != int64(len(due)) {
		t.Fatalf("expired counted %d, want %d", c, len(due))
	}
	var entries int
	ok(t, admin(t).Query("SELECT COUNT(*) FROM "+cfg.Keyspace+".fate_expiry").Scan(&entries), "count entries")
	if entries != len(later) {
		t.Fatalf("%d expiry entries left, want the %d not due", entries, len(later))
	}

	// A minute swept empty and past the margin is unlisted; the minutes
	// of the fates not due stay.
	old := bucketStart(now.Add(-time.Hour))
	ok(t, admin(t).Query("INSERT INTO "+cfg.Keyspace+".fate_bucket (scope, bucket) VALUES (0, ?)", old).Exec(), "an old minute")
	if n, err := a.SettleExpired(tctx(t), now, 10); n != 0 || err != nil {
		t.Fatalf("a sweep of nothing due: %d, %v", n, err)
	}
	var listed []int64
	iter := admin(t).Query("SELECT bucket FROM " + cfg.Keyspace + ".fate_bucket WHERE scope = 0").Iter()
	for bk := int64(0); iter.Scan(&bk); {
		listed = append(listed, bk)
	}
	ok(t, iter.Close(), "list buckets")
	for _, bk := range listed {
		if bk == old {
			t.Fatalf("the old empty minute is still listed: %v", listed)
		}
	}
	if len(listed) == 0 || listed[len(listed)-1] != bucketStart(later[0].Expiry) {
		t.Fatalf("buckets %v, want the not-due fates' minute %d kept", listed, bucketStart(later[0].Expiry))
	}

	n, err := b.SettleExpired(tctx(t), now.Add(2*time.Hour), 100)
	if err != nil || n != len(later) {
		t.Fatalf("a sweep two hours on: %d, %v; want %d", n, err, len(later))
	}
}

func reachStored(t *testing.T, s *Store, f storage.Fate) {
	t.Helper()
	if moved, err := s.Reach(tctx(t), f.UAID, f.ID, storage.FateStored); !moved || err != nil {
		t.Fatalf("reach stored: %v, %v", moved, err)
	}
}

// TestLostCountLogged: a milestone increment that fails is not retried
// and does not fail the transaction it counts (which applied): it is
// counted as lost, with the live counts written with it, and logged.
// The counter table is dropped to make every increment fail.
func TestLostCountLogged(t *testing.T) {
	cfg := testConfig(t)
	var logged strings.Builder
	var mu sync.Mutex
	cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))
	s := newTestStoreWith(t, cfg)
	ok(t, admin(t).Query("DROP TABLE "+cfg.Keyspace+".fate_count").Exec(), "drop the counters")
	f := newFate(time.Now().Add(time.Hour))
	ok(t, s.Track(tctx(t), f), "track without counters")
	won, err := s.Settle(tctx(t), f.UAID, f.ID, storage.FateDelivered, 0)
	if !won || err != nil {
		t.Fatalf("settle without counters: %v, %v; want won", won, err)
	}
	if got, err := s.GetFate(tctx(t), f.UAID, f.ID); err != nil || got.State != storage.FateDelivered {
		t.Fatalf("fate %+v, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Each write carries a milestone and a live count: received's and
	// live_received's, then delivered's and live_received's.
	if n := s.LostMilestoneCounts(); n != 4 || strings.Count(logged.String(), "milestone count lost") != 2 {
		t.Fatalf("%d counts lost, log:\n%s\nwant received's and delivered's writes, two counts each", n, logged.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
