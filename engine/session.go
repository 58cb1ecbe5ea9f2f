package engine

import (
	"context"
	"sync"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/panjf2000/gnet/v2"
)

// session is kept small: 19,000 idle connections must cost at most 1 KiB
// each including gnet's own state (TestSessionSize, docs/benchmarks.md).

// Session states, in order.
const (
	stUpgrade  uint8 = iota // TCP open, waiting for the HTTP upgrade
	stHello                 // websocket open, waiting for hello
	stHelloing              // hello accepted, storage work in flight
	stReady                 // registered: messages and deliveries flow
	stClosing               // close frame sent, input ignored
	stClosed                // OnClose ran
)

// session is the state of one connection. It is owned by the connection's
// event loop: every field but due/queued (the wheel's, under its lock) is
// read and written only there: in gnet callbacks, or in functions handed
// to onLoop by the node API and the storage workers. It holds no buffer
// and no timer while idle; flow exists only while notifications are in
// flight.
type session struct {
	srv *Server
	c   gnet.Conn

	due int64 // wheel deadline, ms since the epoch; -1 when unscheduled

	uaid        [16]byte
	connectedAt int64 // ms since the epoch: orders connections in storage
	cursor      uint64
	flow        *flow         // nil while nothing is in flight
	asm         *ws.Assembler // nil unless a fragmented message is open

	// Times relative to the node's start (Server.clock), 32 bits: only
	// their differences matter, and they stay exact for 49 days.
	lastRead       uint32 // ms: the last inbound frame
	lastClientPing uint32 // ms: the last client ping, when clientPinged

	queued       bool // in a wheel slot (the wheel's, under its lock)
	state        uint8
	registered   bool // hello done: the router record names this connection
	pingOut      bool // a keepalive ping is unanswered
	clientPinged bool
}

// onLoop runs fn on the session's event loop, unless the connection has
// closed by then. Safe for concurrent use: this is how storage results and
// node API calls reach a session.
func (s *session) onLoop(fn func()) error {
	return s.c.EventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		if s.state != stClosed {
			fn()
		}
		return nil
	}))
}

// outbound buffers are pooled: a session holds none between writes.
var outPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// write hands b to gnet. A write that fails makes gnet close the
// connection inside this very call: OnClose runs, the fd is closed, and
// the main reactor may hand the same fd number to a new connection at
// once, which a later write through this conn would reach. So nothing is
// written once the session is closed, and callers that go on after a write
// check closed().
func (s *session) write(b []byte) {
	if s.state != stClosed {
		s.c.Write(b)
	}
}

// closed reports whether OnClose ran (possibly inside the last write).
func (s *session) closed() bool { return s.state == stClosed }

// sendJSON writes one text frame whose payload enc appends.
func (s *session) sendJSON(enc func([]byte) []byte) {
	bp := outPool.Get().(*[]byte)
	b, mark := ws.BeginFrame((*bp)[:0])
	b = ws.EndFrame(enc(b), mark, ws.OpText)
	s.write(b)
	*bp = b[:0]
	outPool.Put(bp)
}

// sendFrame writes one control frame.
func (s *session) sendControl(op ws.OpCode, payload []byte) {
	bp := outPool.Get().(*[]byte)
	b := ws.AppendFrame((*bp)[:0], op, payload)
	s.write(b)
	*bp = b[:0]
	outPool.Put(bp)
}

// closeWith sends a close frame and closes the connection; what the client
// sends afterwards is ignored.
func (s *session) closeWith(code ws.StatusCode, reason string) {
	if s.state >= stClosing {
		return
	}
	if s.state != stUpgrade {
		bp := outPool.Get().(*[]byte)
		b := ws.AppendClose((*bp)[:0], code, reason)
		s.write(b)
		*bp = b[:0]
		outPool.Put(bp)
	}
	s.abort()
}

// abort closes the connection without a close frame. Never after OnClose:
// stClosing would revive a closed session.
func (s *session) abort() {
	if s.state < stClosing {
		s.state = stClosing
		s.c.Close()
	}
}

// fail counts a client error and closes with its code.
func (s *session) fail(kind string, code ws.StatusCode, reason string) {
	s.srv.metrics.fail(kind)
	s.srv.log.Debug("closing connection", "kind", kind, "code", int(code), "reason", reason,
		"uaid", protocol.FormatUAID(s.uaid))
	s.closeWith(code, reason)
}
