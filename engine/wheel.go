package engine

import (
	"math"
	"sync"
	"time"
)

// wheel is the timing wheel behind every per-connection timeout (hello,
// keepalive ping, pong): no timer or goroutine per connection, one slot
// pointer per scheduled session. The ticker (gnet's OnTick) advances it;
// due sessions are handed to fire, which runs their check on the owning
// event loop. Safe for concurrent use: schedule is called from loops.
//
// Deadlines move lazily: a session's deadline may change while it sits in
// a slot (activity pushes it later), and the slot re-files it when it comes
// round, so activity costs no wheel operation at all. A deadline moved
// earlier than its slot (a failed storage read retried in a second, in a
// session waiting for its keepalive minutes away) files the session again
// in the earlier slot; the entry left in the later one is stale, told by
// the session's slot, and skipped.
//
// A connection's deadline is kept in 32 bits, ms from the wheel's start,
// and compared with the current tick wrapping (after): deadlines lie at
// most minutes ahead, far from the 24 days where that breaks.
type wheel struct {
	mu    sync.Mutex
	res   time.Duration
	slots [][]*conn
	pos   int   // slot of the current tick
	start int64 // ms since the epoch of the wheel's start
	now   int64 // ms since the epoch of the current tick
}

func newWheel(res time.Duration, slots int, start time.Time) *wheel {
	if slots < 2 || slots >= math.MaxUint16 {
		panic("engine: wheel: slots must be 2 to 65534 (conn.slot is 16 bits)")
	}
	return &wheel{res: res, slots: make([][]*conn, slots), start: start.UnixMilli(), now: start.UnixMilli()}
}

// rel is ms since the epoch as a conn's wrapping deadline.
func (w *wheel) rel(ms int64) uint32 { return uint32(ms - w.start) }

// after is a - b for wrapping deadlines: positive when a is later.
func after(a, b uint32) int64 { return int64(int32(a - b)) }

// schedule makes cn due at dueMS (ms since the epoch). A session already
// in the wheel keeps its slot unless the deadline is now before it.
func (w *wheel) schedule(cn *conn, dueMS int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cn.due, cn.scheduled = w.rel(dueMS), true
	if cn.slot == 0 || after(cn.due, w.slotTime(int(cn.slot)-1)) < 0 {
		w.file(cn)
	}
}

// slotTime is when slot i next comes round, as a wrapping deadline; w.mu
// held.
func (w *wheel) slotTime(i int) uint32 {
	ahead := (i - w.pos + len(w.slots)) % len(w.slots)
	if ahead == 0 {
		ahead = len(w.slots) // the current slot comes round a turn from now
	}
	return w.rel(w.now + int64(ahead)*w.res.Milliseconds())
}

// unschedule drops cn at its slot's next turn.
func (w *wheel) unschedule(cn *conn) {
	w.mu.Lock()
	cn.scheduled = false
	w.mu.Unlock()
}

// file puts cn in the slot of its deadline, at most one turn ahead; w.mu held.
func (w *wheel) file(cn *conn) {
	ahead := int(after(cn.due, w.rel(w.now)) / w.res.Milliseconds())
	if ahead < 1 {
		ahead = 1
	}
	if ahead >= len(w.slots) {
		ahead = len(w.slots) - 1
	}
	i := (w.pos + ahead) % len(w.slots)
	w.slots[i] = append(w.slots[i], cn)
	cn.slot = uint16(i + 1)
}

// untilNext is how long from now until the next slot is due: the ticker
// sleeps that long, so an idle node ticks once per slot and each slot is
// advanced at its time, not up to half a slot late.
func (w *wheel) untilNext(now time.Time) time.Duration {
	w.mu.Lock()
	next := w.now + w.res.Milliseconds()
	w.mu.Unlock()
	// A millisecond past the boundary, so the tick finds the slot due.
	return max(time.Duration(next-now.UnixMilli()+1)*time.Millisecond, time.Millisecond)
}

// advance moves to now and returns the sessions now due. Sessions whose
// deadline moved later are re-filed; unscheduled ones are dropped.
func (w *wheel) advance(now time.Time, due []*conn) []*conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	target := now.UnixMilli()
	for w.now+w.res.Milliseconds() <= target {
		w.now += w.res.Milliseconds()
		w.pos = (w.pos + 1) % len(w.slots)
		slot := w.slots[w.pos]
		w.slots[w.pos] = slot[:0:0]
		for _, cn := range slot {
			if int(cn.slot)-1 != w.pos {
				continue // filed again in an earlier slot since: stale
			}
			cn.slot = 0
			switch {
			case !cn.scheduled:
			case after(cn.due, w.rel(w.now)) > 0:
				w.file(cn)
			default:
				due = append(due, cn)
			}
		}
	}
	return due
}
