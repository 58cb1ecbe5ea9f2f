package sender

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender/cron"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/storage"
)

// The fuzz world: one push, a store holding its current version (written
// by conditional updates on the version a step was made from, as the
// stores do), and two nodes, each holding the copies it queued or
// started. Events come from the fuzz input; each runs a transition on the
// stored push or on a node's copy, as the shell would.
type lifeWorld struct {
	t      *testing.T
	nodes  [2]lifecycle
	dedup  bool
	now    time.Time
	stored storage.Push
	held   [2][]storage.Push // each node's copies, queued or started
}

// lifeEvent names an event (the op byte, modulo their number).
type lifeEvent int

const (
	evTime lifeEvent = iota
	evClaim
	evRecover
	evBegin
	evOutcome
	evHandBack
	evRefuse
	evExpire
	evWindow
	evWithdraw
	evDiscard
	evCrash
	lifeEvents
	// evPending is recovery's step for a push it finds no queue slot for
	// (an evRecover).
	evPending = lifeEvents
)

var lifeEventNames = [...]string{"time", "claim", "recover", "begin", "outcome", "handBack", "refuse", "expire",
	"window", "withdraw", "discard", "crash", "pending"}

func (e lifeEvent) String() string { return lifeEventNames[e] }

// Fuzz configuration: few attempts, so GIVEN_UP comes often.
const (
	fuzzMaxAttempts = 3
	fuzzLease       = time.Minute
	fuzzRetention   = time.Hour
	fuzzRetryDelay  = 2 * time.Second
)

// FuzzLifecycle drives one push through a sequence of events read from the
// fuzz input, two bytes each (the event, its argument): time passing, the
// jobs' claims of due pushes and recovery's of a node's own, the steps of
// a send (attempt started, outcome, handed back, refused, expired, window
// missed) on a node's copy, withdrawals, discards and node crashes; the
// first byte chooses the push (immediate or cron, queued or not), the
// provider (dedup key or not) and the interrupted policy. Each event's
// step is checked against a model of the life cycle (lifeModel: which
// transitions apply to which state, and the state, attempt count and
// attempt in process each leads to) and the invariants written in
// lifecycle.go: one version a step, final states never change, the owner
// exactly while IN_MEMORY, the TTL exactly on final states, At's meaning,
// attempts numbered in order and append only, at most maxAttempts, the
// dedup key, what is counted; and the transitions are pure (the push given
// is left as it was, and the same inputs give the same step). Across
// nodes: no node starts an attempt, nor takes a push over, while another
// node's attempt is in flight under a lease that holds.
func FuzzLifecycle(f *testing.F) {
	// op is an event by node with the step's inputs v (0 to 63) on the
	// node's first copy.
	op := func(ev lifeEvent, node int, v byte) []byte { return []byte{byte(ev), byte(node) | v<<2} }
	add := func(first byte, ops ...[]byte) { f.Add(append([]byte{first}, slices.Concat(ops...)...)) }
	sent, retry, retryAfter, fail, gone, noKey, broken := byte(0), byte(1), byte(49), byte(2), byte(3), byte(4), byte(5)
	later := []byte{byte(evTime), 30}      // 9 s: a retry's delay passed
	leaseGone := []byte{byte(evTime), 255} // 650 s: any lease expired
	// Immediate, queued: started, sent; then a withdrawal, too late.
	add(0x01, op(evBegin, 0, 0), op(evOutcome, 0, sent), op(evWithdraw, 0, 0))
	// Immediate, queued: retried to GIVEN_UP (the last after a Retry-After), time passing between.
	add(0x01, op(evBegin, 0, 0), op(evOutcome, 0, retry), later, op(evClaim, 1, 0), op(evBegin, 1, 3),
		op(evOutcome, 1, retryAfter), leaseGone, leaseGone, op(evClaim, 0, 0), op(evBegin, 0, 0), op(evOutcome, 0, retry))
	// Its last attempt interrupted: GIVEN_UP when node 1 takes it over.
	add(0x01, op(evBegin, 0, 0), op(evOutcome, 0, retry), later, op(evClaim, 0, 0), op(evBegin, 0, 0),
		op(evOutcome, 0, retry), later, op(evClaim, 0, 0), op(evBegin, 0, 0), op(evCrash, 0, 0), leaseGone, op(evClaim, 1, 0))
	// Pending: claimed, started, node 0 crashes; node 1 may not take it
	// over before the lease expires, then does (interrupted, resent).
	add(0x00, op(evClaim, 0, 0), op(evBegin, 0, 0), op(evCrash, 0, 0), op(evClaim, 1, 0), leaseGone, leaseGone,
		op(evClaim, 1, 0), op(evBegin, 1, 0), op(evOutcome, 1, sent))
	// The same under sender-interrupted=fail, no dedup key: FAILED; with a
	// dedup key: resent under the same key, then refused for good.
	add(0x08, op(evClaim, 0, 0), op(evBegin, 0, 0), op(evCrash, 0, 0), leaseGone, leaseGone, op(evClaim, 1, 0))
	add(0x0c, op(evClaim, 0, 0), op(evBegin, 0, 0), op(evCrash, 0, 0), leaseGone, leaseGone, op(evClaim, 1, 0),
		op(evBegin, 1, 0), op(evOutcome, 1, fail))
	// Cron: its window missed (next in 2 s), claimed when due, retried (the
	// next whole minute), the window missed for good (none later).
	add(0x02, leaseGone, op(evClaim, 0, 0), op(evWindow, 0, 2), later, op(evClaim, 0, 0), op(evBegin, 0, 0),
		op(evOutcome, 0, retry), leaseGone, op(evClaim, 1, 0), op(evWindow, 1, 3))
	// Queued, withdrawn while queued: the copy's attempt finds it changed.
	add(0x01, op(evWithdraw, 0, 0), op(evBegin, 0, 0), op(evOutcome, 0, sent))
	// Started, then the node stops: handed back, dropping the attempt;
	// claimed by node 1, which restarts (recovery into a slot), refused.
	add(0x01, op(evBegin, 0, 0), op(evHandBack, 0, 0), op(evClaim, 1, 0), op(evRecover, 1|2, 0), op(evRefuse, 1, 0))
	// Started, crashed, recovered without a slot (PENDING, interrupted);
	// claimed, expired (bridged); a discard too late.
	add(0x11, op(evBegin, 0, 0), op(evCrash, 0, 0), op(evRecover, 0, 0), op(evClaim, 0, 0), op(evExpire, 0, 0),
		op(evDiscard, 0, 0))
	// A discard of the created version; the other verdicts.
	add(0x00, op(evDiscard, 0, 0), op(evClaim, 0, 0))
	for _, v := range []byte{gone, noKey, broken, 6 + fail, 6 + retry, 12 + gone} {
		add(0x05, op(evBegin, 0, 0), op(evOutcome, 0, v))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		w := newLifeWorld(t, in[0])
		for i := 1; i+1 < len(in); i += 2 {
			w.apply(lifeEvent(int(in[i])%int(lifeEvents)), in[i+1])
		}
	})
}

// newLifeWorld is a push accepted by node 0, as the first byte says: bit 0
// queued (else PENDING), bit 1 a cron expression (every minute: then
// SCHEDULED), bit 2 a provider with dedup keys, bit 3 sender-interrupted=
// fail, bit 4 bridged.
func newLifeWorld(t *testing.T, b byte) *lifeWorld {
	w := &lifeWorld{t: t, dedup: b&4 != 0, now: time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)}
	for i := range w.nodes {
		w.nodes[i] = lifecycle{node: fmt.Sprint("node-", i), lease: fuzzLease, retention: fuzzRetention,
			maxAttempts: fuzzMaxAttempts, retryDelay: fuzzRetryDelay, windowGrace: 10 * time.Second,
			failInterrupted: b&8 != 0, loc: time.UTC}
	}
	r := Request{Provider: "p", Platform: "IOS", PrototypeKey: "k", PushKey: "u", Message: "m", Client: "c"}
	var due time.Time
	if b&2 != 0 {
		r.CronExpression = "0 * * * * ?"
		due = w.now.Truncate(time.Minute).Add(time.Minute)
	}
	if b&16 != 0 {
		r.Bridge = &storage.PushBridge{AppID: "a", TTL: 60}
	}
	queued := b&1 != 0 && r.CronExpression == ""
	p := w.nodes[0].accepted(&r, uuid.MustParse("01890000-0000-7000-8000-000000000001"), due, queued, w.now)
	ms := w.now.UnixMilli()
	switch {
	case p.Version != 1 || p.Created != ms || p.Updated != ms || len(p.Attempts) != 0 || p.TTL != 0:
		t.Fatalf("accepted: version %d, created %d, updated %d, %d attempts, TTL %d", p.Version, p.Created, p.Updated, len(p.Attempts), p.TTL)
	case r.CronExpression != "" && (p.State != storage.PushScheduled || p.At != due.UnixMilli()):
		t.Fatalf("accepted with a cron expression: %s at %d, want SCHEDULED at %d", p.State, p.At, due.UnixMilli())
	case queued && (p.State != storage.PushInMemory || p.Owner != "node-0" || p.At != w.now.Add(fuzzLease).UnixMilli()):
		t.Fatalf("accepted into a queue slot: %s owner %q at %d", p.State, p.Owner, p.At)
	case r.CronExpression == "" && !queued && (p.State != storage.PushPending || p.At != ms):
		t.Fatalf("accepted without a slot: %s at %d, want PENDING at %d", p.State, p.At, ms)
	case p.Provider != r.Provider || p.PushKey != r.PushKey || p.Message != r.Message || p.Client != r.Client || p.Bridge != r.Bridge:
		t.Fatalf("accepted: the request's fields not kept: %+v", p)
	}
	w.stored = p
	if queued {
		w.held[0] = append(w.held[0], p)
	}
	return w
}

// apply runs one event.
func (w *lifeWorld) apply(ev lifeEvent, arg byte) {
	n := int(arg & 1)
	lc := w.nodes[n]
	switch ev {
	case evTime:
		w.now = w.now.Add(time.Duration(arg) * time.Duration(arg) * 10 * time.Millisecond) // up to 11 minutes
	case evClaim:
		// A job reads only due pushes (the store's DuePushes); the
		// transition is tried on any, and must refuse what it may not take.
		p := w.stored
		st := w.step(ev, n, &p, lifeInput{}, func() step { return lc.claimed(&p, w.dedup, w.now) })
		if due := !p.State.Final() && p.At <= w.now.UnixMilli(); due {
			w.land(ev, n, &p, st, st.next.State == storage.PushInMemory)
		}
	case evRecover:
		// A node restarts: what it held is gone; it takes back its own.
		w.held[n] = nil
		p := w.stored
		if p.State != storage.PushInMemory || p.Owner != lc.node {
			return
		}
		if arg&2 != 0 { // a queue slot for it
			st := w.step(ev, n, &p, lifeInput{}, func() step { return lc.claimed(&p, w.dedup, w.now) })
			w.land(ev, n, &p, st, st.next.State == storage.PushInMemory)
			return
		}
		w.land(evPending, n, &p, w.step(evPending, n, &p, lifeInput{}, func() step { return lc.pending(&p, w.dedup, w.now) }), false)
	case evWithdraw:
		p := w.stored
		w.land(ev, n, &p, w.step(ev, n, &p, lifeInput{}, func() step { return lc.withdrawn(&p, "withdrawn", w.now) }), false)
	case evDiscard:
		p := w.stored
		w.land(ev, n, &p, w.step(ev, n, &p, lifeInput{}, func() step { return lc.discarded(&p, w.now) }), false)
	case evCrash:
		w.held[n] = nil
	default:
		w.onCopy(ev, n, arg)
	}
}

// onCopy runs a send's step on one of node n's copies (arg chooses it and
// the step's inputs): the copy is used up, and the step's next version
// kept only when it was a started attempt that was written.
func (w *lifeWorld) onCopy(ev lifeEvent, n int, arg byte) {
	lc := w.nodes[n]
	if len(w.held[n]) == 0 {
		return
	}
	i := int(arg>>1&1) % len(w.held[n])
	v := arg >> 2 // the step's inputs
	p := w.held[n][i]
	w.held[n] = slices.Delete(w.held[n], i, i+1)
	var st step
	switch ev {
	case evBegin:
		at := w.now.Add(time.Duration(v%8) * 100 * time.Millisecond)
		st = w.step(ev, n, &p, lifeInput{}, func() step { return lc.attemptStarted(&p, w.dedup, at, w.now) })
		if st.ok {
			w.checkStarted(&p, st.next, at)
		}
	case evOutcome:
		res := fuzzResult(v)
		called, took := w.now, time.Duration(v)*time.Millisecond
		if a := p.LastAttempt(); a != nil {
			called = time.UnixMilli(a.Called)
		}
		st = w.step(ev, n, &p, lifeInput{verdict: res.Verdict}, func() step { return lc.outcome(&p, res, called, took, w.now) })
		if st.ok {
			w.checkOutcome(&p, st, res)
		}
	case evHandBack:
		st = w.step(ev, n, &p, lifeInput{}, func() step { return lc.handedBack(&p, w.now) })
	case evRefuse:
		res := provider.Result{Verdict: provider.NoPrototypeKey, Message: "no key"}
		st = w.step(ev, n, &p, lifeInput{}, func() step { return lc.refused(&p, res, w.now) })
	case evExpire:
		st = w.step(ev, n, &p, lifeInput{}, func() step { return lc.expired(&p, w.now) })
	case evWindow:
		next, noNext := w.now.Add(time.Duration(v)*time.Second), error(nil)
		if v%4 == 3 {
			next, noNext = time.Time{}, cron.ErrNoFireTime
		}
		st = w.step(ev, n, &p, lifeInput{noNext: noNext != nil}, func() step { return lc.windowMissed(&p, next, noNext, w.now) })
		if st.ok && noNext == nil && st.next.At != next.UnixMilli() {
			w.t.Fatalf("window missed: At %d, want the next window's start %d", st.next.At, next.UnixMilli())
		}
	}
	w.land(ev, n, &p, st, ev == evBegin)
}

// fuzzResult is a provider's answer chosen by v (0 to 63): its verdict, the
// status (as the providers decide: 429, 500, 502, 503 and 504 retry, any
// other 4xx or 5xx fails; 0 is no answer), a Retry-After, and a refusal of
// our credentials.
func fuzzResult(v byte) provider.Result {
	statuses := map[provider.Verdict][]int{
		provider.Sent: {200}, provider.Retry: {429, 500, 502, 503, 504, 0}, provider.Fail: {400, 401, 403, 404, 413, 501},
		provider.DeviceGone: {410, 404}, provider.NoPrototypeKey: {0}, provider.Broken: {0},
	}
	verdict := provider.Verdict(v % 6)
	codes := statuses[verdict]
	res := provider.Result{Verdict: verdict, Status: codes[int(v/6)%len(codes)], Message: "says " + verdict.String()}
	res.Auth = res.Status == 401 || res.Status == 403
	if verdict == provider.Retry && v >= 48 {
		res.RetryAfter = time.Duration(v) * time.Second
	}
	if verdict == provider.Broken || (verdict == provider.Retry && res.Status == 0) {
		res.Err = errors.New("no answer")
	}
	return res
}

// step runs a transition on p (node n's) through do, checking that it is
// pure (p unchanged, the same step twice), that it applies exactly when
// the model says, to the state the model says, and the invariants.
func (w *lifeWorld) step(ev lifeEvent, n int, p *storage.Push, x lifeInput, do func() step) step {
	w.t.Helper()
	before := clonePush(p)
	st := do()
	if !reflect.DeepEqual(*p, before) {
		w.t.Fatalf("%s changed the push it was given:\n%+v\nwas\n%+v", ev, *p, before)
	}
	if again := do(); !reflect.DeepEqual(again, st) {
		w.t.Fatalf("%s gave two steps for the same inputs:\n%+v\n%+v", ev, st, again)
	}
	lc := w.nodes[n]
	want := lifeModel{max: fuzzMaxAttempts, resend: w.dedup || !lc.failInterrupted}.expect(ev, x, lc.node, p, w.now)
	if st.ok != want.ok {
		w.t.Fatalf("%s by %s on %s v%d (%d attempts, in process %v, owner %q, at %d, now %d): applies %v, the model says %v",
			ev, lc.node, p.State, p.Version, len(p.Attempts), inProcess(p), p.Owner, p.At, w.now.UnixMilli(), st.ok, want.ok)
	}
	if !st.ok {
		if !reflect.DeepEqual(st, none) {
			w.t.Fatalf("%s did not apply but returned %+v", ev, st)
		}
		return st
	}
	got := abstractOf(&st.next)
	if got != want.next {
		w.t.Fatalf("%s by %s on %s v%d (%d attempts, in process %v): %+v, the model says %+v",
			ev, lc.node, p.State, p.Version, len(p.Attempts), inProcess(p), got, want.next)
	}
	w.checkInvariants(ev, lc, p, st)
	return st
}

// land writes st over the stored push when st was made from the stored
// version (the stores' conditional update); node n keeps the next version
// as its copy when keep. The lease rule is checked on every write that
// starts an attempt or takes a push.
func (w *lifeWorld) land(ev lifeEvent, n int, from *storage.Push, st step, keep bool) {
	w.t.Helper()
	if !st.ok || from.Version != w.stored.Version {
		return
	}
	if w.stored.State.Final() {
		w.t.Fatalf("%s wrote over a final push (%s)", ev, w.stored.State)
	}
	if st.next.State == storage.PushInMemory {
		for other := range w.held {
			if other == n {
				continue
			}
			for _, c := range w.held[other] {
				if inProcess(&c) && c.At > w.now.UnixMilli() {
					w.t.Fatalf("%s by %s while %s's attempt is in flight under a lease until %d (now %d)",
						ev, w.nodes[n].node, w.nodes[other].node, c.At, w.now.UnixMilli())
				}
			}
		}
	}
	w.stored = st.next
	if keep {
		w.held[n] = append(w.held[n], st.next)
	}
}

// checkInvariants checks a step's next version against the push it was
// made from.
func (w *lifeWorld) checkInvariants(ev lifeEvent, lc lifecycle, p *storage.Push, st step) {
	w.t.Helper()
	nx, now := &st.next, w.now.UnixMilli()
	fail := func(format string, args ...any) {
		w.t.Helper()
		w.t.Fatalf("%s by %s, %s v%d -> %s v%d: %s", ev, lc.node, p.State, p.Version, nx.State, nx.Version, fmt.Sprintf(format, args...))
	}
	switch {
	case p.State.Final():
		fail("a final state changed")
	case nx.Version != p.Version+1 || nx.Updated != now:
		fail("version %d after %d, updated %d (now %d)", nx.Version, p.Version, nx.Updated, now)
	case nx.ID != p.ID || nx.Created != p.Created || nx.Provider != p.Provider || nx.PushKey != p.PushKey ||
		nx.Message != p.Message || nx.CronExpression != p.CronExpression || nx.Client != p.Client || nx.Bridge != p.Bridge:
		fail("the push's own fields changed")
	case (nx.Owner != "") != (nx.State == storage.PushInMemory) || (nx.Owner != "" && nx.Owner != lc.node):
		fail("owner %q", nx.Owner)
	case nx.State.Final() != (nx.TTL == int64(fuzzRetention/time.Second)) || (!nx.State.Final() && nx.TTL != 0):
		fail("TTL %d", nx.TTL)
	case len(nx.Attempts) > fuzzMaxAttempts:
		fail("%d attempts, over %d", len(nx.Attempts), fuzzMaxAttempts)
	}
	switch nx.State {
	case storage.PushInMemory:
		if nx.At <= now {
			fail("a lease that has expired (at %d, now %d)", nx.At, now)
		}
	case storage.PushPending, storage.PushSent, storage.PushFailed, storage.PushGivenUp:
		if nx.At != now {
			fail("at %d, want now (%d)", nx.At, now)
		}
	case storage.PushRetry:
		if nx.At < w.now.Add(fuzzRetryDelay).UnixMilli() && ev != evWindow || len(nx.Attempts) >= fuzzMaxAttempts {
			fail("RETRY at %d (now %d) with %d attempts", nx.At, now, len(nx.Attempts))
		}
	}
	w.checkAttempts(fail, p, nx)
	w.checkTally(fail, ev, p, st)
}

// checkAttempts: numbered in order, append only but for an attempt that
// was in process, IN_PROCESS only last and while IN_MEMORY, OK only on a
// SENT push, every FAILED and GIVEN_UP push saying why, dedup keys.
func (w *lifeWorld) checkAttempts(fail func(string, ...any), p, nx *storage.Push) {
	kept := len(p.Attempts)
	if inProcess(p) {
		kept-- // its outcome, its interruption, or dropped
	}
	if len(nx.Attempts) < kept || !slices.Equal(nx.Attempts[:kept], p.Attempts[:kept]) {
		fail("attempts rewritten: %+v from %+v", nx.Attempts, p.Attempts)
	}
	for i, a := range nx.Attempts {
		last := i == len(nx.Attempts)-1
		switch {
		case a.N != i+1:
			fail("attempt %d numbered %d", i+1, a.N)
		case a.Status == storage.AttemptInProcess && (!last || nx.State != storage.PushInMemory):
			fail("attempt %d IN_PROCESS (last %v) in %s", a.N, last, nx.State)
		case (a.Status == storage.AttemptOK) != (last && nx.State == storage.PushSent):
			fail("attempt %d %s in %s", a.N, a.Status, nx.State)
		case a.DedupKey != "" && (!w.dedup || a.DedupKey != nx.ID.String()):
			fail("attempt %d dedup key %q", a.N, a.DedupKey)
		}
	}
	if nx.State == storage.PushFailed || nx.State == storage.PushGivenUp {
		if a := nx.LastAttempt(); a == nil || (a.Status != storage.AttemptError && a.Status != storage.AttemptInterrupted) {
			fail("final without an attempt saying why: %+v", a)
		}
	}
	if nx.State == storage.PushGivenUp && len(nx.Attempts) != fuzzMaxAttempts {
		fail("GIVEN_UP after %d attempts, want %d", len(nx.Attempts), fuzzMaxAttempts)
	}
}

// checkTally: a step counts what it did, and only that.
func (w *lifeWorld) checkTally(fail func(string, ...any), ev lifeEvent, p *storage.Push, st step) {
	c, nx := st.count, &st.next
	interrupted := inProcess(p) && (ev == evClaim || ev == evRecover || ev == evPending)
	switch {
	case c.sent != (nx.State == storage.PushSent) || c.givenUp != (nx.State == storage.PushGivenUp):
		fail("counted sent %v, given up %v", c.sent, c.givenUp)
	case c.failed != "" && (nx.State != storage.PushFailed || c.failed != nx.LastAttempt().ErrorType):
		fail("counted FAILED under %q: %s, %+v", c.failed, nx.State, nx.LastAttempt())
	case c.failed == "" && nx.State == storage.PushFailed && ev != evWithdraw && ev != evDiscard:
		fail("FAILED not counted")
	case c.called != (ev == evOutcome) || c.interrupted != interrupted || c.expired != (ev == evExpire) ||
		c.withdrawn != (ev == evWithdraw) || c.missed != (ev == evWindow):
		fail("counted %+v", c)
	}
}

// checkStarted: a new attempt IN_PROCESS by this node, called no sooner
// than it was started, under the dedup key when the provider has them, the
// lease renewed exactly when less than half of it was left.
func (w *lifeWorld) checkStarted(p *storage.Push, nx storage.Push, at time.Time) {
	w.t.Helper()
	a, now := nx.LastAttempt(), w.now.UnixMilli()
	key := ""
	if w.dedup {
		key = p.ID.String()
	}
	renew := time.UnixMilli(p.At).Sub(w.now) < fuzzLease/2
	switch {
	case a.Node != nx.Owner || a.Started != now || a.Called != later(at, w.now).UnixMilli() || a.DedupKey != key:
		w.t.Fatalf("attempt started: %+v (now %d, planned %d, dedup %v)", *a, now, at.UnixMilli(), w.dedup)
	case renew && nx.At != w.now.Add(fuzzLease).UnixMilli(), !renew && nx.At != p.At:
		w.t.Fatalf("attempt started: lease until %d from %d, now %d", nx.At, p.At, now)
	}
}

// checkOutcome: the attempt records the answer; a retry waits the retry
// delay or the provider's longer Retry-After, then for the next window a
// cron expression allows.
func (w *lifeWorld) checkOutcome(p *storage.Push, st step, res provider.Result) {
	w.t.Helper()
	a := st.next.LastAttempt()
	wantType := map[provider.Verdict]storage.ErrorType{provider.Sent: "", provider.Retry: storage.ErrorProvider,
		provider.Fail: storage.ErrorProvider, provider.DeviceGone: storage.ErrorProvider,
		provider.NoPrototypeKey: storage.ErrorPrototypeKey, provider.Broken: storage.ErrorOther}[res.Verdict]
	if res.Verdict == provider.Retry && res.Status == 0 {
		wantType = storage.ErrorOther
	}
	switch {
	case a.ProviderCode != res.Status || a.ErrorType != wantType || a.Millis < 0:
		w.t.Fatalf("outcome of %+v recorded as %+v", res, *a)
	case st.count.verdict != res.Verdict || st.count.auth != res.Auth || st.count.retryable != (res.Verdict == provider.Retry):
		w.t.Fatalf("outcome of %+v counted %+v", res, st.count)
	}
	if st.next.State != storage.PushRetry {
		return
	}
	due := w.now.Add(max(fuzzRetryDelay, res.RetryAfter))
	if p.CronExpression != "" { // every minute: the first whole minute at or after, to the second
		if s := due.Truncate(time.Second); s.Equal(s.Truncate(time.Minute)) {
			due = s
		} else {
			due = s.Truncate(time.Minute).Add(time.Minute)
		}
	}
	if st.next.At != due.UnixMilli() {
		w.t.Fatalf("RETRY at %d, want %d", st.next.At, due.UnixMilli())
	}
}

func clonePush(p *storage.Push) storage.Push {
	c := *p
	c.Attempts = slices.Clone(p.Attempts)
	return c
}

// lifeState is what the model knows of a push.
type lifeState struct {
	State     storage.PushState
	Attempts  int
	InProcess bool // the last attempt is IN_PROCESS
	Owner     string
}

func abstractOf(p *storage.Push) lifeState {
	return lifeState{State: p.State, Attempts: len(p.Attempts), InProcess: inProcess(p), Owner: p.Owner}
}

// lifeModel is the life cycle as a table: which transition applies to
// which state, and where it leads, with max attempts and whether an
// interrupted attempt is sent again (a dedup key, or the resend policy).
type lifeModel struct {
	max    int
	resend bool
}

type lifeExpect struct {
	ok   bool
	next lifeState
}

// answered is the state a verdict leads to after attempts.
func (m lifeModel) answered(v provider.Verdict, attempts int) storage.PushState {
	switch {
	case v == provider.Sent:
		return storage.PushSent
	case v == provider.Retry && attempts >= m.max:
		return storage.PushGivenUp
	case v == provider.Retry:
		return storage.PushRetry
	}
	return storage.PushFailed
}

// lifeInput is what the model needs of a step's inputs.
type lifeInput struct {
	verdict provider.Verdict // an outcome's
	noNext  bool             // a missed window's expression allows no later time
}

// expect is the model's step: ev (with x) by node on p at now.
func (m lifeModel) expect(ev lifeEvent, x lifeInput, node string, p *storage.Push, now time.Time) lifeExpect {
	s := abstractOf(p)
	own := s.State == storage.PushInMemory && s.Owner == node
	idle := own && !s.InProcess // queued, not started
	final := s.State.Final()
	to := func(ok bool, state storage.PushState, attempts int, inProc bool) lifeExpect {
		owner := ""
		if state == storage.PushInMemory {
			owner = node
		}
		return lifeExpect{ok: ok, next: lifeState{State: state, Attempts: attempts, InProcess: inProc, Owner: owner}}
	}
	// An attempt found IN_PROCESS when a node takes the push is
	// interrupted: it ends the push, or the push goes on to state.
	interrupt := func(ok bool, state storage.PushState) lifeExpect {
		switch {
		case !s.InProcess:
		case !m.resend:
			state = storage.PushFailed
		case s.Attempts >= m.max:
			state = storage.PushGivenUp
		}
		return to(ok, state, s.Attempts, false)
	}
	switch ev {
	case evClaim, evRecover: // another node's lease must have expired
		leased := s.State == storage.PushInMemory && s.Owner != node && p.At > now.UnixMilli()
		return interrupt(!final && !leased, storage.PushInMemory)
	case evPending:
		return interrupt(own, storage.PushPending)
	case evHandBack:
		if s.InProcess {
			return to(own, storage.PushPending, s.Attempts-1, false) // its call was not made
		}
		return to(own, storage.PushPending, s.Attempts, false)
	case evBegin:
		return to(idle, storage.PushInMemory, s.Attempts+1, true)
	case evOutcome:
		return to(own && s.InProcess, m.answered(x.verdict, s.Attempts), s.Attempts, false)
	case evWindow:
		switch {
		case x.noNext:
			return to(idle, storage.PushFailed, s.Attempts+1, false)
		case s.Attempts > 0:
			return to(idle, storage.PushRetry, s.Attempts, false)
		}
		return to(idle, storage.PushScheduled, s.Attempts, false)
	case evRefuse, evExpire:
		return to(idle, storage.PushFailed, s.Attempts+1, false)
	case evWithdraw:
		return to(!final && !s.InProcess, storage.PushFailed, s.Attempts+1, false)
	case evDiscard:
		return to(!final && p.Version == 1, storage.PushFailed, s.Attempts+1, false)
	}
	return lifeExpect{}
}
