package session

import (
	"github.com/autopush-go/autopush/engine/broadcast"
	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
)

// Session states, in order.
const (
	stUpgrade   uint8 = iota // TCP open, waiting for the HTTP upgrade
	stHello                  // websocket open, waiting for hello
	stHelloing               // hello accepted, storage work in flight
	stReady                  // registered: messages and deliveries flow
	stGoingAway              // the node's 1001 close is sent: acks and the client's close are read, nothing is written
	stAnswering              // plain HTTP on the public port: answering once storage has (http.go)
	stClosing                // close frame sent, input ignored
	stClosed                 // the connection closed (Close ran)
)

// Session is the state of one connection. It is kept small: an idle
// connection costs at most 1 KiB of the node's memory, gnet's own state
// included (engine's TestConnSize, docs/benchmarks.md). It holds no
// buffer and no timer while idle; flow exists only while notifications
// are in flight, and the assembler only while a fragmented message is
// open.
type Session struct {
	uaid        [16]byte
	connectedAt int64 // ms since the epoch: orders connections in storage
	cursor      uint64
	flow        *flow
	asm         *ws.Assembler

	// Times relative to Env.Epoch, 32 bits: only their differences
	// matter, and they stay exact for 49 days.
	lastRead       uint32 // ms: the last inbound frame
	lastClientPing uint32 // ms: the last client ping, when clientPinged

	bsub broadcast.Sub // the broadcasts it follows (Env.Broadcasts); 0: none

	// The channel limit's state (channels.go), packed to keep the
	// session in budget: the low 24 bits are the user's channels counted
	// plus one (0: not counted yet), the high 8 the registers waiting for
	// storage.
	chanRegs uint32

	state        uint8
	registered   bool // the router record names this connection (Registered)
	recordOwed   bool // a fresh uaid: its first register writes its router record
	pingOut      bool // a keepalive ping is unanswered
	clientPinged bool
	// unsubscribed: the client has sent an unregister on this connection;
	// a push routed from a router record cached before it is refused
	// (Stale), so it is never delivered to a channel that is gone.
	unsubscribed bool
}

// UAID is the user agent's id; zero until a hello names or assigns one.
func (s *Session) UAID() [16]byte { return s.uaid }

// ConnectedAt orders connections of one user agent: the newer one wins.
func (s *Session) ConnectedAt() int64 { return s.connectedAt }

// Stale reports whether a push expecting connection connectedAt (from a
// cached router record; 0 expects none) must be refused: this is another
// connection, or the client has unsubscribed a channel since it
// connected, which the cached record cannot know.
func (s *Session) Stale(connectedAt int64) bool {
	return connectedAt != 0 && (connectedAt != s.connectedAt || s.unsubscribed)
}

// Closed reports whether Close ran: nothing may be written any more.
func (s *Session) Closed() bool { return s.state == stClosed }

// Closing reports whether the connection is closing or closed.
func (s *Session) Closing() bool { return s.state >= stClosing }

// Registered reports whether the router record names this connection (a
// returning user agent's hello finished, or a new one's first register):
// then its leave clears the record's node_id.
func (s *Session) Registered() bool { return s.registered }

// Idle reports that nothing is in flight: no notification unacked, no
// storage read or delete running or owed.
func (s *Session) Idle() bool { return s.flow == nil }

// Open starts a session on a new connection: the upgrade and then the
// hello must arrive within HelloTimeout.
func (s *Session) Open(x *Ctx) {
	now := x.Now()
	*s = Session{lastRead: x.clock(now)}
	x.schedule(now.Add(x.Config.HelloTimeout))
}

// sendJSON appends one text frame whose payload enc appends.
func (s *Session) sendJSON(x *Ctx, enc func([]byte) []byte) {
	b, mark := ws.BeginFrame(x.Out)
	x.Out = ws.EndFrame(enc(b), mark, ws.OpText)
}

// closeWith sends a close frame and closes the connection; what the client
// sends afterwards is ignored.
func (s *Session) closeWith(x *Ctx, code ws.StatusCode, reason string) {
	if s.state >= stClosing {
		return
	}
	// Before the upgrade and on plain HTTP there is no websocket; going
	// away, the close frame is sent already.
	if s.state != stUpgrade && s.state != stAnswering && s.state != stGoingAway {
		x.Out = ws.AppendClose(x.Out, code, reason)
	}
	s.abort(x)
}

// abort closes the connection without a close frame. Never after Close:
// stClosing would revive a closed session.
func (s *Session) abort(x *Ctx) {
	if s.state < stClosing {
		s.state = stClosing
		x.Close = true
	}
}

// fail counts a client error and closes with its code.
func (s *Session) fail(x *Ctx, kind string, code ws.StatusCode, reason string) {
	x.Metrics.fail(kind)
	x.Log.Debug("closing connection", "kind", kind, "code", int(code), "reason", reason,
		"uaid", protocol.FormatUAID(s.uaid))
	s.closeWith(x, code, reason)
}

// SlowReader cuts off a client whose unsent output grew past what the
// node lets one client hold: one that sends (pings, say) but never reads.
func (s *Session) SlowReader(x *Ctx) {
	if s.state < stClosing {
		x.Metrics.fail("slow_reader")
		s.abort(x)
	}
}

// BusyAnswer is what a connection the node cannot take is written
// before it is closed: at max-connections, while draining, or when its
// hello could not be queued.
var BusyAnswer = ws.AppendHTTPResponse(nil, 503, "server busy\n", "Retry-After", "30")

// Overloaded closes the connection because one of the Jobs it asked for
// could not be queued (the node's workers are saturated): the client
// reconnects, possibly elsewhere, rather than the node queuing without
// bound.
func (s *Session) Overloaded(x *Ctx) {
	if s.flow != nil {
		s.flow.checking = false
	}
	x.Metrics.Overloaded.Inc()
	if s.state == stAnswering {
		x.Out = append(x.Out, BusyAnswer...)
	}
	s.fail(x, "storage", ws.StatusTryAgainLater, "server overloaded")
}

// Shutdown closes a registered client because the node is draining. A
// ready client is sent the 1001 close frame and the connection stays open
// until the client's close frame answers it: the acks it sent before it
// read ours are read and count (goingAway). Closing the socket at once
// would drop them, and those messages would come back after the restart
// (docs/protocol.md, Draining). The node bounds the wait (engine.Drain).
func (s *Session) Shutdown(x *Ctx) {
	switch {
	case s.state != stReady:
		s.closeWith(x, ws.StatusGoingAway, "server shutting down")
	case s.leaving():
		// The client's own close is answered once what it waits for ends.
	default:
		x.Out = ws.AppendClose(x.Out, ws.StatusGoingAway, "server shutting down")
		s.state = stGoingAway
	}
}
