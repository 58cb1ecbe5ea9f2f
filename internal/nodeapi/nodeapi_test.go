package nodeapi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/protocol"
)

// fakeNode answers the API's calls with fixed statuses and records them.
type fakeNode struct {
	mu       sync.Mutex
	status   int
	delivers []protocol.Notification
	expects  []int64 // each Deliver's connectedAt
	checks   [][16]byte
	drops    []int64
}

func (f *fakeNode) Deliver(uaid [16]byte, n *protocol.Notification, connectedAt int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delivers = append(f.delivers, n.Clone())
	f.expects = append(f.expects, connectedAt)
	return f.status
}

func (f *fakeNode) Check(uaid [16]byte) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks = append(f.checks, uaid)
	return f.status
}

func (f *fakeNode) Drop(uaid [16]byte, connectedAt int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drops = append(f.drops, connectedAt)
	return f.status
}

// serve runs the API's routes for node on 127.0.0.1:0.
func serve(t *testing.T, node Node, cfg ServerConfig) string {
	t.Helper()
	mux := http.NewServeMux()
	for _, r := range Routes(node, cfg) {
		mux.HandleFunc(r.Pattern, r.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

type observed struct {
	call   Call
	status int
	err    error
}

func TestClientAndServer(t *testing.T) {
	node := &fakeNode{status: StatusDelivered}
	var unauthorized int
	url := serve(t, node, ServerConfig{Secret: "s3cret", MaxBody: 4096, Unauthorized: func() { unauthorized++ }})
	var seen []observed
	var mu sync.Mutex
	c := NewClient(ClientConfig{Secret: "s3cret", Observe: func(call Call, status int, err error, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, observed{call, status, err})
	}})
	defer c.CloseIdle()
	ctx := context.Background()
	uaid := [16]byte(uuid.New())
	n := protocol.Notification{ChannelID: uuid.NewString(), Version: "v1", TTL: 60, Topic: "t", Data: "ZGF0YQ",
		SortKey: 42, Headers: []protocol.Header{{Name: "encoding", Value: "aes128gcm"}}}

	code, err := c.Push(ctx, url, uaid, &n, 0)
	if err != nil || code != StatusDelivered {
		t.Fatalf("push: %d %v", code, err)
	}
	if len(node.delivers) != 1 || node.delivers[0].Version != "v1" || node.delivers[0].Headers[0].Value != "aes128gcm" ||
		node.expects[0] != 0 {
		t.Fatalf("node got %+v, connected_at %v", node.delivers, node.expects)
	}
	// A push naming its connection (a cached route) carries it; the
	// node's 409 reaches the caller.
	node.status = StatusStale
	if code, err := c.Push(ctx, url, uaid, &n, 1700000000123); err != nil || code != StatusStale ||
		node.expects[1] != 1700000000123 {
		t.Fatalf("push with connected_at: %d %v, node got %v", code, err, node.expects)
	}
	node.delivers, node.expects = node.delivers[:1], node.expects[:1]
	seen = seen[:1]
	node.status = StatusCheckLater
	if code, err := c.Notif(ctx, url, uaid); err != nil || code != StatusCheckLater {
		t.Fatalf("notif: %d %v", code, err)
	}
	node.status = StatusDropped
	if code, err := c.Drop(ctx, url, uaid, 1234); err != nil || code != StatusDropped || node.drops[0] != 1234 {
		t.Fatalf("drop: %d %v %v", code, err, node.drops)
	}
	if len(seen) != 3 || seen[0].call != CallPush || seen[1].call != CallNotif || seen[2].call != CallDrop || seen[1].status != 202 {
		t.Fatalf("observed %+v", seen)
	}

	// Wrong or missing secret: 401, the node is not asked.
	for _, secret := range []string{"", "wrong"} {
		bad := NewClient(ClientConfig{Secret: secret})
		if code, err := bad.Push(ctx, url, uaid, &n, 0); err != nil || code != http.StatusUnauthorized {
			t.Fatalf("secret %q: %d %v", secret, code, err)
		}
	}
	if unauthorized != 2 || len(node.delivers) != 1 {
		t.Fatalf("unauthorized %d, delivers %d", unauthorized, len(node.delivers))
	}

	// Bad input: 400, the node is not asked.
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPut, "/push/not-a-uaid", string(AppendNotification(nil, &n))},
		{http.MethodPut, "/push/" + uuid.NewString(), "{not json"},
		{http.MethodPut, "/push/" + uuid.NewString(), `{"version":"v"}`},
		{http.MethodPut, "/notif/nope", ""},
		{http.MethodDelete, "/notif/" + uuid.NewString() + "/yesterday", ""},
	} {
		req, _ := http.NewRequest(tc.method, url+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s %s: %v %v, want 400", tc.method, tc.path, resp.StatusCode, err)
		}
		resp.Body.Close()
	}
	if len(node.delivers) != 1 || len(node.checks) != 1 || len(node.drops) != 1 {
		t.Fatal("bad input reached the node")
	}
}

func TestClientUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	var gotErr error
	c := NewClient(ClientConfig{Timeout: 2 * time.Second, Observe: func(_ Call, _ int, err error, _ time.Duration) { gotErr = err }})
	if _, err := c.Notif(context.Background(), url, [16]byte(uuid.New())); err == nil || gotErr == nil {
		t.Fatalf("call to a closed port: %v (observed %v), want an error", err, gotErr)
	}
}

// TestAuthorizedNeedsTheSecret: without a configured secret nobody is
// served, loopback callers included (any local process could inject).
func TestAuthorizedNeedsTheSecret(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:5000", "[::1]:5000", "10.0.0.8:5000", "garbage"} {
		r := httptest.NewRequest(http.MethodPut, "/notif/x", nil)
		r.RemoteAddr = addr
		r.Header.Set("Authorization", "Bearer ")
		if Authorized(r, "") {
			t.Errorf("no secret, caller %s: served", addr)
		}
	}
	r := httptest.NewRequest(http.MethodPut, "/notif/x", nil)
	r.RemoteAddr = "127.0.0.1:5000"
	if Authorized(r, "s3cret") {
		t.Error("with a secret, a loopback caller without it must be refused")
	}
	r.Header.Set("Authorization", "Bearer s3cret")
	if !Authorized(r, "s3cret") {
		t.Error("right secret refused")
	}
}

// SetLocal: calls to the local node's URL are its method calls (nothing
// listens there), observed as the others; calls to any other URL still
// go over HTTP.
func TestClientLocalNode(t *testing.T) {
	remote := &fakeNode{status: StatusDelivered}
	remoteURL := serve(t, remote, ServerConfig{Secret: "s", MaxBody: 4096})
	local := &fakeNode{status: StatusBusy}
	const localURL = "http://127.0.0.1:1" // nothing listens: HTTP would fail
	var seen []observed
	c := NewClient(ClientConfig{Secret: "s", Observe: func(call Call, status int, err error, _ time.Duration) {
		seen = append(seen, observed{call, status, err})
	}})
	defer c.CloseIdle()
	c.SetLocal(localURL, local)
	ctx := context.Background()
	uaid := [16]byte(uuid.New())
	n := protocol.Notification{ChannelID: uuid.NewString(), Version: "v9", TTL: 60, Data: "ZGF0YQ"}

	if code, err := c.Push(ctx, localURL, uaid, &n, 0); err != nil || code != StatusBusy {
		t.Fatalf("local push: %d %v", code, err)
	}
	local.status = StatusCheckLater
	if code, err := c.Notif(ctx, localURL, uaid); err != nil || code != StatusCheckLater {
		t.Fatalf("local notif: %d %v", code, err)
	}
	local.status = StatusDropped
	if code, err := c.Drop(ctx, localURL, uaid, 77); err != nil || code != StatusDropped {
		t.Fatalf("local drop: %d %v", code, err)
	}
	if code, err := c.Push(ctx, remoteURL, uaid, &n, 0); err != nil || code != StatusDelivered {
		t.Fatalf("remote push: %d %v", code, err)
	}
	if len(local.delivers) != 1 || local.delivers[0].Version != "v9" || len(local.checks) != 1 || len(local.drops) != 1 || local.drops[0] != 77 {
		t.Errorf("local node got delivers %+v checks %d drops %v", local.delivers, len(local.checks), local.drops)
	}
	if len(remote.delivers) != 1 || remote.delivers[0].Version != "v9" {
		t.Errorf("remote node got %+v", remote.delivers)
	}
	want := []observed{{CallPush, StatusBusy, nil}, {CallNotif, StatusCheckLater, nil}, {CallDrop, StatusDropped, nil}, {CallPush, StatusDelivered, nil}}
	if len(seen) != len(want) {
		t.Fatalf("observed %+v, want %+v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("observed[%d] %+v, want %+v", i, seen[i], want[i])
		}
	}
}
