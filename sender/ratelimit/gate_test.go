package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCallGateShare: a gate plans no call until its share comes, plans
// within the share's validity and the plan horizon at the share's pace,
// and after Close holds no share again, whatever a renewal under way
// sets.
func TestCallGateShare(t *testing.T) {
	g := NewCallGate(100)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if g.Open() || g.Parts() != 0 {
		t.Fatal("a new gate is open")
	}
	if _, _, err := g.Plan(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("plan without a share: %v, want to wait (ctx's error)", err)
	}
	g.set(ShareParts/2, time.Now().Add(time.Hour))
	if !g.Open() || g.Parts() != ShareParts/2 || g.Pace() != 50 {
		t.Fatalf("half the share: open %v, parts %d, pace %v; want 60 parts, 50 calls a second", g.Open(), g.Parts(), g.Pace())
	}
	before := time.Now()
	at, r, err := g.Plan(context.Background())
	if err != nil || r == nil || at.Sub(before) > PlanHorizon {
		t.Fatalf("plan: %v at %s, want a reservation within the horizon", err, at.Sub(before))
	}
	g.set(ShareParts, time.Now().Add(-time.Second))
	if g.Open() || g.Parts() != 0 || g.Pace() != 0 {
		t.Fatal("a lapsed share is usable")
	}
	g.Close()
	g.set(ShareParts, time.Now().Add(time.Hour))
	if g.Open() || g.Parts() != 0 {
		t.Fatal("a renewal after Close gave the gate a share back")
	}
}

// TestCallGateAhead: the sends ahead of their calls are at most a
// quarter of a second of this node's calls (at least one); a place given
// back lets the next one in.
func TestCallGateAhead(t *testing.T) {
	g := NewCallGate(100)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if !g.Enter(ended) || g.Enter(ended) {
		t.Fatal("without a share: want one send ahead")
	}
	g.Passed()
	g.set(ShareParts, time.Now().Add(time.Hour)) // 100 calls a second: 25 ahead
	for i := range 25 {
		if !g.Enter(ended) {
			t.Fatalf("send %d of 25 ahead refused", i+1)
		}
	}
	if g.Enter(ended) {
		t.Fatal("a 26th send ahead let in")
	}
	g.Passed()
	if !g.Enter(ended) {
		t.Fatal("a place given back was not taken")
	}
}
