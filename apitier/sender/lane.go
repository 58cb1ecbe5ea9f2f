package sender

import (
	"context"
	"errors"
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
	busy     atomic.Int64 // sends in flight in the pool
	limiter  *rate.Limiter
	running  atomic.Bool // the queue is open: reserve may succeed
	m        *laneMetrics
}

func newLane(s *Sender, p provider.Provider) *lane {
	lim := p.Limits()
	l := &lane{
		s: s, p: p, limits: lim,
		queue: make(chan storage.Push, s.cfg.QueueCapacity),
		pool:  make(chan struct{}, lim.PoolSize()),
		// Burst 1: a reader that fell behind (it sent itself while the
		// pool was full) never catches up with a burst above the rate.
		limiter: rate.NewLimiter(rate.Limit(lim.Rate), 1),
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

// release gives back a slot that will not be filled.
func (l *lane) release() { l.reserved.Add(-1) }

// put fills a reserved slot; it never blocks.
func (l *lane) put(p storage.Push) { l.queue <- p }

// read is the lane's one reader: it takes pushes in order, waits for the
// provider's minimum delay since the previous send started, and hands the
// send to the pool, or makes it itself when the pool is full (the seed's
// CallerRunsPolicy: the pool never grows, and while the reader sends, no
// new send starts).
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
		if err := l.limiter.Wait(ctx); err != nil {
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
