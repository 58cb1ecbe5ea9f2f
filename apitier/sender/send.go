package sender

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/autopush-go/autopush/apitier/sender/provider"
	"github.com/autopush-go/autopush/storage"
)

// send makes one attempt at p, which this node holds IN_MEMORY:
//
//  1. the attempt row (IN_PROCESS) is written by a conditional update: if
//     another node took the push over meanwhile, the update fails and
//     nothing is sent. The lease is renewed only when less than half of
//     it is left (sender-lease > 2 × the provider's timeout, so the half
//     left covers the call); an unchanged lease leaves the push's index
//     entry where it is, two index writes fewer per push on CQL;
//  2. the provider is called, no sooner than its minimum delay after the
//     previous call (the gate);
//  3. the outcome (attempt OK or ERROR, the push's next state) is written.
//
// A storage error at 1 leaves the push IN_MEMORY under this node's lease:
// it is taken back when the lease expires (notStoredExceptionWhileAttempt).
// One at 3 is retried briefly; if it persists, the push is found
// IN_PROCESS after the lease and handled as interrupted.
func (s *Sender) send(l *lane, p storage.Push) {
	now := time.Now()
	n, ok := notification(&p, now)
	if !ok {
		l.passed() // no call
		s.expire(l, &p, now)
		return
	}
	a := storage.Attempt{N: len(p.Attempts) + 1, Status: storage.AttemptInProcess, Node: s.node, Started: now.UnixMilli()}
	if l.limits.Dedup {
		a.DedupKey = p.ID.String()
	}
	lease := p.At
	if time.UnixMilli(lease).Sub(now) < s.cfg.Lease/2 {
		lease = now.Add(s.cfg.Lease).UnixMilli()
	}
	started := advance(&p, storage.PushInMemory, lease, now)
	started.Owner = s.node
	started.Attempts = append(started.Attempts, a)
	if err := s.update(&p, started); err != nil {
		l.passed() // no call: the next send may go ahead
		if errors.Is(err, storage.ErrConflict) {
			l.m.leaseLost.Inc()
			s.log.Info("queued push taken over by another node, or withdrawn; not sent", "push", p.ID)
			return
		}
		s.m.storageError(stageAttempt)
		s.log.Error("attempt not recorded; the push waits for its lease to expire", "push", p.ID, "error", err)
		return
	}
	// The provider's minimum delay since the previous call; not cut short
	// by Stop: the attempt row says this call is being made.
	t0 := l.pace()
	res := callProvider(l.p, n, l.limits.Timeout)
	took := time.Since(t0)
	l.m.sendSeconds.Update(took.Seconds())
	next := s.outcome(l, &started, res, t0, took, time.Now())
	s.record(&started, next)
	if res.Verdict == provider.DeviceGone && p.Bridge != nil && s.gone != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
		s.gone(ctx, next)
		cancel()
	}
}

// notification is what the provider is given for p at now; false when p
// is a bridged notification whose TTL has passed.
func notification(p *storage.Push, now time.Time) (*provider.Notification, bool) {
	n := &provider.Notification{
		ID: p.ID.String(), Platform: p.Platform, PrototypeKey: p.PrototypeKey, Token: p.PushKey, Message: p.Message,
	}
	b := p.Bridge
	if b == nil {
		return n, true
	}
	left := time.UnixMilli(b.Expires(p.Created)).Sub(now)
	if left <= 0 {
		return nil, false
	}
	n.AppID, n.Data, n.CollapseKey, n.Priority = b.AppID, b.Data, b.Topic, provider.PriorityOf(b.Urgency)
	if b.TTL > 0 {
		// What is left of it, in whole seconds (at least one: 0 would
		// mean "now or never" to the provider).
		n.TTL = max(left.Truncate(time.Second), time.Second)
	}
	return n, true
}

// expire finishes a bridged push whose TTL passed before it could be sent
// (it waited in a queue, or for retries): FAILED, with the cause in an
// attempt that made no call, so GET /push/{id} says why.
func (s *Sender) expire(l *lane, p *storage.Push, now time.Time) {
	next := advance(p, storage.PushInMemory, now.UnixMilli(), now)
	next.Attempts = append(next.Attempts, storage.Attempt{
		N: len(p.Attempts) + 1, Status: storage.AttemptError, ErrorType: storage.ErrorOther,
		Node: s.node, Started: now.UnixMilli(), Cause: "the notification's TTL passed before it could be sent",
	})
	s.fail(l, &next, now)
	l.m.expired.Inc()
	s.record(p, next)
}

// OnDeviceGone sets fn, called after a bridged push's provider said its
// device is gone (FCM UNREGISTERED, APNs 410) and the outcome is stored:
// the API tier drops the registration there. ctx bounds fn. Call before
// Start.
func (s *Sender) OnDeviceGone(fn func(ctx context.Context, p storage.Push)) { s.gone = fn }

// callProvider calls Send with its timeout, turning a panic into a Broken
// verdict (the seed's "RuntimeException while sending").
func callProvider(p provider.Provider, n *provider.Notification, timeout time.Duration) (res provider.Result) {
	defer func() {
		if r := recover(); r != nil {
			res = provider.Result{Verdict: provider.Broken, Err: fmt.Errorf("provider %s panicked: %v\n%s", p.Name(), r, debug.Stack())}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.Send(ctx, n)
}

// outcome applies the seed's rules to res: the push's next state and its
// attempt's record, and counts it.
func (s *Sender) outcome(l *lane, p *storage.Push, res provider.Result, called time.Time, took time.Duration, now time.Time) storage.Push {
	next := advance(p, storage.PushInMemory, now.UnixMilli(), now)
	a := next.LastAttempt()
	a.Called, a.Millis = called.UnixMilli(), took.Milliseconds()
	a.Status = storage.AttemptError
	a.ProviderCode, a.ProviderReason, a.ProviderMessage = res.Status, res.Reason, res.Message
	if res.Err != nil {
		a.Cause = res.Err.Error()
	}
	l.m.verdict(res.Verdict)
	if res.Auth {
		l.m.authFailures.Inc()
		s.log.Error("the provider refused our credentials", "provider", l.p.Name(), "push", p.ID,
			"status", res.Status, "reason", res.Reason, "message", res.Message, "error", res.Err)
	}
	switch res.Verdict {
	case provider.Sent:
		a.Status, a.ProviderMessage = storage.AttemptOK, ""
		s.finish(&next, storage.PushSent, now)
		l.m.sent.Inc()
	case provider.Retry:
		a.ErrorType = storage.ErrorProvider
		if res.Status == 0 {
			a.ErrorType = storage.ErrorOther // no answer: timeout, reset, refused
		}
		l.m.attemptsFailed.Inc()
		if a.N >= s.cfg.MaxAttempts {
			s.finish(&next, storage.PushGivenUp, now)
			l.m.givenUp.Inc()
			break
		}
		wait := max(s.cfg.RetryDelay, res.RetryAfter)
		next.State, next.At = storage.PushRetry, s.due(p, now.Add(wait)).UnixMilli()
	case provider.Fail, provider.DeviceGone:
		a.ErrorType = storage.ErrorProvider
		s.fail(l, &next, now)
	case provider.NoPrototypeKey:
		a.ErrorType = storage.ErrorPrototypeKey
		s.fail(l, &next, now)
	default: // Broken
		a.ErrorType = storage.ErrorOther
		if a.Cause == "" {
			a.Cause = res.Message
		}
		s.fail(l, &next, now)
	}
	return next
}

func (s *Sender) fail(l *lane, n *storage.Push, now time.Time) {
	s.finish(n, storage.PushFailed, now)
	l.m.failed[n.LastAttempt().ErrorType].Inc()
}

// due is when a push may next be sent at or after t: t itself, or for a
// push with a cron expression the first time its window allows.
func (s *Sender) due(p *storage.Push, t time.Time) time.Time {
	if p.CronExpression == "" {
		return t
	}
	next, err := nextAllowed(p.CronExpression, s.loc, t)
	if err != nil {
		return t // it was valid when accepted; a window in the past sends now
	}
	return next
}

// record writes the outcome, retrying a failed write for up to a few
// seconds: a send whose outcome is lost would be resent after the lease.
func (s *Sender) record(prev *storage.Push, next storage.Push) {
	delay := 100 * time.Millisecond
	for try := 0; ; try++ {
		err := s.update(prev, next)
		if err == nil {
			return
		}
		if errors.Is(err, storage.ErrConflict) {
			s.log.Warn("push taken over while it was being sent (lease expired during the call)", "push", prev.ID)
			return
		}
		if try == 4 {
			s.m.storageError(stageAttempt)
			s.log.Error("attempt outcome not recorded; the push will be handled as interrupted after its lease",
				"push", prev.ID, "state", next.State, "error", err)
			return
		}
		time.Sleep(delay) // backing off a storage outage, not waiting for an event
		delay *= 2
	}
}
