package sender_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/sender"
	"github.com/autopush-go/autopush/apitier/sender/provider"
	"github.com/autopush-go/autopush/apitier/sender/swrve"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/storage"
)

// ourFaults is a store whose writes fail with ErrUnavailable where the
// test says: every create while createDown, and the first attempt row of
// each user in attemptDown.
type ourFaults struct {
	storage.Store
	mu          sync.Mutex
	createDown  bool
	attemptDown map[string]bool
}

func (f *ourFaults) SavePush(ctx context.Context, p storage.Push) error {
	f.mu.Lock()
	down := f.createDown
	f.mu.Unlock()
	if down {
		return storage.ErrUnavailable
	}
	return f.Store.SavePush(ctx, p)
}

func (f *ourFaults) UpdatePush(ctx context.Context, prev *storage.Push, next storage.Push) error {
	if a := next.LastAttempt(); a != nil && a.Status == storage.AttemptInProcess {
		f.mu.Lock()
		down := f.attemptDown[next.PushKey]
		delete(f.attemptDown, next.PushKey)
		f.mu.Unlock()
		if down {
			return storage.ErrUnavailable
		}
	}
	return f.Store.UpdatePush(ctx, prev, next)
}

// panicky is a provider whose Send panics for the device "panic": a
// runtime error on our side while sending (the seed's OTHER).
type panicky struct{ provider.Provider }

func (p panicky) Send(ctx context.Context, n *provider.Notification) provider.Result {
	if n.Token == "panic" {
		panic("the provider client broke")
	}
	return p.Provider.Send(ctx, n)
}

// counter reads one series of the sender's metrics.
func counter(t *testing.T, s *sender.Sender, series string) float64 {
	t.Helper()
	var b bytes.Buffer
	s.WriteMetrics(&b)
	m, err := promtext.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	return m[series]
}

// TestFailuresOnOurSide: the error classes that are not the provider's.
// Storage down at POST: an error, nothing stored, counted
// (notStoredExceptionWhileReceiving). A runtime error while sending:
// FAILED, OTHER, with the cause. The attempt row not written: nothing
// sent, counted (notStoredExceptionWhileAttempt), and the push, IN_MEMORY
// under this node's lease, is taken back when the lease expires and sent.
func TestFailuresOnOurSide(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := &ourFaults{Store: newStore(t), attemptDown: map[string]bool{"flaky": true}}
		fake := startFake(t)
		keys := swrve.NewKeys(map[string]map[string]string{"Hello": {"IOS": keyHelloIOS, "ANDROID": keyHelloAndroid}})
		client, err := swrve.New(swrveConfig(fake.URL()), keys)
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig("node-a") // a 10 s lease: the shortest allowed
		s, err := sender.New(cfg, store, []provider.Provider{panicky{client}}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Stop(context.Background()) })
		<-s.Ready()
		r := &rig{s: s, fake: fake}

		store.mu.Lock()
		store.createDown = true
		store.mu.Unlock()
		if _, err := s.Accept(context.Background(), hello("lost")); !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("accept with storage down: %v, want ErrUnavailable", err)
		}
		if n := counter(t, s, `autosender_storage_errors_total{stage="receive"}`); n != 1 {
			t.Errorf("receive storage errors %v, want 1", n)
		}
		store.mu.Lock()
		store.createDown = false
		store.mu.Unlock()
		for _, st := range []storage.PushState{storage.PushInMemory, storage.PushPending, storage.PushScheduled} {
			if ps, _, err := s.List(context.Background(), st, "", 100); err != nil || len(ps) != 0 {
				t.Fatalf("%s after a refused accept: %d pushes, %v", st, len(ps), err)
			}
		}

		broken := r.accept(t, hello("panic"))
		p := waitState(t, s, broken.ID, storage.PushFailed)
		wantAttempts(t, p, "ERROR/OTHER/0")
		if c := p.Attempts[0].Cause; !strings.Contains(c, "the provider client broke") {
			t.Errorf("a runtime error's attempt has cause %q", c)
		}

		flaky := r.accept(t, hello("flaky"))
		p = waitState(t, s, flaky.ID, storage.PushSent)
		wantAttempts(t, p, "OK//200") // the attempt not written was never made
		if n := counter(t, s, `autosender_storage_errors_total{stage="attempt"}`); n != 1 {
			t.Errorf("attempt storage errors %v, want 1", n)
		}
		for _, rec := range fake.Log() {
			if rec.User == "panic" || rec.User == "lost" {
				t.Errorf("the provider received %s", rec.User)
			}
		}
	})
}

// dedupSwrve is the Swrve client declared to collapse repeats by
// Notification.ID, as FCM's collapse key and APNs' apns-collapse-id do;
// it records the id of every call.
type dedupSwrve struct {
	provider.Provider
	mu  sync.Mutex
	ids map[string][]string // by device
}

func (d *dedupSwrve) Limits() provider.Limits {
	l := d.Provider.Limits()
	l.Dedup = true
	return l
}

func (d *dedupSwrve) Send(ctx context.Context, n *provider.Notification) provider.Result {
	d.mu.Lock()
	d.ids[n.Token] = append(d.ids[n.Token], n.ID)
	d.mu.Unlock()
	return d.Provider.Send(ctx, n)
}

// TestInterruptedWithDedupKey: with a provider that collapses repeats,
// each attempt records the push id as its dedup key and the provider is
// called with it; a push interrupted in flight is sent again with the same
// key (the device shows it once), even under sender-interrupted=fail,
// which only applies to providers without one.
func TestInterruptedWithDedupKey(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := newStore(t)
		inflight := orphan(t, store, "dead", "inflight", -time.Second, true)
		fake := startFake(t)
		keys := swrve.NewKeys(map[string]map[string]string{"Hello": {"IOS": keyHelloIOS, "ANDROID": keyHelloAndroid}})
		client, err := swrve.New(swrveConfig(fake.URL()), keys)
		if err != nil {
			t.Fatal(err)
		}
		d := &dedupSwrve{Provider: client, ids: map[string][]string{}}
		cfg := testConfig("node-a")
		cfg.Interrupted = sender.PolicyFail
		s, err := sender.New(cfg, store, []provider.Provider{d}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Stop(context.Background()) })
		<-s.Ready()
		fresh, err := s.Accept(context.Background(), hello("fresh"))
		if err != nil {
			t.Fatal(err)
		}
		p := waitState(t, s, inflight.ID, storage.PushSent)
		wantAttempts(t, p, "INTERRUPTED/OTHER/0 OK//200")
		if k := p.Attempts[1].DedupKey; k != inflight.ID.String() {
			t.Errorf("the resend's dedup key %q, want the push id %s", k, inflight.ID)
		}
		q := waitState(t, s, fresh.ID, storage.PushSent)
		if k := q.Attempts[0].DedupKey; k != fresh.ID.String() {
			t.Errorf("an attempt's dedup key %q, want the push id %s", k, fresh.ID)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if got := d.ids["inflight"]; len(got) != 1 || got[0] != inflight.ID.String() {
			t.Errorf("the provider was called for the interrupted push with ids %q, want its id once", got)
		}
		if got := d.ids["fresh"]; len(got) != 1 || got[0] != fresh.ID.String() {
			t.Errorf("the provider was called with ids %q, want the push id", got)
		}
	})
}
