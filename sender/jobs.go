package sender

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender/ratelimit"
	"github.com/autopush-go/autopush/storage"
)

// loop runs fn after start, then again every interval after each run ends
// (a fixed delay, as the Java sender's jobs ran), until Stop. A run that
// reports a backlog (it moved a whole portion: more are due) is followed
// as soon as the queues run low (fed), so that a backlog is sent at the
// provider's pace rather than a portion per interval.
func (s *Sender) loop(name string, start, interval time.Duration, fn func(context.Context) bool) {
	t := time.NewTimer(start)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if fn(s.ctx) {
			s.fed(s.ctx, interval)
			t.Reset(0)
			continue
		}
		t.Reset(interval)
	}
}

// fedPoll is how often fed looks at the queues while a backlog lasts.
const fedPoll = 50 * time.Millisecond

// fed waits, for at most max, until a lane that may send holds less than
// half of a job's portion queued: the calls it has left cover the next
// run's reads and claims, and the queue (what a stop hands back) stays
// short.
func (s *Sender) fed(ctx context.Context, max time.Duration) {
	t := time.NewTicker(fedPoll)
	defer t.Stop()
	deadline := time.Now().Add(max)
	low := (s.portion(min(s.cfg.PendingPortion, s.cfg.ScheduledPortion)) + 1) / 2
	for time.Now().Before(deadline) {
		for _, l := range s.lanes {
			if l.gate.Open() && l.queue.len() < low {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sendScheduled does what the Java sender's SendScheduledJob did: it
// queues up to a portion of due pushes: SCHEDULED ones whose window came,
// RETRY ones whose delay passed, and IN_MEMORY ones whose node's lease
// expired (the node died or stalled: taken over). It stops as soon as a
// queue is full, and skips the pushes of a client that holds its share of
// the queue. It reports whether it moved a whole portion.
func (s *Sender) sendScheduled(ctx context.Context) bool {
	left := s.portion(s.cfg.ScheduledPortion)
	if left <= 0 {
		return false
	}
	states := []storage.PushState{storage.PushScheduled, storage.PushRetry}
	// Expired leases are rare (a node died) and their index is where
	// every finished push's IN_MEMORY entry was deleted, so it is read
	// once per tenth of a lease, not on every run; but on every run
	// while the last read found some (a dead node's queue is taken over
	// at the pace, not a portion per tenth of a lease).
	if now := time.Now(); s.takingOver || now.Sub(s.lastTakeover) >= s.cfg.Lease/10 {
		s.lastTakeover = now
		states = append(states, storage.PushInMemory)
	}
	for _, state := range states {
		n, full := s.claimDue(ctx, jobScheduled, state, left)
		if state == storage.PushInMemory {
			s.takingOver = n > 0
		}
		left -= n
		if full || left <= 0 {
			return left <= 0 && !full
		}
	}
	return false
}

// sendPending does what the Java sender's SendPendingJob did: it queues up
// to a portion of PENDING pushes, stopping as soon as a queue is full,
// skipping a client's that holds its share. It reports whether it moved a
// whole portion.
func (s *Sender) sendPending(ctx context.Context) bool {
	portion := s.portion(s.cfg.PendingPortion)
	n, full := s.claimDue(ctx, jobPending, storage.PushPending, portion)
	return portion > 0 && n >= portion && !full
}

// portion is this node's part of a job's portion: the portion times its
// largest share of a provider's pace, so that the nodes together move a
// portion per interval (portion × delay < interval holds for all of them
// as for one node); none while it holds no share (it would queue pushes it
// cannot send).
func (s *Sender) portion(n int) int {
	most := 0
	for _, l := range s.lanes {
		most = max(most, l.gate.Parts())
	}
	return (n*most + ratelimit.ShareParts - 1) / ratelimit.ShareParts
}

// claimDue reads up to limit due pushes of state, oldest first, and
// queues each it can claim. A push whose client holds its share of the
// queue is skipped, not waited for: the other clients' pushes read in
// the same run are still queued (docs/sender.md, "Fairness"). It returns
// how many it read and whether a queue was full.
func (s *Sender) claimDue(ctx context.Context, job string, state storage.PushState, limit int) (int, bool) {
	if limit <= 0 {
		return 0, false
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	ps, err := s.store.DuePushes(rctx, state, time.Now().UnixMilli(), limit)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.m.storageError(stageQueue)
			s.log.Error("due pushes not read", "job", job, "state", state, "error", err)
		}
		return 0, false
	}
	// A slot is reserved for each push, in order, before the claims,
	// and the run stops at the first push that finds its queue full; the
	// claims are then made together (claimAll).
	var tries []claimTry
	full := false
	for i := range ps {
		l := s.lanes[ps[i].Provider]
		if l == nil {
			continue
		}
		if got := l.reserve(ps[i].Client); got != slotTaken {
			if got == shareFull {
				continue
			}
			full = true
			break
		}
		tries = s.try(tries, l, &ps[i], true)
	}
	s.claimAll(ctx, job, tries)
	return len(ps), full
}

// claimTry is one push a job claims: next is it claimed (IN_MEMORY under
// this node's lease, queued when queue), or handed to PENDING (recovery
// without a queue slot), or made final (interrupted: no attempt left, or
// sender-interrupted fail).
type claimTry struct {
	l     *lane
	prev  *storage.Push
	next  storage.Push
	slot  bool // a queue slot is reserved for it
	queue bool
}

// try adds to tries the claim of p into the slot reserved for it (slot),
// or without one its hand-back to the SendPending job (recovery), counted
// now. A claim the life cycle does not allow releases the slot.
func (s *Sender) try(tries []claimTry, l *lane, p *storage.Push, slot bool) []claimTry {
	var st step
	if slot {
		st = s.life.claimed(p, l.limits.Dedup, time.Now())
	} else {
		st = s.life.pending(p, l.limits.Dedup, time.Now())
	}
	if !st.ok {
		if slot {
			l.release(p.Client)
		}
		return tries
	}
	l.m.count(st.count)
	return append(tries, claimTry{l: l, prev: p, next: st.next, slot: slot, queue: slot && st.next.State == storage.PushInMemory})
}

// claimBatch bounds the claims of one storage call: on CQL each is an LWT,
// 64 of which run at once, and a batch must end within
// sender-store-timeout on a loaded store.
const claimBatch = 128

// claimAll makes tries' conditional writes, claimBatch at a time
// (storage.PushStore.UpdatePushes: a few round trips, not one per push),
// and queues the pushes it claimed for the queue; the slot of any other is
// released. A claim another node won is counted as lost. It stops when
// ctx ends (the node stops): the pushes left keep their state.
func (s *Sender) claimAll(ctx context.Context, job string, tries []claimTry) {
	for len(tries) > 0 {
		if ctx.Err() != nil {
			for _, t := range tries {
				if t.slot {
					t.l.release(t.prev.Client)
				}
			}
			return
		}
		batch := tries[:min(len(tries), claimBatch)]
		tries = tries[len(batch):]
		updates := make([]storage.PushUpdate, len(batch))
		for i := range batch {
			updates[i] = storage.PushUpdate{Prev: batch[i].prev, Next: batch[i].next}
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
		errs := s.store.UpdatePushes(ctx, updates)
		cancel()
		for i, t := range batch {
			err := errs[i]
			switch {
			case err == nil:
				s.finished(&t.next)
				if t.slot {
					s.m.claim(job, true)
				}
			case errors.Is(err, storage.ErrConflict):
				if t.slot {
					s.m.claim(job, false)
				}
			default:
				s.m.storageError(stageQueue)
				s.log.Error("push not claimed", "job", job, "push", t.prev.ID, "error", err)
			}
			switch {
			case err == nil && t.queue:
				t.l.put(t.next)
			case t.slot:
				t.l.release(t.prev.Client)
			}
		}
	}
}

// recover takes back, at start, the pushes this node had IN_MEMORY when it
// stopped (queued or being sent), without waiting for their leases: it is
// the only node that names itself so. Those that do not fit the queue go
// back to PENDING.
//
// It lists them all before it claims any: a claim moves a push in the
// index (its At becomes the new lease's expiry), so a listing that claimed
// as it went would meet the pushes it claimed again further on, and queue
// them twice. Until it ends nothing of this run is IN_MEMORY under this
// node's name, so every push listed, and every IN_PROCESS attempt in it,
// is the earlier run's.
func (s *Sender) recover(ctx context.Context) {
	var own []storage.Push
	seen := map[uuid.UUID]bool{}
	cursor := ""
	for ctx.Err() == nil {
		ps, next, err := s.listInMemory(ctx, cursor)
		if err != nil {
			s.m.storageError(stageQueue)
			s.log.Error("own pushes not recovered; they are taken back when their leases expire", "error", err)
			return
		}
		for _, p := range ps {
			if p.Owner == s.node && !seen[p.ID] {
				seen[p.ID] = true
				own = append(own, p)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	// Recovery runs before the queues open: slots are taken whatever the
	// clients' shares; those that find no slot go back to PENDING.
	var tries []claimTry
	for i := range own {
		if l := s.lanes[own[i].Provider]; l != nil { // else a provider this node does not have
			tries = s.try(tries, l, &own[i], l.reserveSlot(own[i].Client))
		}
	}
	s.claimAll(ctx, jobRecover, tries)
	if len(own) > 0 {
		s.log.Info("recovered this node's pushes", "node", s.node, "pushes", len(own))
	}
}

// listInMemory reads a page of IN_MEMORY pushes for recover, trying
// recoverTries times, a second and then two apart: a read that fails
// just after a replica was lost (its coordinator still waiting on the
// dead node) left a restarted node's pushes to wait for their leases
// (TestClusterSenderFaults).
func (s *Sender) listInMemory(ctx context.Context, cursor string) ([]storage.Push, string, error) {
	wait := time.Second
	for try := 1; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
		ps, next, err := s.store.ListPushes(rctx, storage.PushInMemory, cursor, storage.MaxPushPage)
		cancel()
		if err == nil || try == recoverTries {
			return ps, next, err
		}
		select {
		case <-time.After(wait): // backing off a storage failure
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
		wait *= 2
	}
}

// recoverTries is how many times recover tries each page.
const recoverTries = 3
