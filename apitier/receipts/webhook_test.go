package receipts

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/receiptwire"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// testNode is the endpoint node the dispatcher runs on; it only times
// storage calls.
type testNode struct{}

func (testNode) VAPIDKey(*app.RequestContext) ([32]byte, *errno.HTTPError) { return [32]byte{}, nil }
func (testNode) Timed(call func() error) error                             { return call() }
func (testNode) StorageError(string, error) *errno.HTTPError               { return nil }
func (testNode) Draining() bool                                            { return false }

// hookStore is a real embedded store for the dispatcher to read.
func hookStore(t *testing.T) *embedded.Store {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: log})
	et.Must(t, err, "open the embedded store")
	t.Cleanup(func() { s.Close() })
	return s
}

// hookSub creates a subscription with webhook url (its id's first byte
// is first, which orders the dispatcher's listing) holding one
// receipt: a delivered message. Returns the subscription and the
// message id.
func hookSub(t *testing.T, s storage.Store, first byte, url string) (storage.ReceiptSub, string) {
	t.Helper()
	ctx := context.Background()
	sub := storage.ReceiptSub{Webhook: url, WebhookSecret: newSecret(), Created: time.Now()}
	copy(sub.ID[:], uuid.New().NodeID()) // random tail
	sub.ID[0] = first
	et.Must(t, s.PutReceiptSub(ctx, sub), "put the subscription")
	mid := "m-" + uuid.NewString()
	f := storage.Fate{UAID: uuid.New(), ID: storage.NewFateID(mid), CHID: uuid.New(), MessageID: mid,
		Expiry: time.Now().Add(time.Hour).Truncate(time.Millisecond), Receipt: sub.ID, State: storage.FateReceived}
	et.Must(t, s.Track(ctx, f), "track")
	if ok, err := s.Settle(ctx, f.UAID, f.ID, storage.FateDelivered, storage.DropNone); err != nil || !ok {
		t.Fatalf("settle: %v %v", ok, err)
	}
	return sub, mid
}

func pending(t *testing.T, s storage.Store, sub storage.ReceiptSubID) int {
	t.Helper()
	got, err := s.Receipts(context.Background(), sub, 10)
	et.Must(t, err, "read receipts")
	return len(got)
}

// hookCfg is webhooks on, fast, with the given timeout.
func hookCfg(timeout time.Duration) Config {
	return Config{Enabled: true, EndpointURL: "http://push.test", StorageTimeout: 5 * time.Second,
		Webhooks: true, WebhookInsecure: true, WebhookInterval: 20 * time.Millisecond, WebhookTimeout: timeout,
		WebhookBackoff: 100 * time.Millisecond, WebhookBackoffMax: 400 * time.Millisecond}
}

// trip is one webhook round trip as the dispatcher's client made it.
type trip struct {
	start, end time.Time
	err        error
}

// tripLog records the round trips of the client it wraps.
type tripLog struct {
	next  http.RoundTripper
	mu    sync.Mutex
	trips []trip
}

func (l *tripLog) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := l.next.RoundTrip(r)
	l.mu.Lock()
	l.trips = append(l.trips, trip{start, time.Now(), err})
	l.mu.Unlock()
	return resp, err
}

func (l *tripLog) snapshot() []trip {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]trip(nil), l.trips...)
}

// TestWebhookTimeoutAndBackoff: a webhook that never answers is cut off
// by WebhookTimeout and tried again only after a backoff that doubles
// from WebhookBackoff and stops at WebhookBackoffMax; once it answers
// 2xx its receipt is acknowledged and the backoff forgotten.
func TestWebhookTimeoutAndBackoff(t *testing.T) {
	var answer atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read it all, so that the server sees the caller hang up
		if answer.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		<-r.Context().Done() // never answers: the caller must give up
	}))
	t.Cleanup(srv.Close)
	s := hookStore(t)
	sub, _ := hookSub(t, s, 1, srv.URL)
	const timeout = 100 * time.Millisecond
	a := New(hookCfg(timeout), s, testNode{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	log := &tripLog{}
	a.wrapHooks = func(next http.RoundTripper) http.RoundTripper { log.next = next; return log }
	a.Start()
	t.Cleanup(a.Stop)

	const tries = 5
	et.Eventually(t, et.Patience, "five POSTs to the hung webhook", func() bool { return len(log.snapshot()) >= tries })
	trips := log.snapshot()
	// Each hung POST ended unanswered, cut off by the timeout (its clock
	// starts a moment before the round trip: half of it is a safe floor).
	for i, tr := range trips[:tries] {
		if took := tr.end.Sub(tr.start); tr.err == nil || took < timeout/2 {
			t.Errorf("POST %d ended after %v with %v; want it cut off by the %v timeout", i, took, tr.err, timeout)
		}
	}
	// After failure i the next POST waits the backoff: 100, 200, 400
	// (the cap), 400 ms.
	for i, b := range []time.Duration{100, 200, 400, 400} {
		if gap := trips[i+1].start.Sub(trips[i].end); gap < b*time.Millisecond {
			t.Errorf("POST %d came %v after POST %d failed; want at least the %v backoff", i+1, gap, i, b*time.Millisecond)
		}
	}
	et.Eventually(t, et.Patience, "the backoff to stay at its 400ms cap", func() bool {
		a.hooks.mu.Lock()
		defer a.hooks.mu.Unlock()
		return a.hooks.wait[sub.ID].delay == 400*time.Millisecond
	})
	answer.Store(true)
	et.Eventually(t, et.Patience, "the receipt to be acknowledged once the webhook answers", func() bool {
		return pending(t, s, sub.ID) == 0
	})
	et.Eventually(t, et.Patience, "the backoff to be forgotten", func() bool {
		a.hooks.mu.Lock()
		defer a.hooks.mu.Unlock()
		_, waiting := a.hooks.wait[sub.ID]
		return !waiting
	})
}

// TestWebhookSlowDoesNotHoldOthers: a webhook that never answers holds
// one worker; another subscription's webhook, listed after it, still
// gets its receipt while the first POST hangs, and Stop cuts the hung
// POST off, leaving its receipt unacknowledged.
func TestWebhookSlowDoesNotHoldOthers(t *testing.T) {
	release := make(chan struct{})
	hung := make(chan struct{}, 10)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		hung <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	var mu sync.Mutex
	var took []string
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body receiptwire.List
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rc := range body.Receipts {
			took = append(took, rc.MessageID)
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(fast.Close)
	s := hookStore(t)
	slowSub, _ := hookSub(t, s, 0x00, slow.URL) // listed first
	fastSub, mid := hookSub(t, s, 0xff, fast.URL)
	a := New(hookCfg(time.Hour), s, testNode{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a.Start()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			a.Stop()
		}
	})
	select {
	case <-hung:
	case <-time.After(et.Patience):
		t.Fatal("the slow webhook was never called")
	}
	et.Eventually(t, et.Patience, "the other webhook's receipt while the slow POST hangs", func() bool {
		return pending(t, s, fastSub.ID) == 0
	})
	mu.Lock()
	if len(took) != 1 || took[0] != mid {
		t.Errorf("the fast webhook took %v, want [%s]", took, mid)
	}
	mu.Unlock()
	// The hung POST is still open (its timeout is an hour); Stop ends it.
	a.Stop()
	stopped = true
	if n := pending(t, s, slowSub.ID); n != 1 {
		t.Errorf("the slow webhook's subscription has %d receipts left after Stop, want 1 (never taken)", n)
	}
}
