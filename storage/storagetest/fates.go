package storagetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Fates (storage.FateStore): tracked messages' states, milestone counts
// and receipts.

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

func settle(t testing.TB, s storage.Store, f storage.Fate, st storage.FateState, reason storage.DropReason, want bool) {
	t.Helper()
	ok, err := s.Settle(ctx(t), f.UAID, f.ID, st, reason)
	must(t, err, "settle")
	if ok != want {
		t.Fatalf("settle %s %s/%s reported %v, want %v", f.MessageID, st, reason, ok, want)
	}
}

// terminals: every terminal state with a reason it accepts.
var terminals = []storage.Milestone{
	state(storage.FateDelivered), state(storage.FateExpired), dropped(storage.DropUnsubscribed),
	dropped(storage.DropTopicReplaced), dropped(storage.DropMsgLimit), dropped(storage.DropUserGone),
	state(storage.FateBridgeTransmitted), state(storage.FateErrored),
}

// testFateSettleOneWinner: of 16 concurrent Settles with mixed states
// exactly one wins, is counted once and writes one receipt.
func testFateSettleOneWinner(t *testing.T, s storage.Store) {
	sub := newSubID()
	uaid := uuid.New()
	for round := range 32 {
		f := newFate(uaid, uuid.New(), "", time.Now().Add(time.Hour), sub)
		if round%2 == 1 {
			f.Receipt = storage.ReceiptSubID{} // milestones only: no receipt
		}
		track(t, s, f)
		before := counts(t, s)
		start := time.Now()
		var mu sync.Mutex
		var wins []storage.Milestone
		var wg sync.WaitGroup
		release := make(chan struct{}) // all 16 read the unsettled fate at once
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				m := terminals[i%len(terminals)]
				ok, err := s.Settle(ctx(t), uaid, f.ID, m.State, m.Reason)
				if err != nil {
					t.Errorf("settle: %v", err)
				}
				if ok {
					mu.Lock()
					wins = append(wins, m)
					mu.Unlock()
				}
			}()
		}
		close(release)
		wg.Wait()
		end := time.Now()
		if len(wins) != 1 {
			t.Fatalf("round %d: %d of 16 settles won (%v), want 1", round, len(wins), wins)
		}
		won := wins[0]
		wantState(t, s, f, won.State, won.Reason, "the winner's state")
		wantCounts(t, s, before, map[storage.Milestone]int64{won: 1}, "16 settles")

		rs, err := s.Receipts(ctx(t), sub, 100)
		must(t, err, "receipts")
		var mine []storage.Receipt
		for _, r := range rs {
			if r.MessageID == f.MessageID {
				mine = append(mine, r)
			}
		}
		want := 1
		if f.Receipt == (storage.ReceiptSubID{}) {
			want = 0
		}
		if len(mine) != want {
			t.Fatalf("round %d: %d receipts of the fate, want %d: %+v", round, len(mine), want, rs)
		}
		if want == 1 {
			r := mine[0]
			// Backends keep At to the millisecond, or their own clock's.
			if r.State != won.State || r.Reason != won.Reason ||
				r.At.Before(start.Add(-50*time.Millisecond)) || r.At.After(end.Add(50*time.Millisecond)) {
				t.Fatalf("receipt %+v, want %s/%s at %s..%s", r, won.State, won.Reason, start, end)
			}
		}
	}
	if rs, err := s.Receipts(ctx(t), storage.ReceiptSubID{}, 100); err != nil || len(rs) != 0 {
		t.Fatalf("receipts under the zero subscription: %+v %v", rs, err)
	}
	before := counts(t, s)
	ok, err := s.Settle(ctx(t), uaid, storage.NewFateID("missing"), storage.FateDelivered, storage.DropNone)
	if err != nil || ok {
		t.Fatalf("settle a missing fate: %v %v, want false and no error", ok, err)
	}
	wantCounts(t, s, before, nil, "settle of a missing fate")
}

func testFateSettleUser(t *testing.T, s storage.Store) {
	uaid, other, a, b := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	sub := newSubID()
	received := newFate(uaid, a, "", time.Now().Add(time.Hour), sub)
	stored, delivered, onB := hourFate(uaid, a), hourFate(uaid, a), hourFate(uaid, b)
	otherUser := hourFate(other, a)
	track(t, s, received, stored, delivered, onB, otherUser)
	if ok, err := s.Reach(ctx(t), uaid, stored.ID, storage.FateStored); err != nil || !ok {
		t.Fatalf("reach stored: %v %v", ok, err)
	}
	settle(t, s, delivered, storage.FateDelivered, storage.DropNone, true)

	before := counts(t, s)
	n, err := s.SettleUser(ctx(t), uaid, a, storage.DropUnsubscribed)
	must(t, err, "settle user's channel")
	if n != 2 {
		t.Fatalf("settle user's channel settled %d, want 2", n)
	}
	wantState(t, s, received, storage.FateDropped, storage.DropUnsubscribed, "received fate of the channel")
	wantState(t, s, stored, storage.FateDropped, storage.DropUnsubscribed, "stored fate of the channel")
	wantState(t, s, delivered, storage.FateDelivered, storage.DropNone, "settled fate of the channel")
	wantState(t, s, onB, storage.FateReceived, storage.DropNone, "fate of another channel")
	wantState(t, s, otherUser, storage.FateReceived, storage.DropNone, "fate of another user")
	wantCounts(t, s, before, map[storage.Milestone]int64{dropped(storage.DropUnsubscribed): 2}, "settle user's channel")
	rs, err := s.Receipts(ctx(t), sub, 10)
	must(t, err, "receipts")
	if len(rs) != 1 || rs[0].MessageID != received.MessageID || rs[0].State != storage.FateDropped || rs[0].Reason != storage.DropUnsubscribed {
		t.Fatalf("receipts after settle user: %+v", rs)
	}

	if n, err := s.SettleUser(ctx(t), uaid, a, storage.DropUnsubscribed); err != nil || n != 0 {
		t.Fatalf("settle user's channel again: %d %v, want 0", n, err)
	}
	n, err = s.SettleUser(ctx(t), uaid, uuid.Nil, storage.DropUserGone)
	must(t, err, "settle user")
	if n != 1 {
		t.Fatalf("settle user settled %d, want 1", n)
	}
	wantState(t, s, onB, storage.FateDropped, storage.DropUserGone, "fate of the dropped user")
	wantState(t, s, received, storage.FateDropped, storage.DropUnsubscribed, "a fate settled before")
	wantState(t, s, otherUser, storage.FateReceived, storage.DropNone, "fate of another user")
	wantCounts(t, s, before, map[storage.Milestone]int64{
		dropped(storage.DropUnsubscribed): 2, dropped(storage.DropUserGone): 1,
	}, "settle user")
	if n, err := s.SettleUser(ctx(t), uuid.New(), uuid.Nil, storage.DropUserGone); err != nil || n != 0 {
		t.Fatalf("settle an unknown user: %d %v, want 0", n, err)
	}
}

func testFateSettleTopic(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	exp := time.Now().Add(time.Hour)
	none := storage.ReceiptSubID{}
	received, stored := newFate(uaid, chid, "t", exp, none), newFate(uaid, chid, "t", exp, none)
	node, sent := newFate(uaid, chid, "t", exp, none), newFate(uaid, chid, "t", exp, none)
	keep, done := newFate(uaid, chid, "t", exp, none), newFate(uaid, chid, "t", exp, none)
	otherTopic, noTopic := newFate(uaid, chid, "u", exp, none), newFate(uaid, chid, "", exp, none)
	otherChannel := newFate(uaid, uuid.New(), "t", exp, none)
	otherUser := newFate(uuid.New(), chid, "t", exp, none)
	track(t, s, received, stored, node, sent, keep, done, otherTopic, noTopic, otherChannel, otherUser)
	for f, st := range map[*storage.Fate]storage.FateState{
		&stored: storage.FateStored, &node: storage.FateNodeTransmitted, &sent: storage.FateTransmitted,
	} {
		if ok, err := s.Reach(ctx(t), uaid, f.ID, st); err != nil || !ok {
			t.Fatalf("reach %s: %v %v", st, ok, err)
		}
	}
	settle(t, s, done, storage.FateDelivered, storage.DropNone, true)

	before := counts(t, s)
	n, err := s.SettleTopic(ctx(t), uaid, chid, "t", keep.ID)
	must(t, err, "settle topic")
	if n != 2 {
		t.Fatalf("settle topic settled %d, want 2", n)
	}
	wantState(t, s, received, storage.FateDropped, storage.DropTopicReplaced, "received fate")
	wantState(t, s, stored, storage.FateDropped, storage.DropTopicReplaced, "stored fate")
	wantState(t, s, node, storage.FateNodeTransmitted, storage.DropNone, "fate taken for delivery")
	wantState(t, s, sent, storage.FateTransmitted, storage.DropNone, "fate written to the socket")
	wantState(t, s, keep, storage.FateReceived, storage.DropNone, "the kept fate")
	wantState(t, s, done, storage.FateDelivered, storage.DropNone, "a settled fate")
	for _, f := range []storage.Fate{otherTopic, noTopic, otherChannel, otherUser} {
		wantState(t, s, f, storage.FateReceived, storage.DropNone, "a fate of another topic, channel or user")
	}
	wantCounts(t, s, before, map[storage.Milestone]int64{dropped(storage.DropTopicReplaced): 2}, "settle topic")
	if n, err := s.SettleTopic(ctx(t), uaid, chid, "t", keep.ID); err != nil || n != 0 {
		t.Fatalf("settle topic again: %d %v, want 0", n, err)
	}
}

func testFateSettleExpired(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	now := time.Now()
	none := storage.ReceiptSubID{}
	settled := newFate(uaid, chid, "", now.Add(-4*time.Second), none)
	oldest := newFate(uaid, chid, "", now.Add(-3*time.Second), none)
	older := newFate(uaid, chid, "", now.Add(-2*time.Second), none)
	old := newFate(uaid, chid, "", now.Add(-time.Second), none)
	live := newFate(uaid, chid, "", now.Add(time.Hour), none)
	track(t, s, old, live, older, settled, oldest)
	settle(t, s, settled, storage.FateDelivered, storage.DropNone, true)
	if ok, err := s.Reach(ctx(t), uaid, older.ID, storage.FateStored); err != nil || !ok {
		t.Fatalf("reach: %v %v", ok, err)
	}

	before := counts(t, s)
	n, err := s.SettleExpired(ctx(t), now, 2)
	must(t, err, "settle expired")
	if n != 2 {
		t.Fatalf("settle expired with limit 2 settled %d", n)
	}
	wantState(t, s, oldest, storage.FateExpired, storage.DropNone, "oldest expired fate")
	wantState(t, s, older, storage.FateExpired, storage.DropNone, "older expired fate")
	wantState(t, s, old, storage.FateReceived, storage.DropNone, "expired fate past the limit")
	wantState(t, s, settled, storage.FateDelivered, storage.DropNone, "fate settled before it expired")
	n, err = s.SettleExpired(ctx(t), now, 10)
	if err != nil || n != 1 {
		t.Fatalf("settle expired again: %d %v, want 1", n, err)
	}
	wantState(t, s, old, storage.FateExpired, storage.DropNone, "last expired fate")
	if n, err := s.SettleExpired(ctx(t), now, 10); err != nil || n != 0 {
		t.Fatalf("settle expired with none left: %d %v, want 0", n, err)
	}
	wantState(t, s, live, storage.FateReceived, storage.DropNone, "unexpired fate")
	wantCounts(t, s, before, map[storage.Milestone]int64{state(storage.FateExpired): 3}, "settle expired")
}

// testFateAckGrace: an expired fate whose message is with a user agent
// (transmitted) gets FateAckGrace more for its ack, once: an ack in it
// settles delivered; without one it settles expired after it. A stored
// one expires at once.
func testFateAckGrace(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	now := time.Now()
	none := storage.ReceiptSubID{}
	acked := newFate(uaid, chid, "", now.Add(-time.Second), none)
	unacked := newFate(uaid, chid, "", now.Add(-time.Second), none)
	stored := newFate(uaid, chid, "", now.Add(-time.Second), none)
	track(t, s, acked, unacked, stored)
	for _, f := range []storage.Fate{acked, unacked} {
		if ok, err := s.Reach(ctx(t), uaid, f.ID, storage.FateTransmitted); err != nil || !ok {
			t.Fatalf("reach: %v %v", ok, err)
		}
	}
	n, err := s.SettleExpired(ctx(t), now, 10)
	if err != nil || n != 1 {
		t.Fatalf("settle expired: %d %v, want 1 (only the stored one)", n, err)
	}
	wantState(t, s, stored, storage.FateExpired, storage.DropNone, "stored fate past its expiry")
	wantState(t, s, unacked, storage.FateTransmitted, storage.DropNone, "transmitted fate in its grace")
	got, err := s.GetFate(ctx(t), uaid, unacked.ID)
	must(t, err, "get fate")
	if want := unacked.Expiry.Add(storage.FateAckGrace); !got.Expiry.Equal(want) {
		t.Fatalf("graced expiry %v, want %v", got.Expiry, want)
	}
	settle(t, s, acked, storage.FateDelivered, storage.DropNone, true)
	later := now.Add(storage.FateAckGrace)
	if n, err := s.SettleExpired(ctx(t), later, 10); err != nil || n != 1 {
		t.Fatalf("settle expired after the grace: %d %v, want 1", n, err)
	}
	wantState(t, s, unacked, storage.FateExpired, storage.DropNone, "transmitted fate after its grace")
	wantState(t, s, acked, storage.FateDelivered, storage.DropNone, "fate acked in its grace")
}

// testFateSettleExpiredConcurrent: nodes sweeping at once settle each
// expired fate once between them.
func testFateSettleExpiredConcurrent(t *testing.T, s storage.Store) {
	const expired = 60
	now := time.Now()
	var fates []storage.Fate
	for i := range expired + 5 {
		exp := now.Add(-time.Duration(i+1) * time.Millisecond)
		if i >= expired {
			exp = now.Add(time.Hour)
		}
		f := newFate(uuid.New(), uuid.New(), "", exp, storage.ReceiptSubID{})
		track(t, s, f)
		fates = append(fates, f)
	}
	before := counts(t, s)
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Each caller goes on until a call finds nothing left to settle.
			for {
				n, err := s.SettleExpired(ctx(t), now, 7)
				if err != nil {
					t.Errorf("settle expired: %v", err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
				if n == 0 {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if total != expired {
		t.Fatalf("4 concurrent callers settled %d, want %d", total, expired)
	}
	for i, f := range fates {
		if i < expired {
			wantState(t, s, f, storage.FateExpired, storage.DropNone, "expired fate")
		} else {
			wantState(t, s, f, storage.FateReceived, storage.DropNone, "live fate")
		}
	}
	wantCounts(t, s, before, map[storage.Milestone]int64{state(storage.FateExpired): expired}, "concurrent settle expired")
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

func testReceiptSubs(t *testing.T, s storage.Store) {
	sub := storage.ReceiptSub{ID: newSubID(), Webhook: "https://example.com/receipts",
		Created: time.Now().Truncate(time.Millisecond)}
	_, _ = rand.Read(sub.KeyHash[:])
	must(t, s.PutReceiptSub(ctx(t), sub), "put receipt sub")
	same := func(what string) {
		t.Helper()
		got, err := s.GetReceiptSub(ctx(t), sub.ID)
		must(t, err, what)
		if got.ID != sub.ID || got.KeyHash != sub.KeyHash || got.Webhook != sub.Webhook || !got.Created.Equal(sub.Created) {
			t.Fatalf("%s:\n got  %+v\n want %+v", what, got, sub)
		}
	}
	same("get receipt sub")
	again := sub
	again.Webhook, again.KeyHash = "", [32]byte{1}
	wantKind(t, s.PutReceiptSub(ctx(t), again), storage.ErrConflict, "put a receipt sub twice")
	same("get receipt sub after a conflict")
	_, err := s.GetReceiptSub(ctx(t), newSubID())
	wantKind(t, err, storage.ErrNotFound, "get an unknown receipt sub")
}

var receiptIDChars = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func testReceipts(t *testing.T, s storage.Store) {
	a, b := newSubID(), newSubID()
	uaid := uuid.New()
	var wantA, wantB []string
	for i := range 7 {
		sub, want := a, &wantA
		if i%3 == 2 {
			sub, want = b, &wantB
		}
		f := newFate(uaid, uuid.New(), "", time.Now().Add(time.Hour), sub)
		track(t, s, f)
		settle(t, s, f, storage.FateDelivered, storage.DropNone, true)
		*want = append(*want, f.MessageID)
	}
	read := func(sub storage.ReceiptSubID, limit int) ([]storage.Receipt, []string) {
		t.Helper()
		rs, err := s.Receipts(ctx(t), sub, limit)
		must(t, err, "receipts")
		mids := make([]string, len(rs))
		for i, r := range rs {
			mids[i] = r.MessageID
			if !receiptIDChars.MatchString(r.ID) {
				t.Fatalf("receipt id %q is not 1 to 64 of [A-Za-z0-9_-]", r.ID)
			}
			if i > 0 && r.At.Before(rs[i-1].At) {
				t.Fatalf("receipts not oldest first: %+v", rs)
			}
		}
		return rs, mids
	}
	rsA, got := read(a, 100)
	sameList(t, got, wantA, "receipts of a, oldest first")
	_, got = read(b, 100)
	sameList(t, got, wantB, "receipts of b")
	_, got = read(a, 2)
	sameList(t, got, wantA[:2], "receipts of a, limit 2")

	// An ack through another subscription removes nothing.
	must(t, s.AckReceipts(ctx(t), b, []string{rsA[0].ID, rsA[1].ID}), "ack a's receipts through b")
	_, got = read(a, 100)
	sameList(t, got, wantA, "receipts of a after an ack through b")

	must(t, s.AckReceipts(ctx(t), a, []string{rsA[0].ID, "unknown", rsA[1].ID, ""}), "ack receipts")
	_, got = read(a, 100)
	sameList(t, got, wantA[2:], "receipts of a after acking two")
	must(t, s.AckReceipts(ctx(t), a, []string{rsA[0].ID}), "ack a receipt twice")
	must(t, s.AckReceipts(ctx(t), a, nil), "ack nothing")
	_, got = read(b, 100)
	sameList(t, got, wantB, "receipts of b after acks of a")
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

// testFateConservation: every tracked fate ends in exactly one terminal
// count, whichever paths settle it and however they race.
func testFateConservation(t *testing.T, s storage.Store) {
	const perUser = 24
	users := []uuid.UUID{uuid.New(), uuid.New()}
	a, b := uuid.New(), uuid.New()
	now := time.Now()
	var fates []storage.Fate
	for _, uaid := range users {
		for i := range perUser {
			chid, topic, exp := a, "", now.Add(time.Hour)
			if i%2 == 1 {
				chid = b
			}
			if i%3 == 0 {
				topic = "t"
			}
			if i%4 == 0 {
				exp = now.Add(-time.Duration(i+1) * time.Millisecond)
			}
			f := newFate(uaid, chid, topic, exp, storage.ReceiptSubID{})
			fates = append(fates, f)
			track(t, s, f)
			if i%5 == 0 {
				if _, err := s.Reach(ctx(t), uaid, f.ID, storage.FateStored); err != nil {
					t.Fatalf("reach: %v", err)
				}
			}
		}
	}
	var mu sync.Mutex
	settled := 0
	add := func(n int, err error) {
		if err != nil {
			t.Errorf("settle: %v", err)
		}
		mu.Lock()
		settled += n
		mu.Unlock()
	}
	var wg sync.WaitGroup
	run := func(fn func(context.Context) (int, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			add(fn(ctx(t)))
		}()
	}
	for i, f := range fates {
		if i%3 == 1 {
			run(func(c context.Context) (int, error) {
				ok, err := s.Settle(c, f.UAID, f.ID, terminals[i%len(terminals)].State, terminals[i%len(terminals)].Reason)
				if ok {
					return 1, err
				}
				return 0, err
			})
		}
	}
	run(func(c context.Context) (int, error) { return s.SettleUser(c, users[0], b, storage.DropUnsubscribed) })
	run(func(c context.Context) (int, error) { return s.SettleTopic(c, users[1], a, "t", storage.FateID{}) })
	run(func(c context.Context) (int, error) { return s.SettleExpired(c, now, 100) })
	run(func(c context.Context) (int, error) { return s.SettleExpired(c, now, 100) })
	wg.Wait()
	// Whatever is left goes with its user.
	for _, uaid := range users {
		add(s.SettleUser(ctx(t), uaid, uuid.Nil, storage.DropUserGone))
	}
	if t.Failed() {
		t.FailNow()
	}
	if settled != len(fates) {
		t.Fatalf("the settle calls reported %d settled, want %d", settled, len(fates))
	}
	for _, f := range fates {
		got, err := s.GetFate(ctx(t), f.UAID, f.ID)
		must(t, err, "get fate")
		if !got.State.Terminal() {
			t.Fatalf("fate %s left %s", f.MessageID, got.State)
		}
	}
	c := counts(t, s)
	if c[state(storage.FateReceived)] != int64(len(fates)) || terminalSum(c) != int64(len(fates)) {
		t.Fatalf("received %d, terminal %d; want both %d: %v", c[state(storage.FateReceived)], terminalSum(c), len(fates), c)
	}
}

// testReceiptHooks: subscriptions with a webhook are listed, in id
// order, paged; those without are not, nor anything else the store keeps
// (the health probe's key).
func testReceiptHooks(t *testing.T, s storage.Store) {
	// The health probe writes too: whatever it writes is no webhook (the
	// embedded store's probe key once sat in the webhook index's range).
	must(t, s.Health(ctx(t)), "health")
	var want []storage.ReceiptSubID
	for i := range 5 {
		sub := storage.ReceiptSub{ID: newSubID(), Created: time.Now().Truncate(time.Millisecond)}
		if i%2 == 0 {
			sub.Webhook, sub.WebhookSecret = fmt.Sprintf("https://app.example/hook/%d", i), fmt.Sprintf("secret-%d", i)
			want = append(want, sub.ID)
		}
		must(t, s.PutReceiptSub(ctx(t), sub), "put receipt sub")
	}
	var got []storage.ReceiptSub
	var after storage.ReceiptSubID
	for {
		page, err := s.ReceiptHooks(ctx(t), after, 2)
		must(t, err, "receipt hooks")
		if len(page) > 2 {
			t.Fatalf("a page of %d with limit 2", len(page))
		}
		got = append(got, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(got) != len(want) {
		t.Fatalf("%d hooks listed, want %d", len(got), len(want))
	}
	for i := range got {
		if i > 0 && strings.Compare(string(got[i-1].ID[:]), string(got[i].ID[:])) >= 0 {
			t.Fatalf("hooks out of id order at %d", i)
		}
		full, err := s.GetReceiptSub(ctx(t), got[i].ID)
		must(t, err, "get receipt sub")
		if got[i].Webhook == "" || got[i].Webhook != full.Webhook || got[i].WebhookSecret != full.WebhookSecret || full.WebhookSecret == "" {
			t.Fatalf("hook %+v, stored %+v", got[i], full)
		}
	}
	_, err := s.ReceiptHooks(ctx(t), after, 0)
	wantKind(t, err, storage.ErrInvalid, "receipt hooks with limit 0")
	bad := storage.ReceiptSub{ID: newSubID(), Webhook: "ftp://app.example/x"}
	wantKind(t, s.PutReceiptSub(ctx(t), bad), storage.ErrInvalid, "webhook that is not http(s)")
}

// testCountReceiptHooks: a key's subscriptions with a webhook are
// counted, up to the limit; those without a webhook and other keys' are
// not.
func testCountReceiptHooks(t *testing.T, s storage.Store) {
	var key, other, none [32]byte
	_, _ = rand.Read(key[:])
	_, _ = rand.Read(other[:])
	_, _ = rand.Read(none[:])
	put := func(k [32]byte, webhook string) {
		sub := storage.ReceiptSub{ID: newSubID(), KeyHash: k, Created: time.Now().Truncate(time.Millisecond)}
		if webhook != "" {
			sub.Webhook, sub.WebhookSecret = webhook, "secret"
		}
		must(t, s.PutReceiptSub(ctx(t), sub), "put receipt sub")
	}
	for i := range 3 {
		put(key, fmt.Sprintf("https://app.example/hook/%d", i))
		put(key, "")
	}
	put(other, "https://other.example/hook")
	for _, c := range []struct {
		key         [32]byte
		limit, want int
	}{{key, 10, 3}, {key, 3, 3}, {key, 2, 2}, {key, 1, 1}, {other, 10, 1}, {none, 10, 0}} {
		n, err := s.CountReceiptHooks(ctx(t), c.key, c.limit)
		must(t, err, "count receipt hooks")
		if n != c.want {
			t.Errorf("count of key %x with limit %d: %d, want %d", c.key[:4], c.limit, n, c.want)
		}
	}
	_, err := s.CountReceiptHooks(ctx(t), key, 0)
	wantKind(t, err, storage.ErrInvalid, "count receipt hooks with limit 0")
}
