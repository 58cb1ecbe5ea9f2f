package ratelimit

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Timing of the gate (docs/sender.md, "Gate").
const (
	// PlanHorizon is the furthest ahead a call is planned: a plan further
	// out waits. It bounds how long a lowered share's old pace lasts
	// (shareSettle).
	PlanHorizon = 500 * time.Millisecond
	// CallSlack is how late a call may be made after its planned time;
	// later (its attempt row took longer to write than the plan's lead,
	// or the process got no CPU for a moment), it waits for a new time
	// from the gate, so late calls never bunch. A node's calls in any
	// second are at most its pace × (1 + CallSlack/1s) + 1.
	CallSlack = 20 * time.Millisecond
)

// CallGate limits one provider's calls from this node: it paces them at
// this node's share of the account's pace (NodeShare), and bounds the
// sends planned ahead of their calls.
//
// Each call's time is planned (Plan) before its attempt row is written,
// and the row records it (Attempt.Called): an attempt found IN_PROCESS
// after a crash says when its call was due (a call woken too late for its
// time takes a later one, so the row's time is a lower bound). The
// limiter's burst is one call, and it keeps its schedule whatever the goroutines' wake-ups: a
// plan is a reservation at a time, not a wait.
//
// Safe for concurrent use.
type CallGate struct {
	pace float64 // the account's calls per second, all nodes together

	mu      sync.Mutex
	lim     *rate.Limiter
	parts   int           // this node's parts of the account's pace (of ShareParts)
	until   time.Time     // calls are planned only before this: the share's validity
	changed chan struct{} // closed and replaced when parts or until change
	closed  bool          // by Close: no call is planned again

	// The sends ahead: handed on by the reader and not yet called (or
	// dropped), at most aheadMax: a quarter of a second of this node's
	// calls. Their attempt rows are written while they wait for their
	// planned time, so a storage write that stalls holds up the sends
	// behind it, not the calls, for as long as those ahead last.
	ahead, aheadMax int
	freed           chan struct{} // closed and replaced when a send ahead is called or dropped
}

// NewCallGate makes the gate of an account whose calls, all nodes
// together, are paced at pace a second. It holds no share until its
// NodeShare gives it one: until then it plans no call.
func NewCallGate(pace float64) *CallGate {
	return &CallGate{pace: pace, lim: rate.NewLimiter(0, 1), changed: make(chan struct{}), freed: make(chan struct{}), aheadMax: 1}
}

// set gives the gate this node's share: parts of ShareParts, usable to
// plan calls before until.
func (g *CallGate) set(parts int, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	local := g.pace * float64(parts) / ShareParts
	if parts != g.parts {
		g.lim.SetLimit(rate.Limit(local))
	}
	g.parts, g.until = parts, until
	g.aheadMax = max(1, int(local/4))
	close(g.changed)
	g.changed = make(chan struct{})
	close(g.freed) // a larger look-ahead may let the reader on
	g.freed = make(chan struct{})
}

// Close ends the planning of calls for good (the node stops): from now
// on the gate holds no share, and a renewal that was under way cannot
// give it one back. Calls planned before are made at their time, within
// PlanHorizon.
func (g *CallGate) Close() {
	g.set(0, time.Time{})
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// share returns the parts this node holds and until when.
func (g *CallGate) share() (int, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.parts, g.until
}

// Open reports whether the gate may plan calls now.
func (g *CallGate) Open() bool {
	parts, until := g.share()
	return parts > 0 && time.Now().Before(until)
}

// Parts is how many parts of the account's pace (of ShareParts) this node
// may use now: none when it holds no share or its share lapsed.
func (g *CallGate) Parts() int {
	parts, until := g.share()
	if time.Now().Before(until) {
		return parts
	}
	return 0
}

// Pace is the calls a second this node may make now: its parts of the
// account's pace.
func (g *CallGate) Pace() float64 { return g.pace * float64(g.Parts()) / ShareParts }

// Enter takes a place among the sends ahead, waiting while they are all
// taken; false when ctx ended first.
func (g *CallGate) Enter(ctx context.Context) bool {
	for {
		g.mu.Lock()
		if g.ahead < g.aheadMax {
			g.ahead++
			g.mu.Unlock()
			return true
		}
		ch := g.freed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// Passed gives back the place of a send that called, or will not call,
// the provider.
func (g *CallGate) Passed() {
	g.mu.Lock()
	g.ahead--
	close(g.freed)
	g.freed = make(chan struct{})
	g.mu.Unlock()
}

// Plan reserves the next call's time: the earliest the pace allows,
// within PlanHorizon, while the share is valid. It waits for a share when
// the node holds none (or it lapsed), and returns ctx's error when ctx
// ends first. The reservation is cancelled when the call is not made.
func (g *CallGate) Plan(ctx context.Context) (time.Time, *rate.Reservation, error) {
	for {
		g.mu.Lock()
		now := time.Now()
		wait := time.Duration(-1) // until the share changes
		if g.parts > 0 && now.Before(g.until) {
			r := g.lim.ReserveN(now, 1)
			at := now.Add(r.DelayFrom(now))
			if r.OK() && at.Before(g.until) && at.Sub(now) <= PlanHorizon {
				g.mu.Unlock()
				return at, r, nil
			}
			r.CancelAt(now)
			if r.OK() && at.Before(g.until) {
				wait = at.Sub(now) - PlanHorizon
			}
		}
		ch := g.changed
		g.mu.Unlock()
		if err := waitFor(ctx, ch, wait); err != nil {
			return time.Time{}, nil, err
		}
	}
}

// waitFor waits for ch to close, or d to pass (d < 0: no limit), or ctx
// to end (its error).
func waitFor(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ch:
	case <-timer:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
