package storagetest

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Fates (storage.FateStore): tracked messages' states and milestone
// counts, and the helpers of fatesettle.go (settling them) and receipts.go.

// newFate is a fate of (uaid, chid) expiring at expiry (to the
// millisecond, which every backend keeps), with a message id of its own.
func newFate(uaid, chid uuid.UUID, topic string, expiry time.Time, sub storage.ReceiptSubID) storage.Fate {
	mid := "m-" + uuid.NewString()
	return storage.Fate{
		UAID: uaid, ID: storage.NewFateID(mid), CHID: chid, Topic: topic, MessageID: mid,
		Expiry: expiry.Truncate(time.Millisecond), Receipt: sub, State: storage.FateReceived,
	}
}

// hourFate is a fate expiring in an hour, with no receipt.
func hourFate(uaid, chid uuid.UUID) storage.Fate {
	return newFate(uaid, chid, "", time.Now().Add(time.Hour), storage.ReceiptSubID{})
}

func newSubID() storage.ReceiptSubID {
	var id storage.ReceiptSubID
	_, _ = rand.Read(id[:])
	return id
}

func track(t testing.TB, s storage.Store, fs ...storage.Fate) {
	t.Helper()
	for i := range fs {
		must(t, s.Track(ctx(t), fs[i]), "track")
	}
}

// wantState checks where the fate f is.
func wantState(t testing.TB, s storage.Store, f storage.Fate, st storage.FateState, reason storage.DropReason, what string) {
	t.Helper()
	got, err := s.GetFate(ctx(t), f.UAID, f.ID)
	must(t, err, what+": get fate")
	if got.State != st || got.Reason != reason {
		t.Fatalf("%s: fate %s is %s/%s, want %s/%s", what, f.MessageID, got.State, got.Reason, st, reason)
	}
}

func counts(t testing.TB, s storage.Store) map[storage.Milestone]int64 {
	t.Helper()
	c, err := s.MilestoneCounts(ctx(t))
	must(t, err, "milestone counts")
	return c
}

// wantCounts checks that the counts moved from before by exactly want
// (milestones not in want did not move).
func wantCounts(t testing.TB, s storage.Store, before, want map[storage.Milestone]int64, what string) {
	t.Helper()
	after := counts(t, s)
	for _, m := range storage.Milestones() {
		if d := after[m] - before[m]; d != want[m] {
			t.Errorf("%s: %s moved by %d, want %d", what, m, d, want[m])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func dropped(r storage.DropReason) storage.Milestone {
	return storage.Milestone{State: storage.FateDropped, Reason: r}
}

func state(s storage.FateState) storage.Milestone { return storage.Milestone{State: s} }

// terminalSum adds up the counts of the terminal milestones.
func terminalSum(c map[storage.Milestone]int64) int64 {
	var n int64
	for m, v := range c {
		if m.State.Terminal() {
			n += v
		}
	}
	return n
}

func testFateRoundTrip(t *testing.T, s storage.Store) {
	before := counts(t, s)
	uaid, chid := uuid.New(), uuid.New()
	full := newFate(uaid, chid, "weather", time.Now().Add(90*time.Minute), newSubID())
	bare := hourFate(uaid, chid)
	track(t, s, full, bare)
	for _, f := range []storage.Fate{full, bare} {
		got, err := s.GetFate(ctx(t), uaid, f.ID)
		must(t, err, "get fate")
		if got.UAID != f.UAID || got.ID != f.ID || got.CHID != f.CHID || got.Topic != f.Topic ||
			got.MessageID != f.MessageID || !got.Expiry.Equal(f.Expiry) || got.Receipt != f.Receipt ||
			got.State != storage.FateReceived || got.Reason != storage.DropNone {
			t.Fatalf("get fate:\n got  %+v\n want %+v", got, f)
		}
	}
	// A second Track of the id, even with other fields, changes nothing
	// and is not counted.
	again := full
	again.CHID, again.Topic, again.MessageID = uuid.New(), "other", "m-other"
	wantKind(t, s.Track(ctx(t), again), storage.ErrConflict, "track an id twice")
	got, err := s.GetFate(ctx(t), uaid, full.ID)
	must(t, err, "get fate after conflict")
	if got.CHID != full.CHID || got.Topic != full.Topic || got.MessageID != full.MessageID {
		t.Fatalf("a conflicting Track changed the fate: %+v", got)
	}
	wantCounts(t, s, before, map[storage.Milestone]int64{state(storage.FateReceived): 2}, "two tracked, one conflict")

	// Fates are per user agent: the same id under another one is another fate.
	other := full
	other.UAID = uuid.New()
	track(t, s, other)
	_, err = s.GetFate(ctx(t), uuid.New(), full.ID)
	wantKind(t, err, storage.ErrNotFound, "get a fate of an unknown user")
	_, err = s.GetFate(ctx(t), uaid, storage.NewFateID("never tracked"))
	wantKind(t, err, storage.ErrNotFound, "get an unknown fate")
}

func testFateInvalid(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	bad := func(mut func(*storage.Fate)) storage.Fate {
		f := hourFate(uaid, chid)
		mut(&f)
		return f
	}
	for name, f := range map[string]storage.Fate{
		"nil uaid":       bad(func(f *storage.Fate) { f.UAID = uuid.Nil }),
		"nil chid":       bad(func(f *storage.Fate) { f.CHID = uuid.Nil }),
		"starts stored":  bad(func(f *storage.Fate) { f.State = storage.FateStored }),
		"starts settled": bad(func(f *storage.Fate) { f.State = storage.FateDelivered }),
		"no message id":  bad(func(f *storage.Fate) { f.MessageID = "" }),
		"huge message id": bad(func(f *storage.Fate) {
			f.MessageID = strings.Repeat("m", storage.MaxVersionLen+1)
		}),
		"huge topic": bad(func(f *storage.Fate) { f.Topic = strings.Repeat("t", storage.MaxTopicLen+1) }),
		"no expiry":  bad(func(f *storage.Fate) { f.Expiry = time.Time{} }),
	} {
		wantKind(t, s.Track(ctx(t), f), storage.ErrInvalid, "track with "+name)
		if f.UAID != uuid.Nil {
			_, err := s.GetFate(ctx(t), f.UAID, f.ID)
			wantKind(t, err, storage.ErrNotFound, "fate after a refused track with "+name)
		}
	}

	f := hourFate(uaid, chid)
	track(t, s, f)
	before := counts(t, s)
	for _, c := range []struct {
		st     storage.FateState
		reason storage.DropReason
	}{
		{storage.FateStored, storage.DropNone},
		{storage.FateState(0), storage.DropNone},
		{storage.FateState(200), storage.DropNone},
		{storage.FateDropped, storage.DropNone},
		{storage.FateDelivered, storage.DropUnsubscribed},
		{storage.FateDropped, storage.DropReason(200)},
	} {
		_, err := s.Settle(ctx(t), uaid, f.ID, c.st, c.reason)
		wantKind(t, err, storage.ErrInvalid, fmt.Sprintf("settle %s/%s", c.st, c.reason))
	}
	for _, st := range []storage.FateState{0, storage.FateReceived, storage.FateDelivered, storage.FateState(200)} {
		_, err := s.Reach(ctx(t), uaid, f.ID, st)
		wantKind(t, err, storage.ErrInvalid, fmt.Sprintf("reach %s", st))
	}
	_, err := s.SettleUser(ctx(t), uaid, uuid.Nil, storage.DropNone)
	wantKind(t, err, storage.ErrInvalid, "settle user without a reason")
	_, err = s.SettleExpired(ctx(t), time.Now().Add(2*time.Hour), 0)
	wantKind(t, err, storage.ErrInvalid, "settle expired with limit 0")
	_, err = s.Receipts(ctx(t), newSubID(), 0)
	wantKind(t, err, storage.ErrInvalid, "receipts with limit 0")
	wantKind(t, s.PutReceiptSub(ctx(t), storage.ReceiptSub{Created: time.Now()}), storage.ErrInvalid, "receipt sub with a zero id")
	wantState(t, s, f, storage.FateReceived, storage.DropNone, "after refused calls")
	wantCounts(t, s, before, nil, "refused calls")
}

func testFateReach(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	f := hourFate(uaid, uuid.New())
	track(t, s, f)
	before := counts(t, s)
	for _, st := range []storage.FateState{storage.FateStored, storage.FateNodeTransmitted,
		storage.FateTransmitted, storage.FateStored} {
		ok, err := s.Reach(ctx(t), uaid, f.ID, st)
		must(t, err, "reach")
		if !ok {
			t.Fatalf("reach %s of an unsettled fate reported false", st)
		}
		wantState(t, s, f, st, storage.DropNone, "after reach")
	}
	wantCounts(t, s, before, map[storage.Milestone]int64{
		state(storage.FateStored): 2, state(storage.FateNodeTransmitted): 1, state(storage.FateTransmitted): 1,
	}, "four reaches")

	settle(t, s, f, storage.FateDelivered, storage.DropNone, true)
	before = counts(t, s)
	ok, err := s.Reach(ctx(t), uaid, f.ID, storage.FateStored)
	must(t, err, "reach a settled fate")
	if ok {
		t.Fatal("reach of a settled fate reported true")
	}
	wantState(t, s, f, storage.FateDelivered, storage.DropNone, "reach after settle")
	ok, err = s.Reach(ctx(t), uaid, storage.NewFateID("missing"), storage.FateStored)
	if err != nil || ok {
		t.Fatalf("reach of a missing fate: %v %v, want false and no error", ok, err)
	}
	// The settled fate's message did reach stored (the record raced its
	// ack): counted, and nothing else changed; the missing one is not.
	wantCounts(t, s, before, map[storage.Milestone]int64{state(storage.FateStored): 1},
		"reach of a settled and of a missing fate")
}

// testFateReachAll: ReachAll moves each unsettled fate of a page and
// counts it, counts a settled one's milestone without moving it, and
// skips a missing one, as Reach of each would.
func testFateReachAll(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	a, b, settled := hourFate(uaid, uuid.New()), hourFate(uaid, uuid.New()), hourFate(uaid, uuid.New())
	track(t, s, a, b, settled)
	settle(t, s, settled, storage.FateDelivered, storage.DropNone, true)
	reachAll(t, s, storage.FateStored, a, b)
	before := counts(t, s)
	ids := []storage.FateID{a.ID, settled.ID, storage.NewFateID("missing"), b.ID}
	n, err := s.ReachAll(ctx(t), uaid, ids, storage.FateTransmitted)
	must(t, err, "reach all")
	if n != 2 {
		t.Fatalf("reach all moved %d fates, want 2", n)
	}
	wantState(t, s, a, storage.FateTransmitted, storage.DropNone, "first of the page")
	wantState(t, s, b, storage.FateTransmitted, storage.DropNone, "last of the page")
	wantState(t, s, settled, storage.FateDelivered, storage.DropNone, "settled in the page")
	wantCounts(t, s, before, map[storage.Milestone]int64{state(storage.FateTransmitted): 3}, "reach all")

	if n, err := s.ReachAll(ctx(t), uaid, nil, storage.FateTransmitted); err != nil || n != 0 {
		t.Fatalf("reach all of none: %d %v, want 0 and no error", n, err)
	}
	_, err = s.ReachAll(ctx(t), uaid, ids, storage.FateDelivered)
	wantKind(t, err, storage.ErrInvalid, "reach all to a terminal state")
	wantState(t, s, a, storage.FateTransmitted, storage.DropNone, "after a refused reach all")
}

// testFateDeleteDelivered: an ack of a tracked stored message deletes
// the message and settles its fate delivered, with its count and
// receipt, once; a second ack changes nothing; a message already gone
// still settles its fate; a topic message replaced since stays.
func testFateDeleteDelivered(t *testing.T, s storage.Store) {
	uaid, chid, sub := uuid.New(), uuid.New(), newSubID()
	m := msg(chid, "acked")
	m.Tracked = true
	other := msg(chid, "kept")
	saveAll(t, s, uaid, m, other)
	f := newFate(uaid, chid, "", time.Now().Add(time.Hour), sub)
	f.ID, f.MessageID = storage.NewFateID(m.Version), m.Version
	track(t, s, f)
	reachAll(t, s, storage.FateTransmitted, f)
	before := counts(t, s)
	ok, err := s.DeleteDelivered(ctx(t), uaid, m.Key(), f.ID)
	must(t, err, "delete delivered")
	if !ok {
		t.Fatal("delete delivered of an unsettled fate reported false")
	}
	sameList(t, versions(fetchAll(t, s, uaid, 0, 10)), []string{other.Version}, "messages after the ack")
	wantState(t, s, f, storage.FateDelivered, storage.DropNone, "after the ack")
	wantCounts(t, s, before, map[storage.Milestone]int64{state(storage.FateDelivered): 1}, "delete delivered")
	rs, err := s.Receipts(ctx(t), sub, 10)
	must(t, err, "receipts")
	if len(rs) != 1 || rs[0].MessageID != f.MessageID || rs[0].State != storage.FateDelivered {
		t.Fatalf("receipts after the ack: %+v, want one delivered for %s", rs, f.MessageID)
	}

	before = counts(t, s)
	ok, err = s.DeleteDelivered(ctx(t), uaid, m.Key(), f.ID)
	if err != nil || ok {
		t.Fatalf("a second delete delivered: %v %v, want false and no error", ok, err)
	}
	wantCounts(t, s, before, nil, "a second delete delivered")
	if rs, _ := s.Receipts(ctx(t), sub, 10); len(rs) != 1 {
		t.Fatalf("%d receipts after a second ack, want 1", len(rs))
	}

	gone, never := hourFate(uaid, chid), msg(chid, "never stored")
	track(t, s, gone)
	ok, err = s.DeleteDelivered(ctx(t), uaid, never.Key(), gone.ID)
	if err != nil || !ok {
		t.Fatalf("delete delivered of a message already gone: %v %v, want its fate settled", ok, err)
	}
	wantState(t, s, gone, storage.FateDelivered, storage.DropNone, "message already gone")

	old := topicMsg(chid, "t", "old")
	old.Tracked = true
	saveAll(t, s, uaid, old)
	newer := topicMsg(chid, "t", "newer")
	saveAll(t, s, uaid, newer)
	tf := hourFate(uaid, chid)
	tf.ID = storage.NewFateID(old.Version)
	track(t, s, tf)
	if _, err := s.DeleteDelivered(ctx(t), uaid, old.Key(), tf.ID); err != nil {
		t.Fatalf("delete delivered of a replaced topic message: %v", err)
	}
	tms, err := s.TopicMessages(ctx(t), uaid, 10)
	must(t, err, "topic messages")
	if len(tms) != 1 || tms[0].Version != newer.Version {
		t.Fatalf("topic messages after acking the replaced one: %v, want the newer", versions(tms))
	}
	wantState(t, s, tf, storage.FateDelivered, storage.DropNone, "replaced topic message acked")

	_, err = s.DeleteDelivered(ctx(t), uuid.Nil, m.Key(), f.ID)
	wantKind(t, err, storage.ErrInvalid, "delete delivered of a nil uaid")
}

func testFateMilestoneCounts(t *testing.T, s storage.Store) {
	c := counts(t, s)
	for _, m := range storage.Milestones() {
		v, ok := c[m]
		if !ok {
			t.Errorf("milestone %s missing", m)
		}
		if v != 0 {
			t.Errorf("milestone %s is %d in an empty store", m, v)
		}
	}
	if len(c) != len(storage.Milestones()) {
		t.Errorf("%d milestones, want the %d of storage.Milestones(): %v", len(c), len(storage.Milestones()), c)
	}
}

// testTrackedMessage: Message.Tracked round-trips through both kinds of
// message.
func testTrackedMessage(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	for _, tracked := range []bool{true, false} {
		m := msg(chid, "d")
		m.Tracked = tracked
		tm := topicMsg(chid, fmt.Sprintf("topic-%v", tracked), "d")
		tm.Tracked = tracked
		saveAll(t, s, uaid, m, tm)
	}
	ms := fetchAll(t, s, uaid, 0, 10)
	if len(ms) != 2 || !ms[0].Tracked || ms[1].Tracked {
		t.Fatalf("timestamp messages' Tracked: %+v, want true then false", ms)
	}
	tms, err := s.TopicMessages(ctx(t), uaid, 10)
	must(t, err, "topic messages")
	if len(tms) != 2 {
		t.Fatalf("%d topic messages, want 2", len(tms))
	}
	for _, m := range tms {
		if m.Tracked != (m.Topic == "topic-true") {
			t.Fatalf("topic message %q has Tracked %v", m.Topic, m.Tracked)
		}
	}
}
