package wheel

import (
	"testing"
	"time"
)

// entry is a connection as the wheel sees it.
type entry struct {
	due       uint32
	slot      uint16
	scheduled bool
}

func (e *entry) Timing() (*uint32, *uint16, *bool) { return &e.due, &e.slot, &e.scheduled }

// testWheel is 8 slots of 100 ms from its start.
func testWheel() (time.Time, *Wheel[*entry]) {
	start := time.UnixMilli(1_000_000)
	return start, New[*entry](100*time.Millisecond, 8, start)
}

// step is advancing the wheel to at ms from a base time, where exactly
// want fires (nil: none).
type step struct {
	at   int64
	want *entry
}

// firesAt takes the steps in turn from base.
func firesAt(t *testing.T, w *Wheel[*entry], base time.Time, steps ...step) {
	t.Helper()
	for _, st := range steps {
		due := w.Advance(base.Add(time.Duration(st.at)*time.Millisecond), nil)
		if st.want == nil && len(due) != 0 || st.want != nil && (len(due) != 1 || due[0] != st.want) {
			t.Fatalf("at %d ms: %d fired (%v), want %v", st.at, len(due), due, st.want)
		}
	}
}

func TestWheelFiresDueAndRefilesMoved(t *testing.T) {
	start, w := testWheel()
	a, b, c, far := &entry{}, &entry{}, &entry{}, &entry{}
	w.Schedule(a, start.UnixMilli()+250)
	w.Schedule(b, start.UnixMilli()+250)
	w.Schedule(c, start.UnixMilli()+250)
	w.Schedule(far, start.UnixMilli()+5_000) // beyond one turn of the wheel
	w.Schedule(b, start.UnixMilli()+650)     // activity moved b later
	w.Unschedule(c)                          // c closed

	firesAt(t, w, start, step{200, nil}, step{300, a}, step{700, b}, step{4900, nil}, step{5100, far})
	// Fired sessions are out of the wheel until scheduled again.
	firesAt(t, w, start, step{20000, nil})
}

// TestWheelAcrossWrap: deadlines are 32-bit ms from the wheel's start and
// wrap after 49.7 days; a node up that long still fires them in order.
func TestWheelAcrossWrap(t *testing.T) {
	start, w := testWheel()
	// Run the wheel to 300 ms before the 32-bit deadline wraps.
	now := start.Add((1<<32 - 300) * time.Millisecond)
	w.now = now.UnixMilli()
	a, b := &entry{}, &entry{}
	w.Schedule(a, now.UnixMilli()+200) // before the wrap
	w.Schedule(b, now.UnixMilli()+650) // after it
	firesAt(t, w, now, step{100, nil}, step{300, a}, step{600, nil}, step{700, b})
}

// TestWheelDeadlineMovedEarlier: a session waiting in the slot of a
// deadline minutes away (its keepalive) that is given an earlier one (a
// failed storage read retried in a second) fires at the earlier one, once;
// the entry left in the later slot neither fires it again nor early.
func TestWheelDeadlineMovedEarlier(t *testing.T) {
	start, w := testWheel()
	a := &entry{}
	w.Schedule(a, start.UnixMilli()+5_000) // beyond one turn: the last slot
	w.Schedule(a, start.UnixMilli()+250)   // moved earlier
	firesAt(t, w, start, step{200, nil}, step{300, a})
	// Fired, then given a deadline later than the stale entry's slot.
	w.Schedule(a, start.UnixMilli()+1_500)
	firesAt(t, w, start, step{1400, nil}, step{1600, a}, step{20000, nil})
}

// TestUntilNext: the ticker sleeps until the next slot holding an entry
// is due, and no longer: a turn when the wheel is empty, at once for a
// slot already past (a late tick).
func TestUntilNext(t *testing.T) {
	start, w := testWheel()
	if got := w.UntilNext(start.Add(30 * time.Millisecond)); got != 671*time.Millisecond {
		t.Errorf("empty, 30 ms into the slot: sleep %v, want 671ms (a turn: 7 slots, to 700ms)", got)
	}
	w.Schedule(&entry{}, start.UnixMilli()+350)
	if got := w.UntilNext(start.Add(30 * time.Millisecond)); got != 271*time.Millisecond {
		t.Errorf("an entry due at 350ms: sleep %v, want 271ms (to its slot at 300ms)", got)
	}
	if got := w.UntilNext(start.Add(450 * time.Millisecond)); got != time.Millisecond {
		t.Errorf("its slot overdue: sleep %v, want 1ms", got)
	}
	// Its slot re-files it in the next (400ms), which fires it.
	if due := w.Advance(start.Add(450*time.Millisecond), nil); len(due) != 1 {
		t.Fatalf("at 450ms: %d due, want 1", len(due))
	}
	if got := w.UntilNext(start.Add(450 * time.Millisecond)); got != 651*time.Millisecond {
		t.Errorf("empty again at 450ms: sleep %v, want 651ms (a turn from 400ms)", got)
	}
}

// TestWokenWhenFiledBeforeTheTick: an entry filed in a slot before the
// tick the ticker sleeps until wakes it, once; one filed after does not.
func TestWokenWhenFiledBeforeTheTick(t *testing.T) {
	start, w := testWheel()
	woken := func() bool {
		select {
		case <-w.Woken():
			return true
		default:
			return false
		}
	}
	w.Schedule(&entry{}, start.UnixMilli()+550)
	woken() // whatever filing it before the first UntilNext told
	w.UntilNext(start)
	w.Schedule(&entry{}, start.UnixMilli()+650)
	if woken() {
		t.Error("woken by an entry after the planned tick (500ms)")
	}
	w.Schedule(&entry{}, start.UnixMilli()+250)
	w.Schedule(&entry{}, start.UnixMilli()+150)
	if !woken() {
		t.Fatal("not woken by entries before the planned tick")
	}
	if woken() {
		t.Error("woken twice for one wait")
	}
	if got := w.UntilNext(start); got != 101*time.Millisecond {
		t.Errorf("after waking: sleep %v, want 101ms (the slot of 150ms)", got)
	}
}
