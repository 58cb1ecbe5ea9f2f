package apitier

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/nodeapi"
	"github.com/autopush-go/autopush/internal/owedcheck"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// fakeNode is a connection node's internal API that answers as told and
// records the calls.
type fakeNode struct {
	*httptest.Server
	mu    sync.Mutex
	calls []nodeCallRec
	push  int // status for PUT /push
	notif int // status for PUT /notif
	hook  func(call nodeCallRec)
}

type nodeCallRec struct {
	method, path, auth string
	body               []byte
}

func newFakeNode(t *testing.T, push, notif int) *fakeNode {
	f := &fakeNode{push: push, notif: notif}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c := nodeCallRec{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"), body: b}
		f.mu.Lock()
		f.calls = append(f.calls, c)
		hook, code := f.hook, f.notif
		if strings.HasPrefix(r.URL.Path, "/push/") {
			code = f.push
		}
		f.mu.Unlock()
		if hook != nil {
			hook(c)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeNode) recorded() []nodeCallRec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]nodeCallRec(nil), f.calls...)
}

// wantCalls checks the calls' methods and paths ("push", "notif").
func (f *fakeNode) wantCalls(t *testing.T, uaid string, want ...string) []nodeCallRec {
	t.Helper()
	calls := f.recorded()
	var got []string
	for _, c := range calls {
		if c.method != http.MethodPut {
			t.Fatalf("node called with %s %s", c.method, c.path)
		}
		kind, id, _ := strings.Cut(strings.TrimPrefix(c.path, "/"), "/")
		if id != uaid {
			t.Fatalf("node call %s names uaid %s, want %s", c.path, id, uaid)
		}
		got = append(got, kind)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("node calls %v, want %v", got, want)
	}
	return calls
}

func hexUAID(s sub) string { return protocol.FormatUAID(s.uaid) }

func nodeOf(t *testing.T, s *Server, u sub) string {
	t.Helper()
	rec, err := s.store.GetUser(context.Background(), u.uaid)
	et.Must(t, err, "get user")
	return rec.NodeID
}

func TestRouteDirect(t *testing.T) {
	node := newFakeNode(t, 200, 200)
	s := newServer(t, newStore(t), func(c *Config) { c.NodeSecret = "s3cret" })
	u := subscribe(t, s, node.URL, nil)
	id := wantCreated(t, s, perform(s, "POST", u.path, []byte("hello"), hdr("TTL", "60", "Topic", "t1", "Content-Encoding", "aes128gcm")...), "60")
	calls := node.wantCalls(t, hexUAID(u), "push")
	if calls[0].auth != "Bearer s3cret" {
		t.Fatalf("node call Authorization %q", calls[0].auth)
	}
	var n protocol.Notification
	et.Must(t, nodeapi.DecodeNotification(calls[0].body, &n), "decode node body")
	if n.ChannelID != u.chid.String() || n.Version != id || n.TTL != 60 || n.Topic != "t1" || n.SortKey == 0 ||
		n.Data != "aGVsbG8" || len(n.Headers) != 1 || n.Headers[0] != (protocol.Header{Name: "encoding", Value: "aes128gcm"}) ||
		time.Since(time.Unix(n.Timestamp, 0)) > time.Minute {
		t.Fatalf("node got %+v", n)
	}
	if ms := stored(t, s, u.uaid); len(ms) != 0 {
		t.Fatalf("direct delivery stored %d messages", len(ms))
	}
	// The message id names this version.
	mid, err := s.keys.ParseMessageID(id)
	et.Must(t, err, "parse message id")
	if mid.SortKey != n.SortKey || mid.Topic != "t1" || mid.UAID != u.uaid || mid.CHID != u.chid {
		t.Fatalf("message id %+v", mid)
	}
	// TTL 0 goes direct too.
	wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "0")...), "0")
	node.wantCalls(t, hexUAID(u), "push", "push")
}

// TestRouteNotHere: 404 from the node clears node_id (the client is not
// there), the message is stored, and nobody is notified.
func TestRouteNotHere(t *testing.T) {
	node := newFakeNode(t, 404, 200)
	s := newServer(t, newStore(t), nil)
	u := subscribe(t, s, node.URL, nil)
	wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), "60")
	node.wantCalls(t, hexUAID(u), "push")
	if got := nodeOf(t, s, u); got != "" {
		t.Fatalf("node_id %q not cleared", got)
	}
	if ms := stored(t, s, u.uaid); len(ms) != 1 {
		t.Fatalf("stored %d", len(ms))
	}
	// TTL 0: cleared and dropped.
	u2 := subscribe(t, s, node.URL, nil)
	wantCreated(t, s, perform(s, "POST", u2.path, nil, hdr("TTL", "0")...), "0")
	if ms := stored(t, s, u2.uaid); len(ms) != 0 || nodeOf(t, s, u2) != "" {
		t.Fatalf("TTL 0 to a client not there: stored %d, node %q", len(ms), nodeOf(t, s, u2))
	}
}

// TestRouteBusy: 503 stores and asks the node to check storage; the
// node_id stays.
func TestRouteBusy(t *testing.T) {
	node := newFakeNode(t, 503, 202)
	s := newServer(t, newStore(t), nil)
	u := subscribe(t, s, node.URL, nil)
	wantCreated(t, s, perform(s, "POST", u.path, []byte("x"), hdr("TTL", "60", "Content-Encoding", "aes128gcm")...), "60")
	calls := node.wantCalls(t, hexUAID(u), "push", "notif")
	if len(calls[1].body) != 0 {
		t.Fatalf("notif carries a body: %q", calls[1].body)
	}
	if nodeOf(t, s, u) != node.URL {
		t.Fatal("a busy node lost its node_id")
	}
	if ms := stored(t, s, u.uaid); len(ms) != 1 {
		t.Fatalf("stored %d", len(ms))
	}
	// TTL 0 and busy: dropped, not stored, no check asked.
	wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "0")...), "0")
	node.wantCalls(t, hexUAID(u), "push", "notif", "push")
	if ms := stored(t, s, u.uaid); len(ms) != 1 {
		t.Fatalf("stored %d", len(ms))
	}
}

// TestRouteUnreachable: a node that refuses connections or does not
// answer in time is treated as gone.
func TestRouteUnreachable(t *testing.T) {
	s := newServer(t, newStore(t), func(c *Config) { c.NodeTimeout = 200 * time.Millisecond })
	dead := deadURL(t)
	u := subscribe(t, s, dead, nil)
	wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), "60")
	if nodeOf(t, s, u) != "" || len(stored(t, s, u.uaid)) != 1 {
		t.Fatalf("dead node: node %q, stored %d", nodeOf(t, s, u), len(stored(t, s, u.uaid)))
	}

	hang := make(chan struct{})
	slow := newFakeNode(t, 200, 200)
	slow.hook = func(nodeCallRec) { <-hang }
	defer close(hang)
	u = subscribe(t, s, slow.URL, nil)
	start := time.Now()
	wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), "60")
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a hanging node held the push for %v", d)
	}
	if nodeOf(t, s, u) != "" || len(stored(t, s, u.uaid)) != 1 {
		t.Fatal("hanging node: not cleared and stored")
	}

	// A node_id that is not even a URL is unreachable too.
	u = subscribe(t, s, "not a url", nil)
	wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), "60")
	if nodeOf(t, s, u) != "" {
		t.Fatal("bad node_id not cleared")
	}
}

// deadURL is an http URL on 127.0.0.1 where nothing listens.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	et.Must(t, err, "listen")
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestRouteReconnected: the client moved to another node between the
// endpoint's read and its store. The clear does not touch the new
// record, and the new node is told to check storage.
func TestRouteReconnected(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	newNode := newFakeNode(t, 200, 200)
	oldNode := newFakeNode(t, 404, 200)
	u := subscribe(t, s, oldNode.URL, nil)
	oldNode.hook = func(c nodeCallRec) {
		// While the old node answers "not here", the client connects to
		// the new one.
		et.Must(t, s.store.Connect(context.Background(), storage.User{UAID: u.uaid, RouterType: storage.RouterWebPush,
			NodeID: newNode.URL, ConnectedAt: time.Now().UnixMilli() + 5}), "reconnect")
	}
	wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), "60")
	oldNode.wantCalls(t, hexUAID(u), "push")
	newNode.wantCalls(t, hexUAID(u), "notif")
	if got := nodeOf(t, s, u); got != newNode.URL {
		t.Fatalf("node_id %q, want the new node's", got)
	}
	if len(stored(t, s, u.uaid)) != 1 {
		t.Fatal("not stored")
	}
}

// TestRouteUserDeleted: the user vanished while the push was routed:
// 410 errno 105.
func TestRouteUserDeleted(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	node := newFakeNode(t, 404, 200)
	u := subscribe(t, s, node.URL, nil)
	node.hook = func(nodeCallRec) { s.store.DropUser(context.Background(), u.uaid) }
	wantError(t, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), http.StatusGone, errno.EndpointUnavailable)
}

// TestRouteNodeRefuses: a node answering something else (401: a wrong
// node-secret) keeps its node_id; the message is stored.
func TestRouteNodeRefuses(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	node := newFakeNode(t, 401, 401)
	u := subscribe(t, s, node.URL, nil)
	wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), "60")
	node.wantCalls(t, hexUAID(u), "push", "notif")
	if nodeOf(t, s, u) != node.URL || len(stored(t, s, u.uaid)) != 1 {
		t.Fatal("refusing node: want node kept and message stored")
	}
}

// failingStore wraps a store and fails chosen calls with ErrUnavailable.
type failingStore struct {
	storage.Store
	mu   sync.Mutex
	fail map[string]bool
}

func (f *failingStore) set(op string, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		f.fail = map[string]bool{}
	}
	f.fail[op] = fail
}

func (f *failingStore) err(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[op] {
		return storage.ErrUnavailable
	}
	return nil
}

func (f *failingStore) GetUser(ctx context.Context, uaid uuid.UUID) (storage.User, error) {
	if err := f.err("GetUser"); err != nil {
		return storage.User{}, err
	}
	return f.Store.GetUser(ctx, uaid)
}

// Subscription fails with GetUser: it is the push's router record read.
func (f *failingStore) Subscription(ctx context.Context, uaid, chid uuid.UUID) (storage.User, bool, error) {
	if err := f.err("GetUser"); err != nil {
		return storage.User{}, false, err
	}
	return f.Store.Subscription(ctx, uaid, chid)
}

func (f *failingStore) SaveMessage(ctx context.Context, uaid uuid.UUID, m storage.Message) error {
	if err := f.err("SaveMessage"); err != nil {
		return err
	}
	return f.Store.SaveMessage(ctx, uaid, m)
}

func (f *failingStore) DeleteMessage(ctx context.Context, uaid uuid.UUID, k storage.MessageKey) error {
	if err := f.err("DeleteMessage"); err != nil {
		return err
	}
	return f.Store.DeleteMessage(ctx, uaid, k)
}

func (f *failingStore) Health(ctx context.Context) error {
	if err := f.err("Health"); err != nil {
		return err
	}
	return f.Store.Health(ctx)
}

// TestRouteOwesTheCheckWhenTheReReadFails: the client reconnected to
// another node while the push was routed, and the read after the store
// that would name that node fails. The push is stored (201), and the new
// node is told to check storage once the read succeeds again; without it
// the connected client would not see the message until it reconnects.
func TestRouteOwesTheCheckWhenTheReReadFails(t *testing.T) {
	fs := &failingStore{Store: newStore(t)}
	s := startServer(t, fs, nil)
	newNode := newFakeNode(t, 200, 200)
	oldNode := newFakeNode(t, 404, 200)
	u := subscribe(t, s, oldNode.URL, nil)
	oldNode.hook = func(nodeCallRec) {
		et.Must(t, fs.Store.Connect(context.Background(), storage.User{UAID: u.uaid, RouterType: storage.RouterWebPush,
			NodeID: newNode.URL, ConnectedAt: time.Now().UnixMilli() + 5}), "reconnect")
		fs.set("GetUser", true) // the store flaps: reads fail from here
	}
	wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), "60")
	if len(stored(t, s, u.uaid)) != 1 {
		t.Fatal("not stored")
	}
	if n := len(newNode.recorded()); n != 0 || s.owed.Len() != 1 {
		t.Fatalf("new node called %d times, %d checks owed: want none yet, one owed", n, s.owed.Len())
	}
	fs.set("GetUser", false)
	for deadline := time.Now().Add(30 * time.Second); len(newNode.recorded()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new node was never told to check storage")
		}
	}
	newNode.wantCalls(t, hexUAID(u), "notif")
	for s.owed.Len() != 0 || s.owed.Ended(owedcheck.Paid) != 1 {
		time.Sleep(time.Millisecond) // the notif is made before the check is counted paid
	}
	var b bytes.Buffer
	s.writeMetrics(&b)
	body := b.String()
	for _, want := range []string{"autoendpoint_checks_owed 0", `autoendpoint_checks_owed_total{end="paid"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
