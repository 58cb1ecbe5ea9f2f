package storagetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Settling fates (storage.FateStore): every path that ends a tracked
// message (delivery, a user's or a topic's drop, expiry, the ack grace),
// one winner each however they race, and each fate counted once.

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
	// Stored: a received fate past its expiry gets the grace first
	// (testFateAckGraceReceived).
	reachAll(t, s, storage.FateStored, old, older, oldest)

	before := counts(t, s)
	n, err := s.SettleExpired(ctx(t), now, 2)
	must(t, err, "settle expired")
	if n != 2 {
		t.Fatalf("settle expired with limit 2 settled %d", n)
	}
	wantState(t, s, oldest, storage.FateExpired, storage.DropNone, "oldest expired fate")
	wantState(t, s, older, storage.FateExpired, storage.DropNone, "older expired fate")
	wantState(t, s, old, storage.FateStored, storage.DropNone, "expired fate past the limit")
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
	reachAll(t, s, storage.FateTransmitted, acked, unacked)
	reachAll(t, s, storage.FateStored, stored)
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

// testFateAckGraceReceived: a fate still received past its expiry (a
// TTL 0 push expires as it is tracked, before the endpoint node records
// its delivery to a connection node) gets FateAckGrace like one written
// to its user agent: handed to the node and acked in it, it settles
// delivered; left so, it settles expired after it.
func testFateAckGraceReceived(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	now := time.Now()
	none := storage.ReceiptSubID{}
	acked := newFate(uaid, chid, "", now, none) // TTL 0: expiry is Track's now
	left := newFate(uaid, chid, "", now.Add(-time.Second), none)
	track(t, s, acked, left)
	if n, err := s.SettleExpired(ctx(t), now.Add(time.Millisecond), 10); err != nil || n != 0 {
		t.Fatalf("settle expired: %d %v, want 0 (received fates get the grace)", n, err)
	}
	for _, f := range []storage.Fate{acked, left} {
		got, err := s.GetFate(ctx(t), uaid, f.ID)
		must(t, err, "get fate")
		if want := f.Expiry.Add(storage.FateAckGrace); got.State != storage.FateReceived || !got.Expiry.Equal(want) {
			t.Fatalf("received fate past its expiry: %s, expiry %v; want received, expiry %v", got.State, got.Expiry, want)
		}
	}
	reachAll(t, s, storage.FateNodeTransmitted, acked)
	reachAll(t, s, storage.FateTransmitted, acked)
	settle(t, s, acked, storage.FateDelivered, storage.DropNone, true)
	// The grace is given once: transmitted after it, no more.
	if n, err := s.SettleExpired(ctx(t), now.Add(storage.FateAckGrace), 10); err != nil || n != 1 {
		t.Fatalf("settle expired after the grace: %d %v, want 1", n, err)
	}
	wantState(t, s, acked, storage.FateDelivered, storage.DropNone, "received fate acked in its grace")
	wantState(t, s, left, storage.FateExpired, storage.DropNone, "received fate after its grace")
}

// reachAll moves each of fs to st, which must apply.
func reachAll(t testing.TB, s storage.Store, st storage.FateState, fs ...storage.Fate) {
	t.Helper()
	for _, f := range fs {
		if ok, err := s.Reach(ctx(t), f.UAID, f.ID, st); err != nil || !ok {
			t.Fatalf("reach %s: %v %v", st, ok, err)
		}
	}
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
		if i < expired {
			reachAll(t, s, storage.FateStored, f) // no grace
		}
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
			if i%5 == 0 || i%4 == 0 { // expired ones stored: no grace
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
	live := liveCounts(t, s)
	for _, st := range []storage.FateState{storage.FateReceived, storage.FateStored} {
		if live[st] != 0 {
			t.Fatalf("%s counts %d live once every fate is settled: %v", st, live[st], live)
		}
	}
}
