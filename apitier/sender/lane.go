package sender

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/autopush-go/autopush/apitier/sender/provider"
	"github.com/autopush-go/autopush/storage"
)

// lane is one provider's pipeline: a bounded queue, one reader that hands
// sends on no more than the gate's look-ahead ahead of their calls, a
// bounded pool of concurrent sends, and the gate that paces the calls at
// this node's share of the account's rate (share).
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
	busy     atomic.Int64 // sends in flight in the pool
	gate     *gate
	share    *share
	running  atomic.Bool // the queue is open: reserve may succeed
	m        *laneMetrics
}

func newLane(s *Sender, p provider.Provider) *lane {
	lim := p.Limits()
	l := &lane{
		s: s, p: p, limits: lim,
		queue: make(chan storage.Push, s.cfg.QueueCapacity),
		pool:  make(chan struct{}, poolSize(lim)),
		gate:  newGate(lim.Pace()),
	}
	l.share = newShare(l, s.cfg.ShareHold)
	l.m = s.m.lane(p.Name(), func() int { return len(l.queue) }, &l.busy, cap(l.pool), l.gate)
	return l
}

// poolSize is the seed's pool (AverageLatency / Delay), plus the sends
// ahead at the whole account's pace: those wait for their planned call
// holding a slot, and a pool they fill makes the reader send itself
// (caller runs), which stops it for a whole answer time.
func poolSize(l provider.Limits) int { return l.PoolSize() + max(1, int(l.Pace()/4)) }

// reserve takes a queue slot if one is free, the queue is open (running:
// recovery is over and Stop has not begun) and this node holds a share of
// the provider's rate (a node without one leaves pushes to the others).
func (l *lane) reserve() bool { return l.running.Load() && l.gate.open() && l.reserveSlot() }

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

// passed frees the look-ahead place of a send that called, or will not
// call, the provider.
func (l *lane) passed() { l.gate.passed() }

// release gives back a slot that will not be filled.
func (l *lane) release() { l.reserved.Add(-1) }

// put fills a reserved slot; it never blocks.
func (l *lane) put(p storage.Push) { l.queue <- p }

// read is the lane's one reader: it takes pushes in order, no more than
// the gate's look-ahead ahead of their calls (so, in steady state, at
// this node's pace), and hands the send to the pool, or makes it itself
// when the pool is full (the seed's CallerRunsPolicy: the pool never
// grows, and while the reader sends, no new send starts). The calls'
// times are planned by the gate in send.
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
		if !l.gate.enter(ctx) {
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
