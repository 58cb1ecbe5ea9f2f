package sender_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/swrve"
	"github.com/autopush-go/autopush/storage"
)

// ourFaults is a store whose writes fail with ErrUnavailable where the
// test says: every create while createDown, the create of each user in
// storedAnyway after it is stored (a write that timed out, yet applied:
// saved records its id), the first attempt row of each user in
// attemptDown, and the first outcomeDown[user] writes of a user's
// attempt outcome. The first attempt row of each user in beginLate is
// written, and answered that much later; rows records every attempt row
// of those users.
type ourFaults struct {
	storage.Store
	mu           sync.Mutex
	createDown   bool
	storedAnyway map[string]bool
	saved        map[string]uuid.UUID
	attemptDown  map[string]bool
	outcomeDown  map[string]int
	beginLate    map[string]time.Duration
	rows         map[string][]attemptRow
}

// attemptRow is an attempt row written: when, and the lease it gave.
type attemptRow struct {
	written time.Time
	lease   int64 // ms
}

func (f *ourFaults) SavePush(ctx context.Context, p storage.Push) error {
	f.mu.Lock()
	down, anyway := f.createDown, f.storedAnyway[p.PushKey]
	f.mu.Unlock()
	if down {
		return storage.ErrUnavailable
	}
	if err := f.Store.SavePush(ctx, p); err != nil || !anyway {
		return err
	}
	f.mu.Lock()
	f.saved[p.PushKey] = p.ID
	f.mu.Unlock()
	return fmt.Errorf("a write timed out: %w", storage.ErrUnavailable)
}

func (f *ourFaults) UpdatePush(ctx context.Context, prev *storage.Push, next storage.Push) error {
	a, was := next.LastAttempt(), prev.LastAttempt()
	switch {
	case a != nil && a.Status == storage.AttemptInProcess:
		f.mu.Lock()
		down, late, watched := f.attemptDown[next.PushKey], f.beginLate[next.PushKey], f.rows != nil
		delete(f.attemptDown, next.PushKey)
		delete(f.beginLate, next.PushKey)
		f.mu.Unlock()
		if down {
			return storage.ErrUnavailable
		}
		if err := f.Store.UpdatePush(ctx, prev, next); err != nil || !watched {
			return err
		}
		f.mu.Lock()
		f.rows[next.PushKey] = append(f.rows[next.PushKey], attemptRow{written: time.Now(), lease: next.At})
		f.mu.Unlock()
		time.Sleep(late) // the answer held up: what the test simulates
		return nil
	case a != nil && was != nil && was.Status == storage.AttemptInProcess && (a.Status == storage.AttemptOK || a.Status == storage.AttemptError):
		f.mu.Lock()
		down := f.outcomeDown[next.PushKey] > 0
		if down {
			f.outcomeDown[next.PushKey]--
		}
		f.mu.Unlock()
		if down {
			return storage.ErrUnavailable
		}
	}
	return f.Store.UpdatePush(ctx, prev, next)
}

// panicky is a provider whose Send panics for the device "panic": a
// runtime error on our side while sending (error type OTHER).
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

// TestOutcomeWrittenLate: an outcome the store cannot write at first (six
// tries fail, one more than record gave up after before) is retried while
// the node's lease holds, and recorded: the push is SENT with one
// attempt and received once. Given up, it was found IN_PROCESS after the
// lease, handled as interrupted and sent a second time.
func TestOutcomeWrittenLate(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := &ourFaults{Store: newStore(t), outcomeDown: map[string]int{"late": 6}}
		r := newRig(t, store, testConfig("node-a"))
		p := waitState(t, r.s, r.accept(t, hello("late")).ID, storage.PushSent)
		wantAttempts(t, p, "OK//200")
		n := 0
		for _, rec := range r.fake.Log() {
			if rec.User == "late" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the provider received the push %d times, want once", n)
		}
		if got := counter(t, r.s, `autosender_storage_errors_total{stage="attempt"}`); got != 0 {
			t.Errorf("attempt storage errors %v, want 0: the outcome was written in the end", got)
		}
	})
}

// TestNoCallPastTheLease: a send held up after its attempt row was
// written (the write answered 8.5 s late, leaving 1.5 s of a 10 s lease,
// less than the provider's 2 s timeout) makes no call: once the lease
// expires another node may take the push over and send it as well. It is
// handed back, unsent, and sent once by a later attempt whose lease
// covers its call.
func TestNoCallPastTheLease(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := &ourFaults{Store: newStore(t), beginLate: map[string]time.Duration{"late": 8500 * time.Millisecond},
			rows: map[string][]attemptRow{}}
		r := newRig(t, store, testConfig("node-a"))
		p := waitState(t, r.s, r.accept(t, hello("late")).ID, storage.PushSent)
		wantAttempts(t, p, "OK//200") // the attempt handed back made no call
		timeout := swrveConfig("").Timeout
		store.mu.Lock()
		rows := store.rows["late"]
		store.mu.Unlock()
		calls := 0
		for _, rec := range r.fake.Log() {
			if rec.User != "late" {
				continue
			}
			calls++
			var lease int64 // of the last attempt row written before the call
			for _, row := range rows {
				if !row.written.After(rec.At) {
					lease = row.lease
				}
			}
			if left := time.UnixMilli(lease).Sub(rec.At); left < timeout {
				t.Errorf("the provider was called with %s of its attempt's lease left, less than its %s timeout", left.Round(time.Millisecond), timeout)
			}
		}
		if calls != 1 {
			t.Errorf("the provider received the push %d times, want once", calls)
		}
	})
}

// TestRefusedPushNeverSent: a create reported failed after it was stored
// (a write that timed out, yet applied) is refused (the push API answers
// 503, and the client sends it again), and the push is made FAILED, with
// the cause, instead of being taken up when its lease expires and sent:
// the client's retry would be a second send.
func TestRefusedPushNeverSent(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := &ourFaults{Store: newStore(t), storedAnyway: map[string]bool{"stored-anyway": true}, saved: map[string]uuid.UUID{}}
		r := newRig(t, store, testConfig("node-a"))
		if _, err := r.s.Accept(context.Background(), hello("stored-anyway")); !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("accept with the create failing: %v, want ErrUnavailable", err)
		}
		store.mu.Lock()
		id := store.saved["stored-anyway"]
		store.mu.Unlock()
		p := waitState(t, r.s, id, storage.PushFailed) // IN_MEMORY before: it was sent after its lease
		wantAttempts(t, p, "ERROR/OTHER/0")
		if c := p.Attempts[0].Cause; !strings.Contains(c, "503") {
			t.Errorf("the refused push's cause %q does not say it was refused", c)
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
