package engine

import (
	"testing"
	"time"
)

func TestWheelFiresDueAndRefilesMoved(t *testing.T) {
	start := time.UnixMilli(1_000_000)
	w := newWheel(100*time.Millisecond, 8, start)
	a, b, c, far := &conn{}, &conn{}, &conn{}, &conn{}
	w.schedule(a, start.UnixMilli()+250)
	w.schedule(b, start.UnixMilli()+250)
	w.schedule(c, start.UnixMilli()+250)
	w.schedule(far, start.UnixMilli()+5_000) // beyond one turn of the wheel
	w.schedule(b, start.UnixMilli()+650)     // activity moved b later
	w.unschedule(c)                          // c closed

	if due := w.advance(start.Add(200*time.Millisecond), nil); len(due) != 0 {
		t.Fatalf("fired early: %d", len(due))
	}
	due := w.advance(start.Add(300*time.Millisecond), nil)
	if len(due) != 1 || due[0] != a {
		t.Fatalf("at 300ms: %v, want only a", due)
	}
	due = w.advance(start.Add(700*time.Millisecond), nil)
	if len(due) != 1 || due[0] != b {
		t.Fatalf("at 700ms: %v, want only b", due)
	}
	due = w.advance(start.Add(4900*time.Millisecond), nil)
	if len(due) != 0 {
		t.Fatalf("far fired early")
	}
	due = w.advance(start.Add(5100*time.Millisecond), nil)
	if len(due) != 1 || due[0] != far {
		t.Fatalf("far: %v", due)
	}
	// Fired sessions are out of the wheel until scheduled again.
	if due := w.advance(start.Add(20*time.Second), nil); len(due) != 0 {
		t.Fatalf("refired: %d", len(due))
	}
}

// TestWheelAcrossWrap: deadlines are 32-bit ms from the wheel's start and
// wrap after 49.7 days; a node up that long still fires them in order.
func TestWheelAcrossWrap(t *testing.T) {
	start := time.UnixMilli(1_000_000)
	w := newWheel(100*time.Millisecond, 8, start)
	// Run the wheel to 300 ms before the 32-bit deadline wraps.
	now := start.Add((1<<32 - 300) * time.Millisecond)
	w.now = now.UnixMilli()
	a, b := &conn{}, &conn{}
	w.schedule(a, now.UnixMilli()+200) // before the wrap
	w.schedule(b, now.UnixMilli()+650) // after it
	if due := w.advance(now.Add(100*time.Millisecond), nil); len(due) != 0 {
		t.Fatalf("fired early: %d", len(due))
	}
	if due := w.advance(now.Add(300*time.Millisecond), nil); len(due) != 1 || due[0] != a {
		t.Fatalf("at 300ms: %v, want only a", due)
	}
	if due := w.advance(now.Add(600*time.Millisecond), nil); len(due) != 0 {
		t.Fatalf("b fired before its deadline, across the wrap: %d", len(due))
	}
	if due := w.advance(now.Add(700*time.Millisecond), nil); len(due) != 1 || due[0] != b {
		t.Fatalf("at 700ms: %v, want only b", due)
	}
}

// TestWheelDeadlineMovedEarlier: a session waiting in the slot of a
// deadline minutes away (its keepalive) that is given an earlier one (a
// failed storage read retried in a second) fires at the earlier one, once;
// the entry left in the later slot neither fires it again nor early.
func TestWheelDeadlineMovedEarlier(t *testing.T) {
	start := time.UnixMilli(1_000_000)
	w := newWheel(100*time.Millisecond, 8, start)
	a := &conn{}
	w.schedule(a, start.UnixMilli()+5_000) // beyond one turn: the last slot
	w.schedule(a, start.UnixMilli()+250)   // moved earlier
	if due := w.advance(start.Add(200*time.Millisecond), nil); len(due) != 0 {
		t.Fatalf("fired early: %d", len(due))
	}
	if due := w.advance(start.Add(300*time.Millisecond), nil); len(due) != 1 || due[0] != a {
		t.Fatalf("at 300ms: %v, want a (its deadline moved to 250ms)", due)
	}
	// Fired, then given a deadline later than the stale entry's slot.
	w.schedule(a, start.UnixMilli()+1_500)
	if due := w.advance(start.Add(1400*time.Millisecond), nil); len(due) != 0 {
		t.Fatalf("the stale entry fired it at or before 1400ms: %d", len(due))
	}
	if due := w.advance(start.Add(1600*time.Millisecond), nil); len(due) != 1 || due[0] != a {
		t.Fatalf("at 1600ms: %v, want a once", due)
	}
	if due := w.advance(start.Add(20*time.Second), nil); len(due) != 0 {
		t.Fatalf("refired: %d", len(due))
	}
}

// The ticker sleeps until the next slot is due, and no longer: a slot
// already past (a late tick) is advanced at once.
func TestWheelUntilNext(t *testing.T) {
	start := time.UnixMilli(1_000_000)
	w := newWheel(100*time.Millisecond, 8, start)
	if got := w.untilNext(start.Add(30 * time.Millisecond)); got != 71*time.Millisecond {
		t.Errorf("30 ms into the slot: sleep %v, want 71ms", got)
	}
	if got := w.untilNext(start.Add(250 * time.Millisecond)); got != time.Millisecond {
		t.Errorf("a slot overdue: sleep %v, want 1ms", got)
	}
	w.advance(start.Add(250*time.Millisecond), nil)
	if got := w.untilNext(start.Add(250 * time.Millisecond)); got != 51*time.Millisecond {
		t.Errorf("after advancing to 250 ms: sleep %v, want 51ms", got)
	}
}
