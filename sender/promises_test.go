package sender_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
	"github.com/autopush-go/autopush/sender/swrve"
	"github.com/autopush-go/autopush/storage"
)

// slowSwrve is a Swrve client paced at one call every delay (its limit
// twice that pace).
func slowSwrve(url string, delay time.Duration) swrve.Config {
	sc := swrveConfig(url)
	sc.Delay, sc.AverageLatency = delay, time.Second
	sc.Rate = 2 * float64(time.Second) / float64(delay)
	return sc
}

// windowStart is the whole second at or after t, moved past the last
// four seconds of a minute so that a four-second window does not wrap.
func windowStart(t time.Time) time.Time {
	t = t.Add(time.Second - 1).Truncate(time.Second).UTC()
	if t.Second() >= 56 {
		t = t.Add(5 * time.Second)
	}
	return t
}

// cronAt is a Quartz expression for the seconds from..to (inclusive) of
// t's minute, every day (once: that day only).
func cronAt(t time.Time, from, to int, once bool) string {
	t = t.UTC()
	e := fmt.Sprintf("%d-%d %d %d * * ?", from, to, t.Minute(), t.Hour())
	if once {
		e = fmt.Sprintf("%d-%d %d %d %d %d ? %d", from, to, t.Minute(), t.Hour(), t.Day(), t.Month(), t.Year())
	}
	return e
}

// TestWindowAtSendTime: a push whose cron window closes (and its grace,
// 1 s here, passes) while it waits behind a backlog is not sent late: an
// everyday window waits for the next day's, a one-off window FAILs with
// the reason; and a retry whose window has passed by its retry time is
// not sent either. The provider never receives them.
func TestWindowAtSendTime(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		fake := startFake(t)
		cfg := testConfig("node-a")
		cfg.WindowGrace = time.Second
		// Portions of 1 at 500 ms a call: within the 600 ms interval. The
		// slow pace (2/s) keeps a backlog ahead however slowly a loaded
		// machine accepts it: the gate only ever slows.
		cfg.ScheduledPortion, cfg.PendingPortion = 1, 1
		cfg.ScheduledInterval, cfg.PendingInterval = 600*time.Millisecond, 600*time.Millisecond
		s := launchSwrve(t, newStore(t), slowSwrve(fake.URL(), 500*time.Millisecond), cfg)
		<-s.Ready()
		// The retried one: 503 with Retry-After 8 s on its first call, in a
		// window of four seconds from about 1.5 s from now only.
		fake.SetFaults(byUser(map[string][]swrvefake.Fault{"retried": {{Status: 503, RetryAfter: "8"}, {}}}))
		startRetried := windowStart(time.Now().Add(1500 * time.Millisecond))
		retried, err := s.Accept(context.Background(), sender.Request{Platform: "IOS", PrototypeKey: "Hello", PushKey: "retried",
			Message: "m", CronExpression: cronAt(startRetried, startRetried.Second(), startRetried.Second()+3, true)})
		if err != nil || retried.State != storage.PushScheduled {
			t.Fatalf("accept: %v %s", err, retried.State)
		}
		p := waitState(t, s, retried.ID, storage.PushFailed)
		if len(p.Attempts) != 2 || p.Attempts[0].ProviderCode != 503 || p.Attempts[1].Called != 0 ||
			!strings.Contains(p.Attempts[1].Cause, "cron window closed") {
			t.Fatalf("retried push: attempts %+v", p.Attempts)
		}

		// A backlog of 10 s at the pace, then two pushes whose one-second
		// windows open 2 s from now: they reach the gate some 8 s late.
		backlog := make([]uuid.UUID, 20)
		for i := range backlog {
			b, err := s.Accept(context.Background(), hello(fmt.Sprintf("b%02d", i)))
			if err != nil || b.State != storage.PushInMemory {
				t.Fatalf("backlog push %d: %v %s", i, err, b.State)
			}
			backlog[i] = b.ID
		}
		at := windowStart(time.Now().Add(2 * time.Second))
		daily, err := s.Accept(context.Background(), sender.Request{Platform: "IOS", PrototypeKey: "Hello", PushKey: "daily",
			Message: "m", CronExpression: cronAt(at, at.Second(), at.Second(), false)})
		if err != nil {
			t.Fatal(err)
		}
		once, err := s.Accept(context.Background(), sender.Request{Platform: "IOS", PrototypeKey: "Hello", PushKey: "once",
			Message: "m", CronExpression: cronAt(at, at.Second(), at.Second(), true)})
		if err != nil {
			t.Fatal(err)
		}
		p = waitState(t, s, once.ID, storage.PushFailed)
		if len(p.Attempts) != 1 || p.Attempts[0].Called != 0 || !strings.Contains(p.Attempts[0].Cause, "no later time") {
			t.Fatalf("one-off push: attempts %+v", p.Attempts)
		}
		// The everyday one waits for tomorrow's window, unsent.
		for {
			p, err = s.Get(context.Background(), daily.ID)
			if err != nil {
				t.Fatal(err)
			}
			if p.State == storage.PushScheduled && p.At > at.Add(23*time.Hour).UnixMilli() {
				break
			}
			if p.State.Final() {
				t.Fatalf("everyday push ended %s: %+v", p.State, p.Attempts)
			}
			time.Sleep(20 * time.Millisecond) // polling the store
		}
		if len(p.Attempts) != 0 || p.At != at.Add(24*time.Hour).UnixMilli() {
			t.Fatalf("everyday push waits until %s with attempts %+v; want %s", time.UnixMilli(p.At).UTC(), p.Attempts, at.Add(24*time.Hour))
		}
		waitState(t, s, backlog[len(backlog)-1], storage.PushSent)
		for _, rec := range fake.Log() {
			if rec.User == "daily" || rec.User == "once" {
				t.Errorf("%s was sent outside its window", rec.User)
			}
		}
		// The retried push's first call may come after the backlog's last
		// on a loaded machine (make test-stress): wait for it, then count.
		for deadline := time.Now().Add(30 * time.Second); fake.Count() < len(backlog)+1 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond) // polling the fake's log
		}
		if n := fake.Count(); n != len(backlog)+1 {
			t.Errorf("the provider received %d requests, want the backlog's %d and the retried push's first", n, len(backlog))
		}
		if got := metricOf(s, `autosender_window_missed_total{provider="swrve"}`); got != "3" {
			t.Errorf("window_missed %s, want 3", got)
		}
	})
}

// TestPrototypeKeyBeforeTheRate: a push whose prototype's push key for its
// platform went away after it was accepted (the mapping reloaded without
// it; here, another node accepted it with a mapping that had it) fails
// before its turn at the rate: no call is made or recorded (the attempt
// has no called time), and the provider's calls are counted without it.
// The node whose mapping lacks the prototype refuses such a push at once.
func TestPrototypeKeyBeforeTheRate(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := newStore(t)
		fake := startFake(t)
		in := testConfig("node-in")
		in.Workers = false
		keys := swrve.NewKeys(map[string]map[string]string{"Goodbye": {"ANDROID": "k-goodbye"}})
		client, err := swrve.New(swrveConfig(fake.URL()), keys)
		if err != nil {
			t.Fatal(err)
		}
		accepting := runSender(t, store, in, client)
		bad, err := accepting.Accept(context.Background(), sender.Request{Platform: "ANDROID", PrototypeKey: "Goodbye", PushKey: "nokey", Message: "bye"})
		if err != nil {
			t.Fatal(err)
		}
		r := &rig{s: startSender(t, store, fake, testConfig("node-a")), fake: fake}
		var fe *sender.FieldError
		if _, err := r.s.Accept(context.Background(), sender.Request{Platform: "ANDROID", PrototypeKey: "Goodbye", PushKey: "u", Message: "bye"}); !errors.As(err, &fe) || fe.Field != "messagePrototypeKey" {
			t.Errorf("a node without the prototype's key accepted it: %v", err)
		}
		good := r.accept(t, hello("good"))
		p := waitState(t, r.s, bad.ID, storage.PushFailed)
		wantAttempts(t, p, "ERROR/MESSAGE_PROTOTYPE_KEY/0")
		if a := p.Attempts[0]; a.Called != 0 || !strings.Contains(a.ProviderMessage, "Goodbye") {
			t.Errorf("attempt %+v: want no call time and the reason", a)
		}
		waitState(t, r.s, good.ID, storage.PushSent)
		if n := r.fake.Count(); n != 1 {
			t.Errorf("the provider received %d requests, want 1", n)
		}
		for series, want := range map[string]string{
			`autosender_attempts_total{provider="swrve",verdict="no_prototype_key"}`:       "0",
			`autosender_attempts_total{provider="swrve",verdict="sent"}`:                   "1",
			`autosender_failed_total{provider="swrve",error_type="MESSAGE_PROTOTYPE_KEY"}`: "1",
		} {
			if got := metricOf(r.s, series); got != want {
				t.Errorf("%s = %s, want %s", series, got, want)
			}
		}
	})
}

// TestStartupRules: the sizing rules, checked at start with the Java
// sender's own numbers (a 4 ms delay under Swrve's 300/s, portions of 200
// a second, the queue of 10,000) accepted, and each rule's breach refused
// naming its settings.
func TestStartupRules(t *testing.T) {
	build := func(cfg sender.Config, sc swrve.Config) error {
		client, err := swrve.New(sc, swrve.NewKeys(nil))
		if err != nil {
			return err
		}
		_, err = sender.New(cfg, nil, []provider.Provider{client}, quiet()) // never started: no store needed
		return err
	}
	defaults := sender.DefaultConfig()
	defaults.Node = "rules"
	sc := swrve.DefaultConfig()
	sc.URL = "http://127.0.0.1:9/push"
	if err := build(defaults, sc); err != nil {
		t.Fatalf("the Java sender's numbers (delay %s, portions %d, queue %d) refused: %v", sc.Delay, defaults.PendingPortion, defaults.QueueCapacity, err)
	}
	for name, c := range map[string]struct {
		cfg  func(*sender.Config)
		sc   func(*swrve.Config)
		want string
	}{
		"portion × delay not under the interval": {func(c *sender.Config) { c.PendingPortion = 250 }, nil, "sender-pending-portion × swrve's"},
		"portion not under the queue":            {func(c *sender.Config) { c.QueueCapacity = 200 }, nil, "smaller than sender-queue-capacity"},
		"lease not over twice the timeout":       {func(c *sender.Config) { c.Lease = time.Minute }, nil, "sender-lease"},
		"pace over 95% of the rate":              {nil, func(s *swrve.Config) { s.Delay = 3 * time.Millisecond }, "headroom"},
		"no grace":                               {func(c *sender.Config) { c.WindowGrace = 0 }, nil, "sender-window-grace"},
		"share hold too short":                   {func(c *sender.Config) { c.ShareHold = time.Second }, nil, "sender-share-hold"},
	} {
		cfg, s := defaults, sc
		if c.cfg != nil {
			c.cfg(&cfg)
		}
		if c.sc != nil {
			c.sc(&s)
		}
		if err := build(cfg, s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %q", name, err, c.want)
		}
	}
}

// TestCallerRuns: with the pool full (slow answers), the reader makes the
// next send itself, so no more than the pool and the reader's one are in
// flight at the provider, and every push is sent once.
func TestCallerRuns(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		fake := startFake(t)
		fake.SetLatency(func() time.Duration { return 2 * time.Second })
		sc := swrveConfig(fake.URL())
		// 25 calls a second and a pool of 7 (50 ms / 40 ms = 1, and 6
		// ahead), against answers of 2 s: 50 would be in flight, and even
		// a machine slowed to a fifth of the pace fills the pool.
		sc.Rate, sc.Delay, sc.AverageLatency, sc.Timeout = 30, 40*time.Millisecond, 50*time.Millisecond, 4*time.Second
		cfg := testConfig("node-a")
		cfg.ScheduledPortion, cfg.PendingPortion = 2, 2
		s := launchSwrve(t, newStore(t), sc, cfg)
		<-s.Ready()
		var ids []uuid.UUID
		for i := range 30 {
			p, err := s.Accept(context.Background(), hello(fmt.Sprintf("c%02d", i)))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, p.ID)
		}
		for _, id := range ids {
			waitState(t, s, id, storage.PushSent)
		}
		pool, _ := strconv.Atoi(metricOf(s, `autosender_pool_size{provider="swrve"}`))
		runs, _ := strconv.Atoi(metricOf(s, `autosender_caller_runs_total{provider="swrve"}`))
		if runs == 0 || fake.MaxInflight() > pool+1 || fake.Count() != len(ids) {
			t.Errorf("caller runs %d, provider in flight at most %d with a pool of %d, %d received; want runs, at most pool+1, %d",
				runs, fake.MaxInflight(), pool, fake.Count(), len(ids))
		}
	})
}

// TestQueueFullWhileRunning: pushes accepted while the queue is full go
// PENDING (counted), and SendPending queues them as it empties: every one
// sent once.
func TestQueueFullWhileRunning(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		fake := startFake(t)
		cfg := testConfig("node-a")
		cfg.QueueCapacity, cfg.ScheduledPortion, cfg.PendingPortion = 5, 2, 2
		cfg.ScheduledInterval, cfg.PendingInterval = 600*time.Millisecond, 600*time.Millisecond
		s := launchSwrve(t, newStore(t), slowSwrve(fake.URL(), 250*time.Millisecond), cfg)
		<-s.Ready()
		pending := 0
		var ids []uuid.UUID
		for i := range 30 {
			p, err := s.Accept(context.Background(), hello(fmt.Sprintf("q%02d", i)))
			if err != nil {
				t.Fatal(err)
			}
			if p.State == storage.PushPending {
				pending++
			}
			ids = append(ids, p.ID)
		}
		// At 4 calls a second, accepting 30 outruns the queue of 5 however
		// loaded the machine (a make test-stress run queued 11).
		if pending < 10 {
			t.Fatalf("%d of 30 went PENDING with a queue of 5", pending)
		}
		for _, id := range ids {
			waitState(t, s, id, storage.PushSent)
		}
		seen := map[string]int{}
		for _, rec := range fake.Log() {
			seen[rec.User]++
		}
		if len(seen) != 30 || len(fake.Log()) != 30 {
			t.Errorf("%d requests for %d pushes, want 30 each once", len(fake.Log()), len(seen))
		}
		if got := metricOf(s, "autosender_pushes_went_pending_total"); got != strconv.Itoa(pending) {
			t.Errorf("went_pending %s, want %d", got, pending)
		}
	})
}
