package sender

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/autopush-go/autopush/apitier/sender/provider"
	"github.com/autopush-go/autopush/storage"
)

// lane is one provider's pipeline: a bounded queue, one reader that starts
// sends no closer together than the provider's minimum delay, and a
// bounded pool of concurrent sends.
//
// Queue slots are reserved before a push is stored IN_MEMORY (reserve),
// then filled (put), so a push that is IN_MEMORY always has a slot and put
// never blocks; the reader frees a slot when it takes a push.
type lane struct {
	s        *Sender
	p        provider.Provider
	limits   provider.Limits
	queue    chan storage.Push
	reserved atomic.Int64 // slots reserved or filled, <= cap(queue)
	pool     chan struct{}
	busy     atomic.Int64  // sends in flight in the pool
	ahead    chan struct{} // sends handed on that have not passed the gate yet (lookAhead)
	gate     *rate.Limiter // the provider calls' pace, one waiter at a time (gateMu)
	gateMu   sync.Mutex
	running  atomic.Bool // the queue is open: reserve may succeed
	m        *laneMetrics
}

func newLane(s *Sender, p provider.Provider) *lane {
	lim := p.Limits()
	l := &lane{
		s: s, p: p, limits: lim,
		queue: make(chan storage.Push, s.cfg.QueueCapacity),
		pool:  make(chan struct{}, lim.PoolSize()),
		ahead: make(chan struct{}, lookAhead(lim.Rate, lim.PoolSize())),
		// The gate paces the provider calls themselves, after the attempt
		// row is written: however long that write took, the provider sees
		// at most a hundredth of a second's calls above its rate (see
		// pace).
		gate: rate.NewLimiter(rate.Limit(lim.Rate), gateBurst(lim.Rate)),
	}
	l.m = s.m.lane(p.Name(), func() int { return len(l.queue) }, &l.busy, cap(l.pool))
	return l
}

// reserve takes a queue slot if one is free and the queue is open
// (running: recovery is over and Stop has not begun).
func (l *lane) reserve() bool { return l.running.Load() && l.reserveSlot() }

// reserveSlot takes a queue slot if one is free, open or not (recovery).
func (l *lane) reserveSlot() bool {
	for {
		n := l.reserved.Load()
		if n >= int64(cap(l.queue)) {
			return false
		}
		if l.reserved.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// lookAhead is how many sends may have their attempt row written (or be
// writing it) ahead of the gate: a quarter of a second of calls, at most
// an eighth of the pool. The reader hands a send on only while fewer are
// ahead, so in steady state the gate (the provider's rate) paces it, and
// sends wait at the gate already recorded: a storage write that stalls
// (an fsync held up by a busy disk: 0.2-0.7 s seen on the 2-core test
// machine) holds up the sends behind it, not the provider calls, for as
// long as those ahead last. Without it every stall cost the rate its
// length (-1.7% over a minute at 300/s in docs/benchmarks.md). The sends
// ahead hold pool slots: more would fill the seed's pool (600 at 300/s,
// about 400 of them answering) and make the reader send itself (caller
// runs), which stops it for a whole answer time (-3% in a run with a
// quarter of the pool ahead).
func lookAhead(perSecond float64, pool int) int {
	return max(1, min(int(perSecond/4), pool/8))
}

// gateBurst is how many calls the gate lets through at once after a
// pause: a hundredth of a second's (3 at 300/s), at least 1. It makes up
// a wake-up up to that late, which a busy CPU makes common at a few
// milliseconds between calls, so the rate holds; and it bounds what the
// provider sees in any second to rate + rate/100.
func gateBurst(perSecond float64) int { return max(1, int(perSecond/100)) }

// pace waits until the provider may be called again (the gate), one
// sender at a time. Were several to wait on the limiter at once, each
// would hold a reservation one interval after the other's, and after the
// process had been held up (no CPU for a moment) all those past due would
// call at once: a burst far above the provider's limit. Serialized, a
// stall longer than the gate's burst costs its time instead; the
// provider's limit comes first.
//
// It returns when the call was let through, read before the next sender
// may wait: so the calls' recorded times (Attempt.Called) keep to the
// gate's bound (one more in any window, for the read's own delay).
func (l *lane) pace() time.Time {
	l.gateMu.Lock()
	defer l.gateMu.Unlock()
	_ = l.gate.Wait(context.Background()) // never fails: n = 1 <= burst, no deadline
	l.passed()
	return time.Now()
}

// passed frees the look-ahead slot of a send that called pace or will
// not call the provider.
func (l *lane) passed() { <-l.ahead }

// release gives back a slot that will not be filled.
func (l *lane) release() { l.reserved.Add(-1) }

// put fills a reserved slot; it never blocks.
func (l *lane) put(p storage.Push) { l.queue <- p }

// read is the lane's one reader: it takes pushes in order, no more than
// lookAhead of them ahead of the gate (so, in steady state, at the
// provider's rate), and hands the send to the pool, or makes it itself
// when the pool is full (the seed's CallerRunsPolicy: the pool never
// grows, and while the reader sends, no new send starts). The minimum
// delay between two provider calls is kept by the gate in send.
func (l *lane) read() {
	defer l.s.jobs.Done()
	ctx := l.s.ctx
	for {
		var p storage.Push
		select {
		case <-ctx.Done():
			return
		case p = <-l.queue:
		}
		select {
		case l.ahead <- struct{}{}:
		case <-ctx.Done():
			// Stopping: back into the queue for drain to hand back.
			l.queue <- p
			return
		}
		l.reserved.Add(-1)
		l.s.sends.Add(1)
		select {
		case l.pool <- struct{}{}:
			l.busy.Add(1)
			go func() {
				defer func() { l.busy.Add(-1); <-l.pool; l.s.sends.Done() }()
				l.s.send(l, p)
			}()
		default:
			l.m.callerRuns.Inc()
			l.s.send(l, p)
			l.s.sends.Done()
		}
	}
}

// drain hands the pushes still queued back as PENDING (owner cleared), so
// that any node sends them now rather than after the lease. It returns
// how many it handed back.
func (l *lane) drain(ctx context.Context) int {
	n := 0
	for {
		select {
		case p := <-l.queue:
			l.reserved.Add(-1)
			now := time.Now()
			next := advance(&p, storage.PushPending, now.UnixMilli(), now)
			if err := l.s.update(&p, next); err != nil && !errors.Is(err, storage.ErrConflict) {
				l.s.log.Warn("queued push not handed back; its lease will expire", "push", p.ID, "error", err)
				continue
			}
			n++
		default:
			return n
		}
		if ctx.Err() != nil {
			return n
		}
	}
}
