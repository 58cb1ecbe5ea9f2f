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
