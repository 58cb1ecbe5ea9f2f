package engine

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/panjf2000/gnet/v2"

	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// brokenConn behaves as gnet's conn does when a write fails (the peer
// reset the connection): the connection is closed inside Write, OnClose
// included, and the fd number is free for the next accepted connection.
// Every write that reaches it after that would land on someone else's
// socket, so the test counts them.
type brokenConn struct {
	gnet.Conn // methods the test does not expect panic (nil)
	srv       *Server
	ctx       any
	closed    bool
	writes    int // accepted before the failure
	late      int // reached the conn after it was closed
	failAfter int // writes that succeed before the failing one
}

func (c *brokenConn) Write(b []byte) (int, error) {
	if c.closed {
		c.late++
		return 0, errors.New("write to a released conn")
	}
	if c.writes < c.failAfter {
		c.writes++
		return len(b), nil
	}
	c.closed = true
	c.srv.OnClose(c, errors.New("write: broken pipe"))
	return 0, errors.New("write: broken pipe")
}

func (c *brokenConn) Close() error     { return nil }
func (c *brokenConn) Context() any     { return c.ctx }
func (c *brokenConn) SetContext(v any) { c.ctx = v }

func closedWriteServer(t *testing.T) *Server {
	t.Helper()
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := DefaultConfig()
	cfg.CryptoKey = token.GenerateKey()
	srv, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.workers = newWorkers(1, 16)
	t.Cleanup(srv.workers.stop)
	return srv
}

func readySession(srv *Server, failAfter int) (*session, *brokenConn) {
	c := &brokenConn{srv: srv, failAfter: failAfter}
	s := &session{srv: srv, c: c, due: -1, state: stReady, uaid: uuid.New(), connectedAt: time.Now().UnixMilli(), registered: true}
	c.ctx = s
	srv.registry.put(s)
	srv.connections.Add(1)
	return s, c
}

// A write that closes the connection ends the session's use of it: the
// rest of a stored page is not written, nothing revives the session, and
// the in-flight count is given back.
func TestNoWriteAfterSynchronousClose(t *testing.T) {
	srv := closedWriteServer(t)
	chid := uuid.New()
	page := make([]storage.Message, 5)
	for i := range page {
		page[i] = storage.Message{CHID: chid, Version: "v" + string(rune('a'+i)), SortKey: storage.NewSortKey(), TTL: 60}
	}

	s, c := readySession(srv, 2)
	s.flowState().checking = true
	s.checked(nil, page, false, nil)
	if c.late != 0 || c.writes != 2 {
		t.Fatalf("stored page: %d writes before the failure, %d after it (want 2, 0)", c.writes, c.late)
	}
	if s.state != stClosed || srv.inFlight.Load() != 0 {
		t.Fatalf("after the failed write: state %d, in flight %d", s.state, srv.inFlight.Load())
	}
	// What the node API or a storage worker hands the session later must
	// not write either.
	s.closeWith(4000, "connected elsewhere")
	s.timer()
	if c.late != 0 || s.state != stClosed {
		t.Fatalf("after close: %d late writes, state %d", c.late, s.state)
	}

	// A close frame that fails leaves the session closed, not closing.
	s, c = readySession(srv, 0)
	s.closeWith(4000, "connected elsewhere")
	if s.state != stClosed || c.late != 0 {
		t.Fatalf("close frame write failed: state %d, %d late writes", s.state, c.late)
	}

	// A direct delivery whose write fails is not reported as delivered:
	// the endpoint stores it (nothing else would, leave has run).
	s, c = readySession(srv, 0)
	n := protocol.Notification{ChannelID: chid.String(), Version: "direct", TTL: 60}
	if code := s.deliverDirect(&n); code != http.StatusNotFound {
		t.Fatalf("direct delivery over a failed write answered %d, want 404", code)
	}
	if c.late != 0 || srv.inFlight.Load() != 0 {
		t.Fatalf("direct: %d late writes, in flight %d", c.late, srv.inFlight.Load())
	}
}
