package sender_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

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
