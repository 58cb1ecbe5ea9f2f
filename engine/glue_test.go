package engine

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/panjf2000/gnet/v2"

	"github.com/autopush-go/autopush/engine/session"
	"github.com/autopush-go/autopush/internal/nodeapi"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// The glue between gnet and the session core, driven without sockets: a
// fake gnet.Conn whose event loop runs what is handed to it when the test
// says so, over a real store and real storage workers.

// fakeLoop is a connection's event loop: Execute queues, run runs.
type fakeLoop struct {
	gnet.EventLoop // methods the glue does not use panic (nil)
	mu             sync.Mutex
	queue          []gnet.Runnable
	kick           chan struct{}
}

func (l *fakeLoop) Execute(_ context.Context, r gnet.Runnable) error {
	l.mu.Lock()
	l.queue = append(l.queue, r)
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return nil
}

// run runs queued work, as the loop would, until done reports true: it
// waits for work to be queued (by the workers, the node API) and polls
// done, up to a deadline only a real failure reaches.
func (l *fakeLoop) run(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	// done is asked once per round: a done that takes its answer from a
	// channel (nodeCall) reports true only once.
	for !done() {
		l.mu.Lock()
		q := l.queue
		l.queue = nil
		l.mu.Unlock()
		for _, r := range q {
			r.Run(context.Background())
		}
		if len(q) > 0 {
			continue
		}
		select {
		case <-l.kick:
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// fakeConn behaves as gnet's conn: when a write fails (the peer reset the
// connection) the connection is closed inside Write, OnClose included,
// and the fd number is free for the next accepted connection. Every write
// that reaches it after that would land on someone else's socket, so the
// test counts them.
type fakeConn struct {
	gnet.Conn // methods the glue does not use panic (nil)
	srv       *Server
	loop      *fakeLoop
	ctx       any
	in        []byte
	out       bytes.Buffer
	fail      bool // the next write fails
	writes    int  // attempted while open
	closed    bool
	late      int // writes that reached it after it was closed
}

func (c *fakeConn) Write(b []byte) (int, error) {
	if c.closed {
		c.late++
		return 0, io.ErrClosedPipe
	}
	c.writes++
	if c.fail {
		c.closed = true
		c.srv.OnClose(c, io.ErrClosedPipe)
		return 0, io.ErrClosedPipe
	}
	return c.out.Write(b)
}

// Close is asynchronous in gnet: OnClose runs later on the loop.
func (c *fakeConn) Close() error {
	return c.loop.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		if !c.closed {
			c.closed = true
			c.srv.OnClose(c, nil)
		}
		return nil
	}))
}
func (c *fakeConn) Peek(int) ([]byte, error) { return c.in, nil }
func (c *fakeConn) Discard(n int) (int, error) {
	c.in = c.in[n:]
	return n, nil
}
func (c *fakeConn) OutboundBuffered() int     { return 0 }
func (c *fakeConn) RemoteAddr() net.Addr      { return fakePeer }
func (c *fakeConn) Context() any              { return c.ctx }
func (c *fakeConn) SetContext(v any)          { c.ctx = v }
func (c *fakeConn) EventLoop() gnet.EventLoop { return c.loop }

// fakePeer is every fake connection's source: the per-source cap counts
// them (OnOpen takes, OnClose gives back).
var fakePeer = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}

func glueServer(t *testing.T) (*Server, storage.Store) {
	t.Helper()
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := DefaultConfig()
	cfg.CryptoKey, cfg.NodeSecret = token.GenerateKey(), "glue-test-secret"
	srv, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.maxConns = 100
	srv.nodeURL = "http://node.test"
	srv.workers = newWorkers(2, 16)
	t.Cleanup(srv.workers.stop)
	return srv, store
}

const glueUpgrade = "GET / HTTP/1.1\r\nHost: push.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

// readyConn opens a connection through the glue and says hello; it
// returns once the hello is answered and the hello's storage check done.
func readyConn(t *testing.T, srv *Server) (*fakeConn, *conn, [16]byte) {
	t.Helper()
	fc := &fakeConn{srv: srv, loop: &fakeLoop{kick: make(chan struct{}, 1)}}
	srv.OnOpen(fc)
	cn := fc.ctx.(*conn)
	// A returning user agent (a new one's hello reads nothing, and its
	// record waits for its first register).
	known := session.NewUAID()
	if err := srv.store.ConnectNew(context.Background(), storage.User{UAID: known, RouterType: storage.RouterWebPush,
		NodeID: "http://gone.invalid", ConnectedAt: 1}, uuid.New()); err != nil {
		t.Fatal(err)
	}
	fc.in = append([]byte(glueUpgrade), maskedFrame(`{"messageType":"hello","use_webpush":true,"uaid":"`+protocol.FormatUAID(known)+`"}`)...)
	srv.OnTraffic(fc)
	if len(fc.in) != 0 {
		t.Fatalf("%d bytes not consumed", len(fc.in))
	}
	fc.loop.run(t, "the hello reply", func() bool { return bytes.Contains(fc.out.Bytes(), []byte(`"hello"`)) })
	uaid := cn.s.UAID()
	if !cn.s.Registered() || srv.registry.get(uaid) != cn {
		t.Fatal("hello done but not registered")
	}
	// The hello's check: its worker result is the loop's next work.
	fc.loop.run(t, "the hello's storage check", cn.s.Idle)
	fc.out.Reset()
	return fc, cn, uaid
}

// A write that closes the connection ends the session's use of it: the
// stored page is written once and never again, nothing revives the
// session, the in-flight count is given back, and what was not written
// stays stored.
func TestNoWriteAfterSynchronousClose(t *testing.T) {
	srv, store := glueServer(t)
	ctx := context.Background()
	fc, cn, uaid := readyConn(t, srv)
	chid := uuid.New()
	for i := range 5 {
		m := storage.Message{CHID: chid, Version: "v" + string(rune('a'+i)), SortKey: storage.NewSortKey(), TTL: 60}
		if err := store.SaveMessage(ctx, uaid, m); err != nil {
			t.Fatal(err)
		}
	}
	lc := srv.begin(cn)
	if got := cn.s.Check(&lc.Ctx); got != session.Checking {
		t.Fatalf("check: %v", got)
	}
	lc.end()
	fc.fail = true
	writes := fc.writes
	fc.loop.run(t, "the page's write to fail", func() bool { return fc.closed })
	if fc.writes != writes+1 || fc.late != 0 {
		t.Fatalf("stored page: %d writes for it, %d after the failure (want 1, 0)", fc.writes-writes, fc.late)
	}
	if !cn.s.Closed() || srv.env.InFlight.Load() != 0 || srv.connections.Load() != 0 || srv.registry.get(uaid) != nil {
		t.Fatalf("after the failed write: closed %v, in flight %d, connections %d", cn.s.Closed(), srv.env.InFlight.Load(), srv.connections.Load())
	}
	// Closed inside its write (OnClose while flushing), it gave its
	// source's place back all the same.
	if n := srv.sources.Open(srv.sources.Of(fakePeer)); n != 0 {
		t.Fatalf("after the failed write: %d counted from its source, want 0", n)
	}
	// What the node API or a storage worker hands the session later must
	// not write either.
	srv.onLoop(cn, func(x *session.Ctx) { cn.s.Evict(x, cn.s.ConnectedAt()) })
	srv.onLoop(cn, cn.s.Tick)
	fc.loop.run(t, "late transitions", func() bool { return len(fc.loop.queue) == 0 })
	if fc.late != 0 || !cn.s.Closed() {
		t.Fatalf("after close: %d late writes", fc.late)
	}
	if left, _ := store.TimestampMessages(ctx, uaid, 0, 10); len(left) != 5 {
		t.Fatalf("%d messages still stored, want all 5", len(left))
	}

	// A close frame that fails leaves the session closed, not closing.
	fc, cn, _ = readyConn(t, srv)
	fc.fail = true
	lc = srv.begin(cn)
	cn.s.Evict(&lc.Ctx, cn.s.ConnectedAt())
	lc.end()
	if !cn.s.Closed() || fc.late != 0 {
		t.Fatalf("close frame write failed: closed %v, %d late writes", cn.s.Closed(), fc.late)
	}
}

// A direct delivery whose write fails is not reported as delivered: the
// endpoint stores it, and the node does not store a second copy.
func TestFailedDirectWriteIsNotHere(t *testing.T) {
	srv, store := glueServer(t)
	fc, _, uaid := readyConn(t, srv)
	fc.fail = true
	code := nodeCall(t, fc, "the delivery", func() int {
		return apiNode{srv}.Deliver(uaid, &protocol.Notification{ChannelID: uuid.NewString(), Version: "direct", TTL: 60}, 0)
	})
	if code != nodeapi.StatusNotHere || fc.late != 0 || srv.env.InFlight.Load() != 0 {
		t.Fatalf("direct over a failed write: %d, %d late writes, in flight %d", code, fc.late, srv.env.InFlight.Load())
	}
	// The leave job clears node_id; it must not have stored the message.
	ctx := context.Background()
	fc.loop.run(t, "the leave job", func() bool {
		u, err := store.GetUser(ctx, uaid)
		return err == nil && u.NodeID == ""
	})
	if left, _ := store.TimestampMessages(ctx, uaid, 0, 10); len(left) != 0 {
		t.Fatalf("the node stored %d messages the endpoint was told to store", len(left))
	}
	if got := testCounter(srv, mDirectMiss); got != 1 {
		t.Fatalf("direct not_here %v, want 1", got)
	}
}

// nodeCall makes a node API call, which waits for fc's event loop, and
// runs the loop until it answers: the call's status.
func nodeCall(t *testing.T, fc *fakeConn, what string, f func() int) int {
	t.Helper()
	codes := make(chan int, 1)
	go func() { codes <- f() }()
	var code int
	fc.loop.run(t, what, func() bool {
		select {
		case code = <-codes:
			return true
		default:
			return false
		}
	})
	return code
}

func testCounter(srv *Server, name string) uint64 {
	return srv.metrics.set.GetOrCreateCounter(name).Get()
}

// The node API answers each session outcome with its own status: a check
// on an idle client reads now (200), one behind an unacked delivery
// later (202), a delivery is 200 and an eviction of another connection
// is 404 (engine/nodeapi.go's mapping; the endpoint acts on each code).
func TestNodeAPIStatusOfEachOutcome(t *testing.T) {
	srv, _ := glueServer(t)
	fc, cn, uaid := readyConn(t, srv)
	node := apiNode{srv}
	if got := nodeCall(t, fc, "an idle check", func() int { return node.Check(uaid) }); got != nodeapi.StatusChecking {
		t.Fatalf("check on an idle client: %d, want %d", got, nodeapi.StatusChecking)
	}
	fc.loop.run(t, "the check's read", cn.s.Idle)
	notif := &protocol.Notification{ChannelID: uuid.NewString(), Version: "unacked", TTL: 60}
	if got := nodeCall(t, fc, "a delivery", func() int { return node.Deliver(uaid, notif, 0) }); got != nodeapi.StatusDelivered {
		t.Fatalf("delivery: %d, want %d", got, nodeapi.StatusDelivered)
	}
	if got := nodeCall(t, fc, "a check behind an unacked delivery", func() int { return node.Check(uaid) }); got != nodeapi.StatusCheckLater {
		t.Fatalf("check behind an unacked delivery: %d, want %d", got, nodeapi.StatusCheckLater)
	}
	if got := nodeCall(t, fc, "an eviction of an older connection", func() int { return node.Drop(uaid, cn.s.ConnectedAt()-1) }); got != nodeapi.StatusNotHere {
		t.Fatalf("eviction of another connection: %d, want %d", got, nodeapi.StatusNotHere)
	}
	if got := nodeCall(t, fc, "an eviction", func() int { return node.Drop(uaid, cn.s.ConnectedAt()) }); got != nodeapi.StatusDropped {
		t.Fatalf("eviction: %d, want %d", got, nodeapi.StatusDropped)
	}
}
