package sender

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender/cron"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/storage"
)

var (
	lifeNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	lifeID  = uuid.MustParse("01890000-0000-7000-8000-000000000002")
)

func testLifecycle() lifecycle {
	return lifecycle{node: "me", lease: time.Minute, retention: time.Hour, maxAttempts: 3, retryDelay: 2 * time.Second,
		windowGrace: 10 * time.Second, loc: time.UTC}
}

// held is a push this node holds queued, with attempts already made.
func held(attempts ...storage.Attempt) storage.Push {
	return storage.Push{ID: lifeID, Provider: "p", State: storage.PushInMemory, Owner: "me", Version: 4,
		At: lifeNow.Add(50 * time.Second).UnixMilli(), Attempts: attempts}
}

// started is held with a new attempt IN_PROCESS, as attemptStarted writes it.
func started(t *testing.T, lc lifecycle, dedup bool, attempts ...storage.Attempt) storage.Push {
	t.Helper()
	p := held(attempts...)
	st := lc.attemptStarted(&p, dedup, lifeNow, lifeNow)
	if !st.ok {
		t.Fatal("attempt not started on a push this node holds")
	}
	return st.next
}

// TestNoStepFromAFinalState: every transition leaves a final push alone.
func TestNoStepFromAFinalState(t *testing.T) {
	lc := testLifecycle()
	for _, state := range []storage.PushState{storage.PushSent, storage.PushFailed, storage.PushGivenUp} {
		p := storage.Push{ID: lifeID, State: state, Version: 1, At: 0, Attempts: []storage.Attempt{{N: 1, Status: storage.AttemptInProcess}}}
		for name, st := range map[string]step{
			"claimed": lc.claimed(&p, false, lifeNow), "pending": lc.pending(&p, false, lifeNow),
			"handedBack": lc.handedBack(&p, lifeNow), "attemptStarted": lc.attemptStarted(&p, false, lifeNow, lifeNow),
			"outcome": lc.outcome(&p, provider.Result{}, lifeNow, 0, lifeNow),
			"refused": lc.refused(&p, provider.Result{}, lifeNow), "expired": lc.expired(&p, lifeNow),
			"withdrawn": lc.withdrawn(&p, "x", lifeNow), "discarded": lc.discarded(&p, lifeNow),
			"windowMissed": lc.windowMissed(&p, lifeNow, nil, lifeNow),
		} {
			if st.ok {
				t.Errorf("%s applies to a %s push: %+v", name, state, st.next)
			}
		}
	}
}

// TestClaimRespectsLeases: a node takes another's IN_MEMORY push only once
// its lease has expired; its own at any time (recovery).
func TestClaimRespectsLeases(t *testing.T) {
	lc := testLifecycle()
	theirs := storage.Push{ID: lifeID, State: storage.PushInMemory, Owner: "other", Version: 2, At: lifeNow.UnixMilli() + 1}
	if st := lc.claimed(&theirs, false, lifeNow); st.ok {
		t.Fatal("claimed under another node's lease")
	}
	theirs.At = lifeNow.UnixMilli()
	st := lc.claimed(&theirs, false, lifeNow)
	if !st.ok || st.next.Owner != "me" || st.next.At != lifeNow.Add(time.Minute).UnixMilli() || st.next.Version != 3 {
		t.Fatalf("takeover of an expired lease: %+v", st)
	}
	mine := held()
	if st := lc.claimed(&mine, false, lifeNow); !st.ok || st.next.At != lifeNow.Add(time.Minute).UnixMilli() {
		t.Fatalf("own push not taken back: %+v", st)
	}
	if st := lc.pending(&theirs, false, lifeNow); st.ok {
		t.Fatal("another node's push handed to PENDING by recovery")
	}
}

// TestInterrupted: an attempt found IN_PROCESS is INTERRUPTED, naming its
// node; resent under the resend policy or a dedup key, FAILED under the
// fail policy without one, GIVEN_UP when it was the last allowed.
func TestInterrupted(t *testing.T) {
	for _, c := range []struct {
		name      string
		fail      bool
		dedup     bool
		attempts  int // before the one interrupted
		want      storage.PushState
		wantCount tally
	}{
		{"resend", false, false, 0, storage.PushInMemory, tally{interrupted: true}},
		{"fail policy", true, false, 0, storage.PushFailed, tally{interrupted: true, failed: storage.ErrorOther}},
		{"fail policy, dedup key", true, true, 0, storage.PushInMemory, tally{interrupted: true}},
		{"the last attempt", false, true, 2, storage.PushGivenUp, tally{interrupted: true, givenUp: true}},
	} {
		lc := testLifecycle()
		lc.failInterrupted = c.fail
		var before []storage.Attempt
		for i := range c.attempts {
			before = append(before, storage.Attempt{N: i + 1, Status: storage.AttemptError})
		}
		p := started(t, lc, c.dedup, before...)
		p.Owner, p.At = "crashed", lifeNow.UnixMilli() // its node's lease expired
		p.Attempts[len(p.Attempts)-1].Node = "crashed"
		st := lc.claimed(&p, c.dedup, lifeNow.Add(time.Second))
		a := st.next.LastAttempt()
		switch {
		case !st.ok || st.next.State != c.want || st.count != c.wantCount:
			t.Errorf("%s: %s, counted %+v; want %s, %+v", c.name, st.next.State, st.count, c.want, c.wantCount)
		case a.Status != storage.AttemptInterrupted || !strings.HasPrefix(a.Cause, "node crashed stopped") ||
			strings.Contains(a.Cause, "not resent") != (c.want == storage.PushFailed):
			t.Errorf("%s: attempt %+v", c.name, *a)
		case c.dedup && a.DedupKey != lifeID.String():
			t.Errorf("%s: dedup key %q", c.name, a.DedupKey)
		}
		if c.want == storage.PushInMemory {
			if re := lc.attemptStarted(&st.next, c.dedup, lifeNow, lifeNow.Add(time.Second)); !re.ok ||
				re.next.LastAttempt().N != c.attempts+2 || (c.dedup && re.next.LastAttempt().DedupKey != lifeID.String()) {
				t.Errorf("%s: resent as %+v", c.name, re.next.LastAttempt())
			}
		}
	}
}

// TestAttemptStarted: numbered after the last, called no sooner than
// written, the dedup key only for a provider with them, the lease renewed
// only when less than half of it is left.
func TestAttemptStarted(t *testing.T) {
	lc := testLifecycle()
	p := held(storage.Attempt{N: 1, Status: storage.AttemptError})
	st := lc.attemptStarted(&p, false, lifeNow.Add(-time.Second), lifeNow)
	a := st.next.LastAttempt()
	if a.N != 2 || a.Status != storage.AttemptInProcess || a.Called != lifeNow.UnixMilli() || a.DedupKey != "" || a.Node != "me" {
		t.Fatalf("attempt %+v", *a)
	}
	if st.next.At != p.At {
		t.Fatalf("lease with 50 s of 60 left renewed: %d -> %d", p.At, st.next.At)
	}
	p.At = lifeNow.Add(29 * time.Second).UnixMilli()
	if st := lc.attemptStarted(&p, true, lifeNow.Add(time.Second), lifeNow); st.next.At != lifeNow.Add(time.Minute).UnixMilli() ||
		st.next.LastAttempt().DedupKey != lifeID.String() || st.next.LastAttempt().Called != lifeNow.Add(time.Second).UnixMilli() {
		t.Fatalf("lease with 29 s of 60 left: %d, attempt %+v", st.next.At, *st.next.LastAttempt())
	}
	if st := lc.attemptStarted(&st.next, false, lifeNow, lifeNow); st.ok {
		t.Fatal("a second attempt started while one is in process")
	}
}

// TestOutcome: the verdicts' states, attempt records and counts.
func TestOutcome(t *testing.T) {
	lc := testLifecycle()
	took := 1500 * time.Millisecond
	now := lifeNow.Add(2 * time.Second)
	for _, c := range []struct {
		res      provider.Result
		before   int // attempts before
		state    storage.PushState
		at       time.Time
		errType  storage.ErrorType
		count    tally
		cronExpr string
	}{
		{provider.Result{Verdict: provider.Sent, Status: 200, Message: "ok"}, 0, storage.PushSent, now, "",
			tally{called: true, verdict: provider.Sent, sent: true}, ""},
		{provider.Result{Verdict: provider.Retry, Status: 503}, 0, storage.PushRetry, now.Add(2 * time.Second), storage.ErrorProvider,
			tally{called: true, verdict: provider.Retry, retryable: true}, ""},
		{provider.Result{Verdict: provider.Retry, Status: 429, RetryAfter: time.Minute}, 1, storage.PushRetry, now.Add(time.Minute),
			storage.ErrorProvider, tally{called: true, verdict: provider.Retry, retryable: true}, ""},
		{provider.Result{Verdict: provider.Retry, Err: errors.New("timeout")}, 0, storage.PushRetry,
			time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC), storage.ErrorOther, tally{called: true, verdict: provider.Retry, retryable: true},
			"0 * * * * ?"},
		{provider.Result{Verdict: provider.Retry, Status: 500}, 2, storage.PushGivenUp, now, storage.ErrorProvider,
			tally{called: true, verdict: provider.Retry, retryable: true, givenUp: true}, ""},
		{provider.Result{Verdict: provider.Fail, Status: 400, Auth: false}, 0, storage.PushFailed, now, storage.ErrorProvider,
			tally{called: true, verdict: provider.Fail, failed: storage.ErrorProvider}, ""},
		{provider.Result{Verdict: provider.Fail, Status: 401, Auth: true}, 0, storage.PushFailed, now, storage.ErrorProvider,
			tally{called: true, verdict: provider.Fail, auth: true, failed: storage.ErrorProvider}, ""},
		{provider.Result{Verdict: provider.DeviceGone, Status: 410}, 0, storage.PushFailed, now, storage.ErrorProvider,
			tally{called: true, verdict: provider.DeviceGone, failed: storage.ErrorProvider}, ""},
		{provider.Result{Verdict: provider.NoPrototypeKey}, 0, storage.PushFailed, now, storage.ErrorPrototypeKey,
			tally{called: true, verdict: provider.NoPrototypeKey, failed: storage.ErrorPrototypeKey}, ""},
		{provider.Result{Verdict: provider.Broken, Message: "panicked"}, 0, storage.PushFailed, now, storage.ErrorOther,
			tally{called: true, verdict: provider.Broken, failed: storage.ErrorOther}, ""},
	} {
		var before []storage.Attempt
		for i := range c.before {
			before = append(before, storage.Attempt{N: i + 1, Status: storage.AttemptError})
		}
		p := started(t, lc, false, before...)
		p.CronExpression = c.cronExpr
		st := lc.outcome(&p, c.res, lifeNow, took, now)
		a := st.next.LastAttempt()
		name := c.res.Verdict.String()
		switch {
		case !st.ok || st.next.State != c.state || st.next.At != c.at.UnixMilli() || st.count != c.count:
			t.Errorf("%s (%d): %s at %v, counted %+v; want %s at %v, %+v", name, c.res.Status, st.next.State,
				time.UnixMilli(st.next.At).UTC(), st.count, c.state, c.at, c.count)
		case a.ErrorType != c.errType || a.ProviderCode != c.res.Status || a.Millis != 1500 || a.Called != lifeNow.UnixMilli():
			t.Errorf("%s (%d): attempt %+v", name, c.res.Status, *a)
		case c.res.Verdict == provider.Broken && a.Cause != "panicked", c.res.Err != nil && a.Cause != c.res.Err.Error():
			t.Errorf("%s: cause %q", name, a.Cause)
		case (a.Status == storage.AttemptOK) != (c.state == storage.PushSent) || (a.Status == storage.AttemptOK && a.ProviderMessage != ""):
			t.Errorf("%s: attempt %s, message %q", name, a.Status, a.ProviderMessage)
		}
	}
}

// TestFailedUnsent: the transitions that end a push without a call each
// record why in an attempt of their own.
func TestFailedUnsent(t *testing.T) {
	lc := testLifecycle()
	p := held(storage.Attempt{N: 1, Status: storage.AttemptError})
	created := storage.Push{ID: lifeID, State: storage.PushPending, Version: 1}
	for _, c := range []struct {
		name  string
		st    step
		typ   storage.ErrorType
		why   string
		count tally
	}{
		{"refused", lc.refused(&p, provider.Result{Message: "no key for Hello"}, lifeNow), storage.ErrorPrototypeKey,
			"no key for Hello", tally{failed: storage.ErrorPrototypeKey}},
		{"expired", lc.expired(&p, lifeNow), storage.ErrorOther, "TTL passed", tally{failed: storage.ErrorOther, expired: true}},
		{"withdrawn", lc.withdrawn(&p, "DELETE /m/x", lifeNow), storage.ErrorOther, "DELETE /m/x", tally{withdrawn: true}},
		{"window, none left", lc.windowMissed(&p, time.Time{}, cron.ErrNoFireTime, lifeNow), storage.ErrorOther,
			"allows no later time", tally{missed: true, failed: storage.ErrorOther}},
		{"discarded", lc.discarded(&created, lifeNow), storage.ErrorOther, "answered 503", tally{}},
	} {
		a := c.st.next.LastAttempt()
		switch {
		case !c.st.ok || c.st.next.State != storage.PushFailed || c.st.count != c.count:
			t.Errorf("%s: %s, counted %+v", c.name, c.st.next.State, c.st.count)
		case a.Status != storage.AttemptError || a.ErrorType != c.typ || a.Node != "me" || a.Called != 0 ||
			!strings.Contains(a.Cause+a.ProviderMessage, c.why):
			t.Errorf("%s: attempt %+v", c.name, *a)
		}
	}
	if st := lc.discarded(&p, lifeNow); st.ok {
		t.Error("discarded a push past its created version")
	}
	inFlight := started(t, lc, false)
	if st := lc.withdrawn(&inFlight, "x", lifeNow); st.ok {
		t.Error("withdrew a push whose call is in flight")
	}
}

// TestWindowMissed: a push waits for its next window, SCHEDULED, or RETRY
// once it has attempts.
func TestWindowMissed(t *testing.T) {
	lc := testLifecycle()
	next := lifeNow.Add(time.Hour)
	fresh, tried := held(), held(storage.Attempt{N: 1, Status: storage.AttemptError})
	for _, c := range []struct {
		p    *storage.Push
		want storage.PushState
	}{{&fresh, storage.PushScheduled}, {&tried, storage.PushRetry}} {
		st := lc.windowMissed(c.p, next, nil, lifeNow)
		if !st.ok || st.next.State != c.want || st.next.At != next.UnixMilli() || st.next.Owner != "" ||
			len(st.next.Attempts) != len(c.p.Attempts) || st.count != (tally{missed: true}) {
			t.Errorf("%d attempts: %+v", len(c.p.Attempts), st)
		}
	}
}

// TestWindow: a push with a cron expression may be called within the
// grace after a second its expression allows; else it is told its next.
func TestWindow(t *testing.T) {
	lc := testLifecycle()
	p := storage.Push{CronExpression: "0 0 9 * * ?"} // 09:00:00 each day
	nine := time.Date(2030, 1, 2, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at   time.Time
		open bool
		next time.Time
	}{
		{nine, true, time.Time{}},
		{nine.Add(10 * time.Second), true, time.Time{}},
		{nine.Add(11 * time.Second), false, nine.Add(24 * time.Hour)},
		{nine.Add(-time.Second), false, nine},
	} {
		open, next, err := lc.window(&p, c.at)
		if open != c.open || !next.Equal(c.next) || err != nil {
			t.Errorf("at %s: open %v, next %s, %v; want %v, %s", c.at.Format(time.TimeOnly), open, next, err, c.open, c.next)
		}
	}
	if open, _, _ := lc.window(&storage.Push{}, nine); !open {
		t.Error("a push without a cron expression is not always open")
	}
	if _, _, err := lc.window(&storage.Push{CronExpression: "0 0 9 1 1 ? 2029"}, nine); err == nil {
		t.Error("an expression whose last time passed has a next window")
	}
}

// TestHandedBack: PENDING for any node, an attempt whose call was not made
// dropped, nothing else.
func TestHandedBack(t *testing.T) {
	lc := testLifecycle()
	prior := storage.Attempt{N: 1, Status: storage.AttemptError}
	for _, p := range []storage.Push{held(prior), started(t, lc, false, prior)} {
		st := lc.handedBack(&p, lifeNow)
		if !st.ok || st.next.State != storage.PushPending || st.next.Owner != "" || st.next.At != lifeNow.UnixMilli() ||
			len(st.next.Attempts) != 1 || st.next.Attempts[0] != prior {
			t.Errorf("handed back: %+v", st.next)
		}
	}
	other := held()
	other.Owner = "other"
	if st := lc.handedBack(&other, lifeNow); st.ok {
		t.Error("handed back another node's push")
	}
}
