package storagetest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Live counts (storage.FateStore.LiveCounts): how many tracked messages
// are in each state now. Each test has a store of its own, so the counts
// start at zero.

func liveCounts(t testing.TB, s storage.Store) map[storage.FateState]int64 {
	t.Helper()
	c, err := s.LiveCounts(ctx(t))
	must(t, err, "live counts")
	if len(c) != len(storage.FateStates) {
		t.Fatalf("live counts of %d states, want every one of %d: %v", len(c), len(storage.FateStates), c)
	}
	return c
}

// wantLive checks the live counts: the states in want at their counts,
// every other at zero.
func wantLive(t testing.TB, s storage.Store, want map[storage.FateState]int64, what string) {
	t.Helper()
	got := liveCounts(t, s)
	for _, st := range storage.FateStates {
		if got[st] != want[st] {
			t.Errorf("%s: %s counts %d, want %d", what, st, got[st], want[st])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// testFateLiveCounts: a fate's moves through received, stored,
// transmitted and delivered, a direct delivery, a TTL expiry, drops and
// an error each move one count from the state left to the one reached;
// a move to the state a fate is in, and any move of a settled fate,
// change nothing.
func testFateLiveCounts(t *testing.T, s storage.Store) {
	type L = map[storage.FateState]int64
	const (
		rec, sto, node, sent = storage.FateReceived, storage.FateStored, storage.FateNodeTransmitted, storage.FateTransmitted
	)
	wantLive(t, s, L{}, "a new store")
	uaid, chid := uuid.New(), uuid.New()
	none := storage.ReceiptSubID{}
	stored, direct, errored := hourFate(uaid, chid), hourFate(uaid, chid), hourFate(uaid, chid)
	topic1, topic2 := newFate(uaid, chid, "t", time.Now().Add(time.Hour), none), newFate(uaid, chid, "t", time.Now().Add(time.Hour), none)
	expiring := newFate(uaid, chid, "", time.Now().Add(-time.Second), none)
	track(t, s, stored, direct, errored, topic1, topic2, expiring)
	wantLive(t, s, L{rec: 6}, "six tracked")

	reachAll(t, s, sto, stored, expiring)
	reachAll(t, s, sto, stored) // again: stays stored
	wantLive(t, s, L{rec: 4, sto: 2}, "two stored")
	reachAll(t, s, sent, stored)
	wantLive(t, s, L{rec: 4, sto: 1, sent: 1}, "stored, then written to its user agent")
	settle(t, s, stored, storage.FateDelivered, storage.DropNone, true)
	wantLive(t, s, L{rec: 4, sto: 1, storage.FateDelivered: 1}, "acked")

	reachAll(t, s, node, direct)
	wantLive(t, s, L{rec: 3, sto: 1, node: 1, storage.FateDelivered: 1}, "handed to a node")
	reachAll(t, s, sent, direct)
	wantLive(t, s, L{rec: 3, sto: 1, sent: 1, storage.FateDelivered: 1}, "written by the node")

	if n, err := s.SettleExpired(ctx(t), time.Now(), 10); err != nil || n != 1 {
		t.Fatalf("settle expired: %d %v, want the stored one", n, err)
	}
	wantLive(t, s, L{rec: 3, sent: 1, storage.FateDelivered: 1, storage.FateExpired: 1}, "expired")

	if n, err := s.SettleTopic(ctx(t), uaid, chid, "t", topic2.ID); err != nil || n != 1 {
		t.Fatalf("settle topic: %d %v", n, err)
	}
	settle(t, s, errored, storage.FateErrored, storage.DropNone, true)
	wantLive(t, s, L{rec: 1, sent: 1, storage.FateDelivered: 1, storage.FateExpired: 1, storage.FateDropped: 1,
		storage.FateErrored: 1}, "dropped and errored")

	// A settled fate moves no count, however it is reached or settled.
	if ok, err := s.Reach(ctx(t), uaid, stored.ID, sto); err != nil || ok {
		t.Fatalf("reach of a settled fate: %v %v", ok, err)
	}
	settle(t, s, stored, storage.FateExpired, storage.DropNone, false)
	if n, err := s.SettleUser(ctx(t), uaid, uuid.Nil, storage.DropUserGone); err != nil || n != 2 {
		t.Fatalf("settle user: %d %v, want the two left", n, err)
	}
	wantLive(t, s, L{storage.FateDelivered: 1, storage.FateExpired: 1, storage.FateDropped: 3, storage.FateErrored: 1},
		"every fate settled")
}

// testFateLiveCountsConcurrent: moves and settles racing on the same
// fates (as an endpoint node, a connection node and sweeps do) move each
// count once: once every fate is settled no non-terminal state counts
// any, and the terminal counts are one per fate.
func testFateLiveCountsConcurrent(t *testing.T, s storage.Store) {
	const fates = 12
	uaid := uuid.New()
	var fs []storage.Fate
	for range fates {
		f := hourFate(uaid, uuid.New())
		track(t, s, f)
		fs = append(fs, f)
	}
	moves := []storage.FateState{storage.FateStored, storage.FateNodeTransmitted, storage.FateTransmitted}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, f := range fs {
		for j := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var err error
				if j < 4 {
					_, err = s.Reach(ctx(t), uaid, f.ID, moves[(i+j)%len(moves)])
				} else {
					m := terminals[(i+j)%len(terminals)]
					_, err = s.Settle(ctx(t), uaid, f.ID, m.State, m.Reason)
				}
				if err != nil {
					t.Errorf("move: %v", err)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	got := liveCounts(t, s)
	var terminal int64
	for _, st := range storage.FateStates {
		switch {
		case !st.Terminal() && got[st] != 0:
			t.Errorf("%s counts %d once every fate is settled, want 0", st, got[st])
		case st.Terminal():
			terminal += got[st]
		}
	}
	if terminal != fates {
		t.Errorf("terminal states count %d, want one per fate (%d): %v", terminal, fates, got)
	}
}
