// Package wheel is the timing wheel behind every per-connection timeout
// of the engine (hello, keepalive ping, pong): no timer or goroutine per
// connection, one slot pointer per scheduled entry.
//
// Deadlines move lazily: an entry's deadline may change while it sits in
// a slot (activity pushes it later), and the slot re-files it when it comes
// round, so activity costs no wheel operation at all. A deadline moved
// earlier than its slot (a failed storage read retried in a second, in a
// session waiting for its keepalive minutes away) files the entry again in
// the earlier slot; the entry left in the later one is stale, told by the
// entry's slot, and skipped.
//
// An entry's deadline is kept in 32 bits, ms from the wheel's start, and
// compared with the current tick wrapping (after): deadlines lie at most
// minutes ahead, far from the 24 days where that breaks.
//
// Its ticker sleeps until the next slot that holds an entry, not every
// slot: a node whose connections all wait minutes for their keepalive
// sleeps minutes. Filing an entry in a slot before that wakes it (Woken).
package wheel

import (
	"math"
	"sync"
	"time"
)

// Entry is what the wheel files: a pointer to the owner's value (a
// connection), whose Timing fields the wheel alone reads and writes, under
// its lock. Three fields rather than a struct: the owner packs them
// beside its own small ones.
type Entry interface {
	comparable
	// Timing is the entry's deadline (ms from the wheel's start), its
	// slot plus one (0: in none) and whether the deadline stands.
	Timing() (due *uint32, slot *uint16, scheduled *bool)
}

// Wheel is safe for concurrent use: entries are scheduled from event
// loops, advanced by the ticker.
type Wheel[E Entry] struct {
	mu    sync.Mutex
	res   time.Duration
	slots [][]E
	pos   int   // slot of the current tick
	start int64 // ms since the epoch of the wheel's start
	now   int64 // ms since the epoch of the current tick
	// wake is when the ticker means to tick next, ms since the epoch
	// (UntilNext); woken tells it of an entry filed in a slot before.
	wake  int64
	woken chan struct{}
}

// New is a wheel of slots slots of res each, starting at start.
func New[E Entry](res time.Duration, slots int, start time.Time) *Wheel[E] {
	if slots < 2 || slots >= math.MaxUint16 {
		panic("wheel: slots must be 2 to 65534 (an entry's slot is 16 bits)")
	}
	return &Wheel[E]{res: res, slots: make([][]E, slots), start: start.UnixMilli(), now: start.UnixMilli(),
		wake: math.MaxInt64, woken: make(chan struct{}, 1)}
}

// rel is ms since the epoch as an entry's wrapping deadline.
func (w *Wheel[E]) rel(ms int64) uint32 { return uint32(ms - w.start) }

// after is a - b for wrapping deadlines: positive when a is later.
func after(a, b uint32) int64 { return int64(int32(a - b)) }

// Schedule makes e due at dueMS (ms since the epoch). An entry already in
// the wheel keeps its slot unless the deadline is now before it.
func (w *Wheel[E]) Schedule(e E, dueMS int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	due, slot, scheduled := e.Timing()
	*due, *scheduled = w.rel(dueMS), true
	if *slot == 0 || after(*due, w.slotTime(int(*slot)-1)) < 0 {
		w.file(e)
	}
}

// slotTime is when slot i next comes round, as a wrapping deadline; w.mu
// held.
func (w *Wheel[E]) slotTime(i int) uint32 {
	return w.rel(w.now + int64(w.ahead(i))*w.res.Milliseconds())
}

// ahead is how many ticks from the current one slot i next comes round:
// the current slot a turn from now; w.mu held.
func (w *Wheel[E]) ahead(i int) int {
	if a := (i - w.pos + len(w.slots)) % len(w.slots); a > 0 {
		return a
	}
	return len(w.slots)
}

// Unschedule drops e at its slot's next turn.
func (w *Wheel[E]) Unschedule(e E) {
	w.mu.Lock()
	_, _, scheduled := e.Timing()
	*scheduled = false
	w.mu.Unlock()
}

// file puts e in the slot of its deadline, at most one turn ahead, and
// wakes the ticker if it sleeps past that slot; w.mu held.
func (w *Wheel[E]) file(e E) {
	due, slot, _ := e.Timing()
	ahead := int(after(*due, w.rel(w.now)) / w.res.Milliseconds())
	ahead = min(max(ahead, 1), len(w.slots)-1)
	i := (w.pos + ahead) % len(w.slots)
	w.slots[i] = append(w.slots[i], e)
	*slot = uint16(i + 1)
	if at := w.now + int64(ahead)*w.res.Milliseconds(); at < w.wake {
		w.wake = at
		select {
		case w.woken <- struct{}{}:

		default: // told already
		}
	}
}

// Woken receives when an entry was filed in a slot due before the tick
// the last UntilNext planned: the ticker asks UntilNext again.
func (w *Wheel[E]) Woken() <-chan struct{} { return w.woken }

// UntilNext is how long from now the ticker sleeps: until the next slot
// holding an entry is due (a turn at most), so each such slot is advanced
// at its time, and empty ones cost nothing.
func (w *Wheel[E]) UntilNext(now time.Time) time.Duration {
	w.mu.Lock()
	ticks := len(w.slots) - 1
	for a := 1; a < len(w.slots); a++ {
		if len(w.slots[(w.pos+a)%len(w.slots)]) > 0 {
			ticks = a
			break
		}
	}
	w.wake = w.now + int64(ticks)*w.res.Milliseconds()
	next := w.wake
	w.mu.Unlock()
	// A millisecond past the boundary, so the tick finds the slot due.
	return max(time.Duration(next-now.UnixMilli()+1)*time.Millisecond, time.Millisecond)
}

// Advance moves to now and appends the entries now due to due. Entries
// whose deadline moved later are re-filed; unscheduled ones are dropped.
func (w *Wheel[E]) Advance(now time.Time, due []E) []E {
	w.mu.Lock()
	defer w.mu.Unlock()
	target := now.UnixMilli()
	for w.now+w.res.Milliseconds() <= target {
		w.now += w.res.Milliseconds()
		w.pos = (w.pos + 1) % len(w.slots)
		slot := w.slots[w.pos]
		w.slots[w.pos] = slot[:0:0]
		for _, e := range slot {
			d, s, scheduled := e.Timing()
			if int(*s)-1 != w.pos {
				continue // filed again in an earlier slot since: stale
			}
			*s = 0
			switch {
			case !*scheduled:
			case after(*d, w.rel(w.now)) > 0:
				w.file(e)
			default:
				due = append(due, e)
			}
		}
	}
	return due
}
