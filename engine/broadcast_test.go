package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/protocol"
)

// fakeMegaphone speaks Megaphone's read API (GET /v1/broadcasts with a
// bearer token, {"code":200,"broadcasts":{...}}) on 127.0.0.1, and can be
// made to fail.
type fakeMegaphone struct {
	*httptest.Server
	mu       sync.Mutex
	versions map[string]string
	fail     int    // answer this status instead (0: serve)
	garbage  bool   // answer 200 with a body that is not the API's
	auth     string // the last Authorization header
	polls    atomic.Int64
}

func newFakeMegaphone(t *testing.T, versions map[string]string) *fakeMegaphone {
	m := &fakeMegaphone{versions: versions}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.polls.Add(1)
		m.auth = r.Header.Get("Authorization")
		switch {
		case r.Method != http.MethodGet || r.URL.Path != "/v1/broadcasts":
			http.NotFound(w, r)
		case m.auth != "Bearer reader-token":
			w.WriteHeader(http.StatusUnauthorized)
		case m.fail != 0:
			w.WriteHeader(m.fail)
		case m.garbage:
			w.Write([]byte(`<html>maintenance</html>`))
		default:
			json.NewEncoder(w).Encode(map[string]any{"code": 200, "broadcasts": m.versions})
		}
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *fakeMegaphone) set(id, version string) {
	m.mu.Lock()
	m.versions[id] = version
	m.mu.Unlock()
}

func (m *fakeMegaphone) failWith(status int, garbage bool) {
	m.mu.Lock()
	m.fail, m.garbage = status, garbage
	m.mu.Unlock()
}

func megaphoneNode(t *testing.T, m *fakeMegaphone) *engine.Server {
	srv, _ := node(t, func(c *engine.Config) {
		c.MegaphoneAPIURL = m.URL + "/v1/broadcasts"
		c.MegaphoneAPIToken = "reader-token"
		c.MegaphonePollInterval = 100 * time.Millisecond
	})
	return srv
}

// readBroadcast waits for the next message, which must be a broadcast.
func readBroadcast(t *testing.T, c *et.Client) map[string]any {
	t.Helper()
	r := c.Read()
	if r["messageType"] != "broadcast" {
		t.Fatalf("got %v, want a broadcast message", r)
	}
	return r["broadcasts"].(map[string]any)
}

func TestBroadcastsFromMegaphone(t *testing.T) {
	const rs = "remote-settings/monitor_changes"
	m := newFakeMegaphone(t, map[string]string{rs: `"1700000000001"`, "test/other": "v1"})
	srv := megaphoneNode(t, m)
	m.mu.Lock()
	auth := m.auth
	m.mu.Unlock()
	if auth != "Bearer reader-token" {
		t.Fatalf("the poll sent Authorization %q", auth)
	}

	// hello: a stale id (answered with its version), a current one
	// (nothing), an unknown one (the reference's error).
	c := et.Dial(t, srv.Addr())
	r := c.HelloBroadcasts("", map[string]string{rs: `"1600000000000"`, "test/other": "v1", "no/such": "v0"})
	b := r["broadcasts"].(map[string]any)
	errs, _ := b["errors"].(map[string]any)
	if b[rs] != `"1700000000001"` || b["test/other"] != nil || errs["no/such"] != protocol.BroadcastNotFound || len(b) != 2 {
		t.Fatalf("hello broadcasts %v", b)
	}
	// Another client follows only test/other, a third nothing.
	other := et.Dial(t, srv.Addr())
	other.HelloBroadcasts("", map[string]string{"test/other": "v1"})
	none := et.Dial(t, srv.Addr())
	none.Hello("")

	// A change reaches the subscribed clients, once.
	m.set(rs, `"1700000000002"`)
	if b := readBroadcast(t, c); b[rs] != `"1700000000002"` || len(b) != 1 {
		t.Fatalf("broadcast %v", b)
	}
	m.set("test/other", "v2")
	if b := readBroadcast(t, c); b["test/other"] != "v2" || len(b) != 1 {
		t.Fatalf("broadcast %v", b)
	}
	if b := readBroadcast(t, other); b["test/other"] != "v2" || len(b) != 1 {
		t.Fatalf("other's broadcast %v", b)
	}
	// Nothing was repeated, and the client that follows nothing got
	// nothing: each one's next message is its register reply.
	for _, cl := range []*et.Client{c, other, none} {
		cl.Barrier()
	}
	if v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_broadcasts_sent_total"); v != 3 {
		t.Fatalf("autoconnect_broadcasts_sent_total %v, want 3", v)
	}

	// broadcast_subscribe adds an id that appears later... (unknown ids
	// are not subscribed, as in the reference: answered, not followed)
	m.set("late/one", "v1")
	et.Eventually(t, 10*time.Second, "the new id to be polled", func() bool {
		v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_broadcast_ids")
		return v == 3
	})
	none.Send(map[string]any{"messageType": "broadcast_subscribe", "broadcasts": map[string]string{"late/one": "v0", "no/such": "v0"}})
	b = readBroadcast(t, none)
	errs, _ = b["errors"].(map[string]any)
	if b["late/one"] != "v1" || errs["no/such"] != protocol.BroadcastNotFound {
		t.Fatalf("subscribe answer %v", b)
	}
	m.set("late/one", "v2")
	if b := readBroadcast(t, none); b["late/one"] != "v2" || len(b) != 1 {
		t.Fatalf("after subscribe %v", b)
	}
}

// TestMegaphonePollFailures: a failing Megaphone (an error status, a body
// that is not its API, no answer at all) keeps the last versions and is
// counted; polls resume when it recovers.
func TestMegaphonePollFailures(t *testing.T) {
	m := newFakeMegaphone(t, map[string]string{"a/b": "v1"})
	srv := megaphoneNode(t, m)
	errors := func() float64 {
		v, _ := et.Metric(t, srv.NodeURL(), `autoconnect_broadcast_polls_total{result="error"}`)
		return v
	}
	for _, f := range []struct {
		status  int
		garbage bool
	}{{500, false}, {0, true}, {401, false}} {
		before := errors()
		m.failWith(f.status, f.garbage)
		et.Eventually(t, 10*time.Second, "a failed poll to be counted", func() bool { return errors() > before })
		c := et.Dial(t, srv.Addr())
		if b := c.HelloBroadcasts("", map[string]string{"a/b": "v0"})["broadcasts"].(map[string]any); b["a/b"] != "v1" {
			t.Fatalf("after a failed poll (%d, garbage %v) the versions were lost: %v", f.status, f.garbage, b)
		}
		c.Close()
	}
	// Megaphone unreachable.
	before := errors()
	m.Close()
	et.Eventually(t, 10*time.Second, "an unreachable Megaphone to be counted", func() bool { return errors() > before })

	// A node whose Megaphone is down at start still starts, knowing none.
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	srv2, _ := node(t, func(c *engine.Config) {
		c.MegaphoneAPIURL = down.URL
		c.MegaphonePollInterval = time.Hour
	})
	c := et.Dial(t, srv2.Addr())
	b := c.HelloBroadcasts("", map[string]string{"a/b": "v0"})["broadcasts"].(map[string]any)
	if errs, _ := b["errors"].(map[string]any); errs["a/b"] != protocol.BroadcastNotFound {
		t.Fatalf("no versions known: %v", b)
	}
	if v, _ := et.Metric(t, srv2.NodeURL(), `autoconnect_broadcast_polls_total{result="error"}`); v != 1 {
		t.Fatalf("the failed first poll counted %v", v)
	}
}

// TestBroadcastsFromStorage: without a Megaphone URL the nodes poll
// storage, where the API tier's publish route writes; every node on the
// store sees the same versions.
func TestBroadcastsFromStorage(t *testing.T) {
	store := newStore(t)
	ctx := context.Background()
	et.Must(t, store.PutBroadcast(ctx, "rs/monitor", "v1"), "put")
	cfg := et.Config()
	cfg.MegaphonePollInterval = 100 * time.Millisecond
	nodes := []*engine.Server{et.Start(t, store, cfg), et.Start(t, store, cfg)}
	var clients []*et.Client
	for _, n := range nodes {
		c := et.Dial(t, n.Addr())
		b := c.HelloBroadcasts("", map[string]string{"rs/monitor": "v0"})["broadcasts"].(map[string]any)
		if b["rs/monitor"] != "v1" {
			t.Fatalf("hello on %s: %v", n.Addr(), b)
		}
		clients = append(clients, c)
	}
	et.Must(t, store.PutBroadcast(ctx, "rs/monitor", "v2"), "put")
	for i, c := range clients {
		if b := readBroadcast(t, c); b["rs/monitor"] != "v2" {
			t.Fatalf("node %d: %v", i, b)
		}
	}
	for i, n := range nodes {
		if v, _ := et.Metric(t, n.NodeURL(), "autoconnect_broadcast_changes_total"); v != 1 {
			t.Fatalf("node %d counted %v changes", i, v)
		}
	}
}

// TestBroadcastFanOut: a change reaches every one of many subscribed
// clients exactly once, across the loops and batches, while a client that
// hellos during the fan-out gets the new version once too.
func TestBroadcastFanOut(t *testing.T) {
	const clients = 600
	store := newStore(t)
	ctx := context.Background()
	et.Must(t, store.PutBroadcast(ctx, "rs/monitor", "v1"), "put")
	cfg := et.Config()
	cfg.MegaphonePollInterval = 100 * time.Millisecond
	cfg.BroadcastBatch = 7 // many batches per loop
	cfg.EventLoops = 3
	srv := et.Start(t, store, cfg)
	var cs []*et.Client
	for range clients {
		c := et.Dial(t, srv.Addr())
		c.HelloBroadcasts("", map[string]string{"rs/monitor": "v1"})
		cs = append(cs, c)
	}
	et.Must(t, store.PutBroadcast(ctx, "rs/monitor", "v2"), "put")
	late := et.Dial(t, srv.Addr())
	lateHello := late.HelloBroadcasts("", map[string]string{"rs/monitor": "v1"})["broadcasts"].(map[string]any)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, code, err := c.Next(20 * time.Second)
			if err != nil {
				errs <- fmt.Errorf("client %d: %v (close %d)", i, err, code)
				return
			}
			var m map[string]any
			json.Unmarshal([]byte(text), &m)
			if b, _ := m["broadcasts"].(map[string]any); m["messageType"] != "broadcast" || b["rs/monitor"] != "v2" || len(b) != 1 {
				errs <- fmt.Errorf("client %d got %s", i, text)
			}
		}()
	}
	// The late client hears of v2 once: in its hello reply, or else from
	// the fan-out.
	if lateHello["rs/monitor"] != "v2" {
		if b := readBroadcast(t, late); b["rs/monitor"] != "v2" {
			t.Fatalf("late client: %v", b)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	et.Settle(t, srv.NodeURL())
	for _, c := range append(cs, late) {
		c.Barrier() // fails on a broadcast repeated to anyone
	}
	if v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_broadcast_subscriptions"); v != 1 {
		t.Fatalf("%v distinct subscriptions for %d identical clients, want 1", v, clients+1)
	}
}
