package sender

import (
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender/cron"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/storage"
)

// A push's life cycle, every transition a pure function: it takes the push
// as stored (or as this node holds it), the transition's inputs and the
// time, and returns the version to write over it and what to count. None
// does I/O, reads a clock or counts: the shell (sender.go, send.go,
// jobs.go, lane.go) writes each next version by a conditional update on
// the version it was made from (storage.PushStore.UpdatePush), so a push
// that moved on meanwhile is left as it is, and counts what the step says.
//
// The states, and what At means in each:
//
//	SCHEDULED  waits for its cron window           At: the window's start
//	PENDING    waits for a node to claim it        At: when it became PENDING
//	IN_MEMORY  one node's (Owner) under a lease    At: the lease's expiry
//	RETRY      waits after a retryable error       At: when it may be sent again
//	SENT, FAILED, GIVEN_UP: final                  At: when it finished
//
// The transitions, from the states each applies to:
//
//	accepted        (new)              SCHEDULED (cron), IN_MEMORY (a queue slot), else PENDING
//	claimed         SCHEDULED, RETRY, PENDING, IN_MEMORY (its lease expired, or this node's)
//	                                   IN_MEMORY under this node's lease; an interrupted attempt may end it
//	pending         own IN_MEMORY      PENDING (recovery found no queue slot); an interrupted attempt may end it
//	handedBack      own IN_MEMORY      PENDING (the node stops); an attempt IN_PROCESS, whose call was not made, is dropped
//	attemptStarted  own IN_MEMORY      IN_MEMORY, a new attempt IN_PROCESS, the lease renewed when half is gone
//	outcome         own IN_MEMORY, attempt IN_PROCESS   SENT, RETRY, GIVEN_UP or FAILED
//	refused         own IN_MEMORY      FAILED (the provider cannot send it: no call)
//	expired         own IN_MEMORY      FAILED (a bridged notification's TTL passed: no call)
//	windowMissed    own IN_MEMORY      SCHEDULED, or RETRY when it has attempts (its next window); FAILED when none
//	withdrawn       not final, no attempt IN_PROCESS   FAILED
//	discarded       the created version (1)            FAILED (refused on a storage error, maybe stored)
//
// "Own IN_MEMORY" is IN_MEMORY with this node as Owner, and, but for
// outcome, no attempt IN_PROCESS. The invariants (FuzzLifecycle checks
// each after every step):
//   - a step is one write: Version + 1, Updated the step's time; ID,
//     Created and what the request gave never change;
//   - a final state never changes: no transition applies to it;
//   - Owner is set exactly while IN_MEMORY; TTL (the retention, in
//     seconds) exactly on final states;
//   - a node takes another node's IN_MEMORY push only once its lease has
//     expired (At <= now); its own it takes back at any time (recovery);
//   - attempts are numbered 1, 2, ... in order, append only; only the
//     last may be IN_PROCESS, and only while IN_MEMORY. An attempt
//     IN_PROCESS ends with the call's outcome (OK or ERROR), becomes
//     INTERRUPTED (claimed after its node stopped: the provider may have
//     it), or is dropped (handed back: its call was not made);
//   - at most maxAttempts attempts: a retryable error, or an interrupted
//     attempt, at the last is GIVEN_UP;
//   - the provider's verdict decides: Sent is SENT; Retry (429, 500, 502,
//     503 and 504, or no answer) is RETRY after the retry delay (or the
//     provider's longer Retry-After, then the next time a cron expression
//     allows); Fail (any other 4xx or 5xx), DeviceGone, NoPrototypeKey
//     and Broken are FAILED;
//   - an interrupted attempt is sent again (a new attempt) when the
//     provider has a dedup key or the policy is resend, else FAILED;
//   - every attempt to a provider with a dedup key carries the push's id
//     as its key, so a resend after an interruption is the same to the
//     provider; none otherwise.
type lifecycle struct {
	node        string        // this node: the owner of the leases it takes
	lease       time.Duration // how long a claim or an attempt holds a push
	retention   time.Duration // a final push's TTL
	maxAttempts int
	retryDelay  time.Duration
	windowGrace time.Duration
	// failInterrupted: sender-interrupted=fail (providers without dedup).
	failInterrupted bool
	loc             *time.Location // cron expressions' time zone
}

func newLifecycle(cfg Config, node string, loc *time.Location) lifecycle {
	return lifecycle{node: node, lease: cfg.Lease, retention: cfg.Retention, maxAttempts: cfg.MaxAttempts,
		retryDelay: cfg.RetryDelay, windowGrace: cfg.WindowGrace, failInterrupted: cfg.Interrupted == PolicyFail, loc: loc}
}

// step is a transition's result: next, the version to write over the push
// it was made from, and what to count once it is made. ok is false when
// the transition does not apply to that push: nothing is to be written.
type step struct {
	next  storage.Push
	count tally
	ok    bool
}

// tally is what a step did that the lane's metrics count
// (laneMetrics.count).
type tally struct {
	called      bool             // a provider call was answered: its verdict counts
	verdict     provider.Verdict // with called
	auth        bool             // the provider refused our credentials
	sent        bool
	retryable   bool              // an attempt failed with an error that allows a retry
	givenUp     bool              // GIVEN_UP
	failed      storage.ErrorType // FAILED, counted under this type ("": not counted)
	interrupted bool              // an attempt found IN_PROCESS after its node stopped
	expired     bool
	withdrawn   bool
	missed      bool // its cron window closed before its call's turn
}

// none is a transition that does not apply.
var none step

// accepted is the push r makes, named id, at now: SCHEDULED for its
// window (due) when it has a cron expression, IN_MEMORY under this node's
// lease when a queue slot is held for it (queued), else PENDING.
func (lc lifecycle) accepted(r *Request, id uuid.UUID, due time.Time, queued bool, now time.Time) storage.Push {
	ms := now.UnixMilli()
	p := storage.Push{
		ID: id, Provider: r.Provider, Platform: r.Platform, PrototypeKey: r.PrototypeKey, PushKey: r.PushKey,
		Message: r.Message, CronExpression: r.CronExpression, Created: ms, Updated: ms, Version: 1,
		Bridge: r.Bridge, Client: r.Client,
	}
	switch {
	case r.CronExpression != "":
		p.State, p.At = storage.PushScheduled, due.UnixMilli()
	case queued:
		p.State, p.Owner, p.At = storage.PushInMemory, lc.node, now.Add(lc.lease).UnixMilli()
	default:
		p.State, p.At = storage.PushPending, ms
	}
	return p
}

// claimed takes p under this node's lease, for a queue slot: a job's
// claim of a due push (the store's DuePushes reads only those), or
// recovery's of this node's own. An attempt p's node left IN_PROCESS is
// interrupted: it may end the push.
func (lc lifecycle) claimed(p *storage.Push, dedup bool, now time.Time) step {
	switch {
	case p.State == storage.PushInMemory && p.Owner != lc.node && p.At > now.UnixMilli(): // another node's lease
		return none
	case p.State != storage.PushScheduled && p.State != storage.PushRetry && p.State != storage.PushPending &&
		p.State != storage.PushInMemory:
		return none
	}
	next := advance(p, storage.PushInMemory, now.Add(lc.lease).UnixMilli(), now)
	next.Owner = lc.node
	return step{next: next, count: lc.interrupted(&next, dedup, now), ok: true}
}

// pending hands p, this node's own, back to PENDING for any node: recovery
// found no queue slot for it. An attempt left IN_PROCESS is interrupted
// (the earlier run may have called): it may end the push.
func (lc lifecycle) pending(p *storage.Push, dedup bool, now time.Time) step {
	if !lc.own(p) {
		return none
	}
	next := advance(p, storage.PushPending, now.UnixMilli(), now)
	return step{next: next, count: lc.interrupted(&next, dedup, now), ok: true}
}

// handedBack gives p, this node's own, back to PENDING for any node to
// send now rather than after the lease: the node stops. An attempt
// IN_PROCESS is dropped: this node wrote it and did not make its call.
func (lc lifecycle) handedBack(p *storage.Push, now time.Time) step {
	if !lc.own(p) {
		return none
	}
	next := advance(p, storage.PushPending, now.UnixMilli(), now)
	if inProcess(p) {
		next.Attempts = next.Attempts[:len(next.Attempts)-1]
	}
	return step{next: next, ok: true}
}

// attemptStarted is p, this node's own, with a new attempt IN_PROCESS
// whose call is planned at at (not before now), written before the call.
// The lease is renewed when less than half of it is left: an unchanged
// lease leaves the push's index entry where it is.
func (lc lifecycle) attemptStarted(p *storage.Push, dedup bool, at, now time.Time) step {
	if !lc.own(p) || inProcess(p) {
		return none
	}
	a := storage.Attempt{N: len(p.Attempts) + 1, Status: storage.AttemptInProcess, Node: lc.node,
		Started: now.UnixMilli(), Called: later(at, now).UnixMilli()}
	if dedup {
		a.DedupKey = p.ID.String()
	}
	lease := p.At
	if time.UnixMilli(lease).Sub(now) < lc.lease/2 {
		lease = now.Add(lc.lease).UnixMilli()
	}
	next := advance(p, storage.PushInMemory, lease, now)
	next.Owner = lc.node
	next.Attempts = append(next.Attempts, a)
	return step{next: next, ok: true}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// outcome is p, whose attempt IN_PROCESS called the provider at called
// and got res after took, with the attempt's record and the push's next
// state (see the verdicts above).
func (lc lifecycle) outcome(p *storage.Push, res provider.Result, called time.Time, took time.Duration, now time.Time) step {
	if !lc.own(p) || !inProcess(p) {
		return none
	}
	next := advance(p, storage.PushInMemory, now.UnixMilli(), now)
	a := next.LastAttempt()
	a.Called, a.Millis = called.UnixMilli(), max(took.Milliseconds(), 0)
	a.Status = storage.AttemptError
	a.ProviderCode, a.ProviderReason, a.ProviderMessage = res.Status, res.Reason, res.Message
	if res.Err != nil {
		a.Cause = res.Err.Error()
	}
	t := tally{called: true, verdict: res.Verdict, auth: res.Auth}
	switch res.Verdict {
	case provider.Sent:
		a.Status, a.ProviderMessage = storage.AttemptOK, ""
		lc.finish(&next, storage.PushSent, now)
		t.sent = true
	case provider.Retry:
		a.ErrorType = storage.ErrorProvider
		if res.Status == 0 {
			a.ErrorType = storage.ErrorOther // no answer: timeout, reset, refused
		}
		t.retryable = true
		if a.N >= lc.maxAttempts {
			lc.finish(&next, storage.PushGivenUp, now)
			t.givenUp = true
			break
		}
		wait := max(lc.retryDelay, res.RetryAfter)
		next.State, next.At = storage.PushRetry, lc.due(p, now.Add(wait)).UnixMilli()
	case provider.Fail, provider.DeviceGone:
		a.ErrorType = storage.ErrorProvider
		t.failed = lc.fail(&next, now)
	case provider.NoPrototypeKey:
		a.ErrorType = storage.ErrorPrototypeKey
		t.failed = lc.fail(&next, now)
	default: // Broken
		a.ErrorType = storage.ErrorOther
		if a.Cause == "" {
			a.Cause = res.Message
		}
		t.failed = lc.fail(&next, now)
	}
	return step{next: next, count: t, ok: true}
}

// refused finishes p, this node's own, without a call: the provider said
// before any that it cannot send it (res: no prototype key). FAILED, with
// res in an attempt that made no call.
func (lc lifecycle) refused(p *storage.Push, res provider.Result, now time.Time) step {
	if !lc.own(p) || inProcess(p) {
		return none
	}
	next := lc.unsent(p, storage.Attempt{ErrorType: storage.ErrorPrototypeKey, ProviderMessage: res.Message}, now)
	return step{next: next, count: tally{failed: storage.ErrorPrototypeKey}, ok: true}
}

// expired finishes p, this node's own bridged notification whose TTL
// passed before it could be sent (it waited in a queue, or for retries):
// FAILED, with the cause in an attempt that made no call.
func (lc lifecycle) expired(p *storage.Push, now time.Time) step {
	if !lc.own(p) || inProcess(p) {
		return none
	}
	next := lc.unsent(p, storage.Attempt{ErrorType: storage.ErrorOther, Cause: "the notification's TTL passed before it could be sent"}, now)
	return step{next: next, count: tally{failed: storage.ErrorOther, expired: true}, ok: true}
}

// windowMissed puts p, this node's own, whose cron window closed before
// its call's turn came, back to wait for its next window at next
// (SCHEDULED, or RETRY when it has attempts), or FAILs it when its
// expression allows no later time (noNext, the error window gave).
func (lc lifecycle) windowMissed(p *storage.Push, next time.Time, noNext error, now time.Time) step {
	if !lc.own(p) || inProcess(p) {
		return none
	}
	if noNext != nil {
		n := lc.unsent(p, storage.Attempt{ErrorType: storage.ErrorOther,
			Cause: "its cron window closed before it could be sent, and the expression allows no later time"}, now)
		return step{next: n, count: tally{missed: true, failed: storage.ErrorOther}, ok: true}
	}
	state := storage.PushScheduled
	if len(p.Attempts) > 0 {
		state = storage.PushRetry
	}
	return step{next: advance(p, state, next.UnixMilli(), now), count: tally{missed: true}, ok: true}
}

// withdrawn finishes p, which has not reached its provider: FAILED, with
// cause in an attempt that made no call. It does not apply to a final
// push, nor to one whose call is in flight (its attempt IN_PROCESS: the
// provider may have it already).
func (lc lifecycle) withdrawn(p *storage.Push, cause string, now time.Time) step {
	if p.State.Final() || inProcess(p) {
		return none
	}
	next := lc.unsent(p, storage.Attempt{ErrorType: storage.ErrorOther, Cause: cause}, now)
	return step{next: next, count: tally{withdrawn: true}, ok: true}
}

// discarded is p, as created (version 1), FAILED unsent: its create was
// refused on a storage error (the client was told so) but may have been
// stored all the same, and a stored push is sent.
func (lc lifecycle) discarded(p *storage.Push, now time.Time) step {
	if p.Version != 1 || p.State.Final() {
		return none
	}
	next := lc.unsent(p, storage.Attempt{ErrorType: storage.ErrorOther,
		Cause: "refused when it was received (a storage error: the client was answered 503); not sent"}, now)
	return step{next: next, ok: true}
}

// interrupted handles n's last attempt when it is still IN_PROCESS: its
// node stopped after writing the attempt row, which says when the call was
// due (Called, kept), and before recording an answer, so the provider may
// or may not have it. The attempt becomes INTERRUPTED. A provider with a
// dedup key gets the push again under the same key; otherwise the policy
// decides: resend, or fail the push. An interrupted attempt counts: the
// last one allowed makes the push GIVEN_UP.
func (lc lifecycle) interrupted(n *storage.Push, dedup bool, now time.Time) tally {
	if !inProcess(n) {
		return tally{}
	}
	t := tally{interrupted: true}
	a := n.LastAttempt()
	a.Status = storage.AttemptInterrupted
	a.ErrorType = storage.ErrorOther
	a.Cause = "node " + a.Node + " stopped before recording this attempt's answer: the provider may have received it"
	switch {
	case !dedup && lc.failInterrupted:
		a.Cause += "; not resent (sender-interrupted=fail)"
		t.failed = lc.fail(n, now)
	case a.N >= lc.maxAttempts:
		lc.finish(n, storage.PushGivenUp, now)
		t.givenUp = true
	}
	return t
}

// own reports whether p is IN_MEMORY under this node's lease.
func (lc lifecycle) own(p *storage.Push) bool {
	return p.State == storage.PushInMemory && p.Owner == lc.node
}

// inProcess reports whether p's last attempt is IN_PROCESS: its call may
// be in flight.
func inProcess(p *storage.Push) bool {
	a := p.LastAttempt()
	return a != nil && a.Status == storage.AttemptInProcess
}

// unsent is p FAILED without a call, a (its error type and cause) in a new
// attempt saying why.
func (lc lifecycle) unsent(p *storage.Push, a storage.Attempt, now time.Time) storage.Push {
	next := advance(p, storage.PushFailed, now.UnixMilli(), now)
	a.N, a.Status, a.Node, a.Started = len(p.Attempts)+1, storage.AttemptError, lc.node, now.UnixMilli()
	next.Attempts = append(next.Attempts, a)
	lc.finish(&next, storage.PushFailed, now)
	return next
}

// advance returns p one version on, into state at (ms), stamped now,
// without an owner. Its attempts are a copy: p is left as it was.
func advance(p *storage.Push, state storage.PushState, at int64, now time.Time) storage.Push {
	n := *p
	n.Attempts = append([]storage.Attempt(nil), p.Attempts...)
	n.State, n.At, n.Version, n.Updated, n.Owner = state, at, p.Version+1, now.UnixMilli(), ""
	return n
}

// finish makes n final: kept for the retention, then gone.
func (lc lifecycle) finish(n *storage.Push, state storage.PushState, now time.Time) {
	n.State, n.At, n.Owner = state, now.UnixMilli(), ""
	n.TTL = int64(lc.retention / time.Second)
}

// fail makes n FAILED, and returns the error type it is counted under.
func (lc lifecycle) fail(n *storage.Push, now time.Time) storage.ErrorType {
	lc.finish(n, storage.PushFailed, now)
	return n.LastAttempt().ErrorType
}

// window reports whether p may be called at t: always without a cron
// expression; with one, when the expression allows a second at most
// windowGrace before t. When it may not, next is the start of its next
// window, or err says there is none.
func (lc lifecycle) window(p *storage.Push, t time.Time) (bool, time.Time, error) {
	if p.CronExpression == "" {
		return true, time.Time{}, nil
	}
	sched, err := cron.Parse(p.CronExpression)
	if err != nil {
		return true, time.Time{}, nil // accepted by an older parser: its window is unknown, so now
	}
	if first, err := sched.Next(t.Add(-lc.windowGrace), lc.loc); err == nil && !first.After(t) {
		return true, time.Time{}, nil
	}
	next, err := sched.Next(t, lc.loc)
	return false, next, err
}

// due is when p may next be sent at or after t: t itself, or for a push
// with a cron expression the first time its window allows.
func (lc lifecycle) due(p *storage.Push, t time.Time) time.Time {
	if p.CronExpression == "" {
		return t
	}
	next, err := nextAllowed(p.CronExpression, lc.loc, t)
	if err != nil {
		return t // it was valid when accepted; a window in the past sends now
	}
	return next
}
