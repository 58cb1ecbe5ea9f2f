package sender

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/ratelimit"
	"github.com/autopush-go/autopush/storage"
)

// lane is one provider's pipeline: a bounded queue, fair between clients
// (queue), one reader that hands sends on no more than the gate's
// look-ahead ahead of their calls, a bounded pool of concurrent sends,
// and the gate that paces the calls at this node's share of the
// account's rate (share).
//
// Queue slots are reserved before a push is stored IN_MEMORY (reserve),
// then filled (put), so a push that is IN_MEMORY always has a slot and put
// never blocks; the reader frees a slot when it takes a push.
type lane struct {
	s       *Sender
	p       provider.Provider
	limits  provider.Limits
	queue   *queue
	pool    chan struct{}
	busy    atomic.Int64 // sends in flight in the pool
	gate    *ratelimit.CallGate
	share   *ratelimit.NodeShare
	running atomic.Bool // the queue is open: reserve may succeed
	m       *laneMetrics
}

func newLane(s *Sender, p provider.Provider) *lane {
	lim := p.Limits()
	l := &lane{
		s: s, p: p, limits: lim,
		queue: newQueue(s.cfg.QueueCapacity),
		pool:  make(chan struct{}, poolSize(lim)),
		gate:  ratelimit.NewCallGate(lim.Pace()),
	}
	l.share = ratelimit.NewNodeShare(ratelimit.ShareConfig{Store: s.store, Node: s.node, Account: p.Name(),
		Hold: s.cfg.ShareHold, StoreTimeout: s.cfg.StoreTimeout, Failed: func(err error) {
			s.m.storageError(stageShare)
			s.log.Warn("rate share not renewed", "provider", p.Name(), "error", err)
		}}, l.gate)
	l.m = s.m.lane(p.Name(), l.queue.len, &l.busy, cap(l.pool), l.gate)
	return l
}

// poolSize is AverageLatency / Delay (the Java sender's pool), plus the
// sends ahead at the whole account's pace: those wait for their planned
// call holding a slot, and a pool they fill makes the reader send itself
// (caller runs), which stops it for a whole answer time.
func poolSize(l provider.Limits) int { return l.PoolSize() + max(1, int(l.Pace()/4)) }

// reserve takes a queue slot for client if one is free within the
// client's share, the queue is open (running: recovery is over and Stop
// has not begun) and this node holds a share of the provider's rate (a
// node without one leaves pushes to the others; a closed queue reads as
// full).
func (l *lane) reserve(client string) slot {
	if !l.running.Load() || !l.gate.Open() {
		return queueFull
	}
	return l.queue.reserve(client, true)
}

// reserveSlot takes a queue slot for client if one is free, open or not,
// whatever the client's share (recovery).
func (l *lane) reserveSlot(client string) bool { return l.queue.reserve(client, false) == slotTaken }

// passed frees the look-ahead place of a send that called, or will not
// call, the provider.
func (l *lane) passed() { l.gate.Passed() }

// release gives back client's slot that will not be filled.
func (l *lane) release(client string) { l.queue.release(client) }

// put fills the slot reserved for p's client; it never blocks.
func (l *lane) put(p storage.Push) { l.queue.put(p) }

// read is the lane's one reader: it takes pushes in turn (one of each
// client's in a round, each client's in order), no more than the gate's
// look-ahead ahead of their calls (so, in steady state, at this node's
// pace), and hands the send to the pool, or makes it itself when the pool
// is full (caller runs, as the Java sender's CallerRunsPolicy: the pool
// never grows, and while the reader sends, no new send starts). The calls'
// times are planned by the gate in send.
//
// It waits for a place in the look-ahead before it takes a push, so the
// client whose turn it is is chosen when the push can go on, among the
// pushes queued by then. What it has not taken at Stop stays queued for
// drain to hand back.
func (l *lane) read() {
	defer l.s.jobs.Done()
	ctx := l.s.ctx
	for {
		if !l.gate.Enter(ctx) {
			return
		}
		p, ok := l.queue.nextPush(ctx)
		if !ok {
			l.gate.Passed()
			return
		}
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

// handBackBatch is how many queued pushes a stop hands back in one
// storage call (storage.PushStore.UpdatePushes).
const handBackBatch = 500

// stopCount is what a stop did with a lane's queued pushes.
type stopCount struct{ handed, changed, left int }

// handBackQueue hands the pushes queued back as PENDING (owner cleared),
// so that any node sends them now rather than after the lease, in
// batches, until the queue is empty and no job can queue more (jobsDone),
// or ctx ends. A push withdrawn or taken over meanwhile is not this
// node's to hand back (changed); one whose write failed, or that was
// still queued when ctx ended, keeps this node's lease (left).
func (l *lane) handBackQueue(ctx context.Context, jobsDone <-chan struct{}) stopCount {
	var c stopCount
	defer func() {
		l.m.stopHanded.Add(c.handed)
		l.m.stopChanged.Add(c.changed)
		l.m.stopLeft.Add(c.left)
	}()
	for {
		batch := l.queue.takeUpTo(handBackBatch)
		if len(batch) == 0 {
			select {
			case <-l.queue.ready:
				continue
			case <-jobsDone:
				if batch = l.queue.takeUpTo(handBackBatch); len(batch) == 0 {
					return c
				}
			case <-ctx.Done():
				c.left += l.queue.len()
				return c
			}
		}
		if ctx.Err() != nil {
			c.left += len(batch) + l.queue.len()
			return c
		}
		l.handBack(ctx, batch, &c)
	}
}

// handBack writes batch, pushes taken from the queue, back as PENDING in
// one storage call within ctx, adding what became of each to c.
func (l *lane) handBack(ctx context.Context, batch []storage.Push, c *stopCount) {
	now := time.Now()
	updates := make([]storage.PushUpdate, 0, len(batch))
	for i := range batch {
		if st := l.s.life.handedBack(&batch[i], now); st.ok {
			updates = append(updates, storage.PushUpdate{Prev: &batch[i], Next: st.next})
		} else {
			c.changed++ // not this node's (never so for a push it queued)
		}
	}
	var failed error
	for i, err := range l.s.store.UpdatePushes(ctx, updates) {
		switch {
		case err == nil:
			c.handed++
		case errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound):
			c.changed++
		default:
			c.left++
			failed = err
			if errors.Is(err, storage.ErrInvalid) {
				l.s.log.Error("queued push not handed back", "push", updates[i].Prev.ID, "error", err)
			}
		}
	}
	if failed != nil {
		l.s.m.storageError(stageQueue)
		l.s.log.Warn("queued pushes not handed back; their leases will expire", "provider", l.p.Name(), "error", failed)
	}
}
