package sender_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
	"github.com/autopush-go/autopush/sender/swrve"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
	"github.com/autopush-go/autopush/storage/scylla"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// backends runs fn against a fresh embedded store and a fresh keyspace of
// the CQL server (CQL_HOSTS; see cqltest for when it is missing).
func backends(t *testing.T, fn func(t *testing.T, newStore func(t *testing.T) storage.Store)) {
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		var once sync.Once
		var st storage.Store
		fn(t, func(t *testing.T) storage.Store {
			once.Do(func() {
				s, err := embedded.Open(embedded.Config{Dir: dir, Logger: quiet()})
				if err != nil {
					t.Fatal(err)
				}
				st = s
				t.Cleanup(func() { s.Close() })
			})
			return st
		})
	})
	t.Run("scylla", func(t *testing.T) {
		t.Parallel()
		cfg := cqltest.Keyspace(t, "sender")
		fn(t, func(t *testing.T) storage.Store { return openCQL(t, cfg) })
	})
}

// openCQL opens a store on cfg's keyspace, closed when the test ends.
func openCQL(t *testing.T, cfg scylla.Config) storage.Store {
	t.Helper()
	s, err := scylla.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Keys of the fake campaigns.
const (
	keyHelloIOS     = "d36ae023-010c-4f3a-9bd7-9924a754b4b4"
	keyHelloAndroid = "f31690cb-a763-4259-af18-6aed41afd9ed"
)

// testConfig is fast enough for tests and keeps the sizing rules
// (Config.ValidateFor).
func testConfig(node string) sender.Config {
	c := sender.DefaultConfig()
	c.Node = node
	c.RetryDelay = time.Second
	c.MaxAttempts = 3
	c.Lease = 10 * time.Second
	c.ScheduledStart, c.ScheduledInterval, c.ScheduledPortion = 0, 100*time.Millisecond, 20
	c.PendingStart, c.PendingInterval, c.PendingPortion = 0, 100*time.Millisecond, 20
	c.QueueCapacity = 1000
	return c
}

func swrveConfig(url string) swrve.Config {
	c := swrve.DefaultConfig()
	c.URL, c.Timeout, c.AverageLatency = url, 2*time.Second, 100*time.Millisecond
	return c
}

type rig struct {
	s    *sender.Sender
	fake *swrvefake.Fake
}

// startSender starts a sender and, with workers, waits until it has
// recovered and queues immediate pushes.
func startSender(t *testing.T, store storage.Store, fake *swrvefake.Fake, cfg sender.Config) *sender.Sender {
	t.Helper()
	s := launchSender(t, store, fake, cfg)
	if cfg.Workers {
		<-s.Ready()
	}
	return s
}

// launchSender starts a sender, stopped when the test ends.
func launchSender(t *testing.T, store storage.Store, fake *swrvefake.Fake, cfg sender.Config) *sender.Sender {
	t.Helper()
	return launchSwrve(t, store, swrveConfig(fake.URL()), cfg)
}

// launchSwrve starts a sender with its Swrve client's config sc,
// stopped when the test ends.
func launchSwrve(t *testing.T, store storage.Store, sc swrve.Config, cfg sender.Config) *sender.Sender {
	t.Helper()
	keys := swrve.NewKeys(map[string]map[string]string{"Hello": {"IOS": keyHelloIOS, "ANDROID": keyHelloAndroid}})
	client, err := swrve.New(sc, keys)
	if err != nil {
		t.Fatal(err)
	}
	return runSender(t, store, cfg, client)
}

// runSender starts a sender over providers, stopped when the test ends.
func runSender(t *testing.T, store storage.Store, cfg sender.Config, providers ...provider.Provider) *sender.Sender {
	t.Helper()
	s, err := sender.New(cfg, store, providers, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return s
}

func startFake(t *testing.T) *swrvefake.Fake {
	t.Helper()
	f, err := swrvefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func newRig(t *testing.T, store storage.Store, cfg sender.Config) *rig {
	f := startFake(t)
	return &rig{s: startSender(t, store, f, cfg), fake: f}
}

func hello(user string) sender.Request {
	return sender.Request{Platform: "IOS", PrototypeKey: "Hello", PushKey: user, Message: "Hello " + user}
}

func (r *rig) accept(t *testing.T, req sender.Request) storage.Push {
	t.Helper()
	p, err := r.s.Accept(context.Background(), req)
	if err != nil {
		t.Fatalf("accept %+v: %v", req, err)
	}
	return p
}

// waitState polls the push until it is in want (or any final state when
// want is ""), failing after a deadline only a real failure reaches.
func waitState(t *testing.T, s *sender.Sender, id uuid.UUID, want storage.PushState) storage.Push {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		p, err := s.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if p.State == want || want == "" && p.State.Final() {
			return p
		}
		if p.State.Final() || time.Now().After(deadline) {
			t.Fatalf("push %s is %s, want %s; attempts %+v", id, p.State, want, p.Attempts)
		}
		time.Sleep(20 * time.Millisecond) // polling the store's answer
	}
}

func attempts(p storage.Push) string {
	var parts []string
	for _, a := range p.Attempts {
		parts = append(parts, fmt.Sprintf("%s/%s/%d", a.Status, a.ErrorType, a.ProviderCode))
	}
	return strings.Join(parts, " ")
}

func wantAttempts(t *testing.T, p storage.Push, want string) {
	t.Helper()
	if got := attempts(p); got != want {
		t.Fatalf("push %s attempts %q, want %q (%+v)", p.ID, got, want, p.Attempts)
	}
}

// byUser scripts the fake per device: each user's n-th request gets the
// n-th fault of its script (the last one repeats).
func byUser(scripts map[string][]swrvefake.Fault) func(swrvefake.Received) swrvefake.Fault {
	var mu sync.Mutex
	seen := map[string]int{}
	return func(r swrvefake.Received) swrvefake.Fault {
		mu.Lock()
		defer mu.Unlock()
		s, ok := scripts[r.User]
		if !ok {
			return swrvefake.Fault{}
		}
		i := min(seen[r.User], len(s)-1)
		seen[r.User]++
		return s[i]
	}
}

func TestLifeCycle(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		r := newRig(t, newStore(t), testConfig("node-a"))
		ok := swrvefake.Fault{}
		r.fake.SetFaults(byUser(map[string][]swrvefake.Fault{
			"429":        {{Status: 429}, ok},
			"429-after":  {{Status: 429, RetryAfter: "3"}, ok},
			"5xx":        {{Status: 500}, {Status: 502}, {Status: 503}},
			"504":        {{Status: 504}},
			"400":        {{Status: 400, Message: "No such user"}},
			"403":        {{Status: 403, Message: "Invalid push_key"}},
			"timeout":    {{Delay: 5 * time.Second}, ok},
			"reset":      {{Reset: true}, ok},
			"slow":       {{Delay: 300 * time.Millisecond}},
			"unknown500": {{Status: 501}},
		}))

		cases := []struct {
			user, state, attempts string
		}{
			{"ok", "SENT", "OK//200"},
			{"429", "SENT", "ERROR/PROVIDER/429 OK//200"},
			{"5xx", "GIVEN_UP", "ERROR/PROVIDER/500 ERROR/PROVIDER/502 ERROR/PROVIDER/503"},
			{"504", "GIVEN_UP", "ERROR/PROVIDER/504 ERROR/PROVIDER/504 ERROR/PROVIDER/504"},
			{"400", "FAILED", "ERROR/PROVIDER/400"},
			{"403", "FAILED", "ERROR/PROVIDER/403"},
			{"unknown500", "FAILED", "ERROR/PROVIDER/501"},
			{"timeout", "SENT", "ERROR/OTHER/0 OK//200"},
			{"reset", "SENT", "ERROR/OTHER/0 OK//200"},
			{"slow", "SENT", "OK//200"},
		}
		ids := map[string]uuid.UUID{}
		for _, c := range cases {
			p := r.accept(t, hello(c.user))
			if p.State != storage.PushInMemory {
				t.Fatalf("immediate push with room in the queue is %s, want IN_MEMORY", p.State)
			}
			ids[c.user] = p.ID
		}
		retryAfter := r.accept(t, hello("429-after"))

		for _, c := range cases {
			p := waitState(t, r.s, ids[c.user], storage.PushState(c.state))
			wantAttempts(t, p, c.attempts)
			if c.state == "SENT" && (p.TTL <= 0 || p.Owner != "") {
				t.Errorf("%s: a finished push keeps ttl %d owner %q", c.user, p.TTL, p.Owner)
			}
		}
		p := waitState(t, r.s, ids["400"], storage.PushFailed)
		if a := p.Attempts[0]; a.ProviderMessage != "No such user" || a.Millis < 0 || a.Node != "node-a" {
			t.Errorf("400 attempt %+v: want Swrve's message, the node", a)
		}
		p = waitState(t, r.s, ids["slow"], storage.PushSent)
		if p.Attempts[0].Millis < 300 {
			t.Errorf("a 300 ms answer recorded as %d ms", p.Attempts[0].Millis)
		}
		// An attempt records when the gate let it through: after it was
		// recorded, no later than Swrve received it, which is within the
		// call (one clock; each time truncated to its ms).
		p = waitState(t, r.s, ids["ok"], storage.PushSent)
		a := p.Attempts[0]
		for _, rec := range r.fake.Log() {
			if rec.User == "ok" {
				if at := rec.At.UnixMilli(); a.Called < a.Started || at < a.Called || at > a.Called+a.Millis+1 {
					t.Errorf("attempt started %d, called %d, took %d ms; Swrve received it at %d", a.Started, a.Called, a.Millis, at)
				}
			}
		}
		p = waitState(t, r.s, ids["timeout"], storage.PushSent)
		if c := p.Attempts[0].Cause; !strings.Contains(c, "Timeout") && !strings.Contains(c, "deadline") && !strings.Contains(c, "timeout") {
			t.Errorf("timeout attempt cause %q", c)
		}

		// Retry-After 3s beats the 1 s retry delay: the second attempt
		// starts no sooner than 3 s after the first ended.
		p = waitState(t, r.s, retryAfter.ID, storage.PushSent)
		first, second := p.Attempts[0], p.Attempts[1]
		if gap := second.Called - (first.Called + first.Millis); gap < 2900 {
			t.Errorf("retry %d ms after a Retry-After: 3 answer", gap)
		}
		// Every device got the right campaign's push.
		for _, rec := range r.fake.Log() {
			if rec.PushKey != keyHelloIOS || rec.Message != "Hello "+rec.User {
				t.Errorf("the fake received %+v", rec)
			}
		}
	})
}

func TestScheduledAndPending(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := newStore(t)
		// A node without workers accepts only: immediate pushes go PENDING.
		cfg := testConfig("api-only")
		cfg.Workers = false
		apiOnly := startSender(t, store, startFake(t), cfg)
		pending, err := apiOnly.Accept(context.Background(), hello("pending"))
		if err != nil || pending.State != storage.PushPending {
			t.Fatalf("accept on a node without workers: %v, state %s, want PENDING", err, pending.State)
		}
		later, err := apiOnly.Accept(context.Background(), sender.Request{Platform: "ANDROID", PrototypeKey: "Hello",
			PushKey: "later", Message: "m", CronExpression: "0 0 9 1 1 ? 2099"})
		if err != nil || later.State != storage.PushScheduled {
			t.Fatalf("accept a scheduled push: %v, %s", err, later.State)
		}
		if want := time.Date(2099, 1, 1, 9, 0, 0, 0, time.UTC).UnixMilli(); later.At != want {
			t.Fatalf("scheduled at %d, want %d (the cron window, UTC)", later.At, want)
		}

		r := newRig(t, store, testConfig("node-a"))
		soon := r.accept(t, sender.Request{Platform: "IOS", PrototypeKey: "Hello", PushKey: "soon", Message: "m",
			CronExpression: "* * * * * ?"})
		if soon.State != storage.PushScheduled {
			t.Fatalf("a push with a cron expression is %s, want SCHEDULED", soon.State)
		}
		wantAttempts(t, waitState(t, r.s, soon.ID, storage.PushSent), "OK//200")
		wantAttempts(t, waitState(t, r.s, pending.ID, storage.PushSent), "OK//200")
		if p, _ := r.s.Get(context.Background(), later.ID); p.State != storage.PushScheduled {
			t.Fatalf("a push scheduled for 2099 is %s", p.State)
		}
	})
}

func TestRequestRules(t *testing.T) {
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r := newRig(t, store, testConfig("node-a"))
	for _, c := range []struct {
		field string
		req   sender.Request
	}{
		{"platform", sender.Request{Platform: "WINDOWS", PrototypeKey: "Hello", PushKey: "u", Message: "m"}},
		{"messagePrototypeKey", sender.Request{Platform: "IOS", PrototypeKey: " ", PushKey: "u", Message: "m"}},
		{"pushKey", sender.Request{Platform: "IOS", PrototypeKey: "Hello", Message: "m"}},
		{"message", sender.Request{Platform: "IOS", PrototypeKey: "Hello", PushKey: "u", Message: strings.Repeat("é", 1025)}},
		{"cronExpression", sender.Request{Platform: "ANDROID", PrototypeKey: "Hello", PushKey: "u", Message: "m", CronExpression: "every day"}},
		// No push key for the prototype on its platform: refused now,
		// immediate or scheduled, rather than FAILED when its turn comes.
		{"messagePrototypeKey", sender.Request{Platform: "ANDROID", PrototypeKey: "Goodbye", PushKey: "u", Message: "m"}},
		{"messagePrototypeKey", sender.Request{Platform: "IOS", PrototypeKey: "Goodbye", PushKey: "u", Message: "m", CronExpression: "0 0 9 * * ?"}},
	} {
		_, err := r.s.Accept(context.Background(), c.req)
		var fe *sender.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s out of rules (%+v): got %v, want a FieldError naming it", c.field, c.req, err)
		}
		if c.req.PrototypeKey == "Goodbye" && (fe == nil || !strings.Contains(fe.Reason, `"Goodbye"`) || !strings.Contains(fe.Reason, c.req.Platform)) {
			t.Errorf("unmapped prototype: %v; want the prototype and the platform named", err)
		}
	}
	for _, state := range storage.PushStates {
		ps, _, err := r.s.List(context.Background(), state, "", 10)
		if err != nil || len(ps) != 0 {
			t.Errorf("after refused requests, %s lists %d pushes (%v)", state, len(ps), err)
		}
	}
}
