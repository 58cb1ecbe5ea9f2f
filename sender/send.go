package sender

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/ratelimit"
	"github.com/autopush-go/autopush/storage"
)

// send makes one attempt at p, which this node holds IN_MEMORY:
//
//  1. a notification that cannot be sent (a bridged one whose TTL passed,
//     a prototype without a push key) is finished without a call;
//  2. the call's time is planned at the gate (this node's share of the
//     account's pace), and a push whose cron window has closed by then
//     waits for its next one instead (window);
//  3. the attempt row (IN_PROCESS, with the planned call time) is written
//     by a conditional update: if another node took the push over
//     meanwhile, the update fails and nothing is sent. The lease is
//     renewed only when less than half of it is left (sender-lease > 2 ×
//     the provider's timeout, so the half left covers the call); an
//     unchanged lease leaves the push's index entry where it is, two
//     index writes fewer per push on CQL;
//  4. the provider is called at the planned time; a call that could not
//     be made within ratelimit.CallSlack of it waits for the next time the gate
//     gives; a call the lease no longer covers is not made;
//  5. the outcome (attempt OK or ERROR, the push's next state) is written.
//
// A storage error at 3 leaves the push IN_MEMORY under this node's lease:
// it is taken back when the lease expires (notStoredExceptionWhileAttempt).
// One at 5 is retried while the lease holds (record); if it persists,
// the push is found IN_PROCESS after the lease and handled as interrupted.
func (s *Sender) send(l *lane, p storage.Push) {
	n, started, at, ok := s.prepare(l, &p)
	if !ok {
		return
	}
	// Called at its planned time, or, woken too late for it, at the next
	// the gate gives: late calls never bunch. The row keeps the first
	// planned time, a lower bound of the call's.
	for {
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait) // the planned call time: the provider's pace
		}
		if time.Since(at) <= ratelimit.CallSlack {
			break
		}
		l.m.replanned.Inc()
		var err error
		if at, _, err = l.gate.Plan(s.ctx); err != nil { // stopping: the call is not made
			l.passed()
			s.handBack(&started)
			return
		}
	}
	l.passed()
	// The call must end within the lease: once it expires another node
	// may take the push over and send it too. begin leaves more than the
	// provider's timeout, but a send held up since (a write answered
	// late, a stalled process: seen on a loaded cluster) may have used
	// it: it makes no call and hands the push back.
	if time.Until(time.UnixMilli(started.At)) < l.limits.Timeout {
		l.m.leaseLost.Inc()
		s.log.Warn("send held up until too little of its lease was left for the call; not sent, handed back", "push", p.ID)
		s.handBack(&started)
		return
	}
	res := callProvider(l.p, n, l.limits.Timeout)
	if p.Bridge != nil {
		// Its pushKey is a device token, which no attempt log or log line
		// may hold (docs/sender.md, "Clients"); the bridges' providers
		// hide it already, this covers any provider (and a panic's text).
		res = res.WithoutToken(n.Token)
	}
	took := time.Since(at)
	l.m.sendSeconds.Update(took.Seconds())
	st := s.life.outcome(&started, res, at, took, time.Now())
	if res.Auth {
		s.log.Error("the provider refused our credentials", "provider", l.p.Name(), "push", p.ID,
			"status", res.Status, "reason", res.Reason, "message", res.Message, "error", res.Err)
	}
	s.settle(l, &started, st)
	if st.ok && res.Verdict == provider.DeviceGone && p.Bridge != nil && s.gone != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
		s.gone(ctx, st.next)
		cancel()
	}
}

// prepare is send's steps 1 to 3: the notification for p, its call's
// planned time, and its attempt row written (started). It reports false
// when no call is to be made; then its look-ahead place is passed on and
// what p became is written.
func (s *Sender) prepare(l *lane, p *storage.Push) (n *provider.Notification, started storage.Push, at time.Time, ok bool) {
	now := time.Now()
	if n, ok = notification(p, now); !ok {
		l.passed() // no call
		s.settle(l, p, s.life.expired(p, now))
		return nil, started, at, false
	}
	if c, is := l.p.(provider.Checker); is {
		if res, can := c.Check(n); !can {
			l.passed()
			s.settle(l, p, s.life.refused(p, res, now))
			return nil, started, at, false
		}
	}
	at, resv, err := l.gate.Plan(s.ctx)
	if err != nil { // stopping: any node sends it
		l.passed()
		s.handBack(p)
		return nil, started, at, false
	}
	if open, next, err := s.life.window(p, at); !open {
		resv.Cancel()
		l.passed()
		s.missedWindow(l, p, next, err)
		return nil, started, at, false
	}
	if started, at, ok = s.begin(l, p, at); !ok {
		resv.Cancel()
		l.passed()
		return nil, started, at, false
	}
	return n, started, at, true
}

// settle counts st and records its next version (record), when it applies.
func (s *Sender) settle(l *lane, prev *storage.Push, st step) {
	if !st.ok {
		return
	}
	l.m.count(st.count)
	s.record(prev, st.next)
}

// begin writes p's attempt row, IN_PROCESS with the call planned at at
// (or, planned for before the row, as soon as it is written: the time it
// returns), under this node's lease (renewed when less than half is
// left). It reports false when the push is not to be sent: another node
// took it over, it was withdrawn, or storage failed (then it waits for its
// lease).
func (s *Sender) begin(l *lane, p *storage.Push, at time.Time) (storage.Push, time.Time, bool) {
	now := time.Now()
	at = later(at, now)
	st := s.life.attemptStarted(p, l.limits.Dedup, at, now)
	if !st.ok {
		s.log.Error("queued push not this node's to send; not sent", "push", p.ID, "state", p.State)
		return storage.Push{}, at, false
	}
	return st.next, at, s.attemptWritten(l, p, st.next)
}

// attemptWritten writes next over prev before a call, reporting whether
// the call may go ahead.
func (s *Sender) attemptWritten(l *lane, prev *storage.Push, next storage.Push) bool {
	err := s.update(prev, next)
	switch {
	case err == nil:
		return true
	case errors.Is(err, storage.ErrConflict):
		l.m.leaseLost.Inc()
		s.log.Info("queued push taken over by another node, or withdrawn; not sent", "push", prev.ID)
	default:
		s.m.storageError(stageAttempt)
		s.log.Error("attempt not recorded; the push waits for its lease to expire", "push", prev.ID, "error", err)
	}
	return false
}

// handBack gives p, which this node holds and has not called the
// provider for, back to SendPending, so that any node sends it now
// rather than after the lease: the node is stopping, or too little of
// the lease is left for the call. An attempt row written for the call
// that was not made is dropped.
func (s *Sender) handBack(p *storage.Push) {
	st := s.life.handedBack(p, time.Now())
	if !st.ok {
		return
	}
	if err := s.update(p, st.next); err != nil && !errors.Is(err, storage.ErrConflict) {
		s.log.Warn("push not handed back; its lease will expire", "push", p.ID, "error", err)
	}
}

// missedWindow puts p, whose cron window closed before its call's turn
// came, back to wait for its next window (SCHEDULED, or RETRY when it
// has attempts), or FAILs it when its expression allows no later time.
func (s *Sender) missedWindow(l *lane, p *storage.Push, next time.Time, noNext error) {
	st := s.life.windowMissed(p, next, noNext, time.Now())
	if st.ok && noNext == nil {
		s.log.Info("cron window closed before the push's turn; it waits for the next", "push", p.ID, "next", next)
	}
	s.settle(l, p, st)
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

// OnFinal sets fn, called after a push's final state (SENT, FAILED,
// GIVEN_UP) is stored by this node: the bridges settle a tracked WebPush
// message's fate there. ctx bounds fn. Call before Start.
func (s *Sender) OnFinal(fn func(ctx context.Context, p storage.Push)) { s.final = fn }

// finished calls the OnFinal handler for next, stored final.
func (s *Sender) finished(next *storage.Push) {
	if s.final == nil || !next.State.Final() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
	defer cancel()
	s.final(ctx, *next)
}

// OnDeviceGone sets fn, called after a bridged push's provider said its
// device is gone (FCM UNREGISTERED, APNs 410) and the outcome is stored:
// the API tier drops the registration there. ctx bounds fn. Call before
// Start.
func (s *Sender) OnDeviceGone(fn func(ctx context.Context, p storage.Push)) { s.gone = fn }

// callProvider calls Send with its timeout, turning a panic into a Broken
// verdict (error type OTHER: a runtime error on our side while sending).
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

// record writes the outcome. A write the store could not make (storage
// unavailable) is retried, backing off up to a second, for as long as
// this node's lease on the push holds (prev.At), and at least
// recordTries times: until then no node takes the push over, so a late
// outcome still counts, whereas one given up leaves the attempt
// IN_PROCESS, handled as interrupted after the lease, and a push the
// provider has is sent again. A replica lost mid-write held outcomes up
// for longer than the few retries made before (TestClusterSenderFaults).
//
// A retry is safe even after a write whose outcome is unknown: it is
// conditional on prev's version, so one that follows a write that did
// apply finds the version moved on (ErrConflict) and changes nothing.
func (s *Sender) record(prev *storage.Push, next storage.Push) {
	lease := time.UnixMilli(prev.At)
	delay := 100 * time.Millisecond
	for try := 1; ; try++ {
		err := s.update(prev, next)
		if err == nil {
			return
		}
		if errors.Is(err, storage.ErrConflict) {
			if try > 1 {
				s.log.Warn("push changed after a failed write of its outcome: that write applied, or the push was taken over", "push", prev.ID)
				return
			}
			s.log.Warn("push taken over while it was being sent (lease expired during the call)", "push", prev.ID)
			return
		}
		if try >= recordTries && (!errors.Is(err, storage.ErrUnavailable) || !time.Now().Add(delay).Before(lease)) {
			s.m.storageError(stageAttempt)
			s.log.Error("attempt outcome not recorded; the push will be handled as interrupted after its lease",
				"push", prev.ID, "state", next.State, "tries", try, "error", err)
			return
		}
		time.Sleep(delay) // backing off a storage outage, not waiting for an event
		delay = min(2*delay, time.Second)
	}
}

// recordTries is how many times record tries an outcome at least.
const recordTries = 5
