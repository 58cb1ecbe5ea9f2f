package engine

import (
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
// round, so activity costs no wheel operation at all.
type wheel struct {
	mu    sync.Mutex
	res   time.Duration
	slots [][]*session
	pos   int   // slot of the current tick
	now   int64 // ms of the current tick
}

func newWheel(res time.Duration, slots int, start time.Time) *wheel {
	return &wheel{res: res, slots: make([][]*session, slots), now: start.UnixMilli()}
}

// schedule makes s due at dueMS (ms since the epoch). A session already
// in the wheel keeps its slot; only its deadline changes.
func (w *wheel) schedule(s *session, dueMS int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s.due = dueMS
	if !s.queued {
		s.queued = true
		w.file(s)
	}
}

// unschedule drops s at its slot's next turn.
func (w *wheel) unschedule(s *session) {
	w.mu.Lock()
	s.due = -1
	w.mu.Unlock()
}

// file puts s in the slot of its deadline, at most one turn ahead; w.mu held.
func (w *wheel) file(s *session) {
	ahead := int((s.due - w.now) / w.res.Milliseconds())
	if ahead < 1 {
		ahead = 1
	}
	if ahead >= len(w.slots) {
		ahead = len(w.slots) - 1
	}
	i := (w.pos + ahead) % len(w.slots)
	w.slots[i] = append(w.slots[i], s)
}

// advance moves to now and returns the sessions now due. Sessions whose
// deadline moved later are re-filed; unscheduled ones are dropped.
func (w *wheel) advance(now time.Time, due []*session) []*session {
	w.mu.Lock()
	defer w.mu.Unlock()
	target := now.UnixMilli()
	for w.now+w.res.Milliseconds() <= target {
		w.now += w.res.Milliseconds()
		w.pos = (w.pos + 1) % len(w.slots)
		slot := w.slots[w.pos]
		w.slots[w.pos] = slot[:0:0]
		for _, s := range slot {
			s.queued = false
			switch {
			case s.due < 0:
			case s.due > w.now:
				s.queued = true
				w.file(s)
			default:
				due = append(due, s)
			}
		}
	}
	return due
}
