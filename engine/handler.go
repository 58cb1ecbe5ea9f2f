package engine

import (
	"errors"
	"sync"
	"time"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/panjf2000/gnet/v2"
)

// The gnet event handler: bytes in from the loop's buffer, through the ws
// codec, to the session; no goroutine and no I/O besides the loop's own.

// maxOutbound bounds what may wait unsent for one client: far above
// MaxUnacked notifications, far below what a leak would need.
const maxOutbound = 256 << 10

// OnOpen gives the connection a session; the upgrade must arrive within
// HelloTimeout too.
func (srv *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	srv.connections.Add(1)
	s := &session{srv: srv, c: c, lastRead: srv.clock(), due: -1}
	c.SetContext(s)
	srv.wheel.schedule(s, time.Now().UnixMilli()+srv.cfg.HelloTimeout.Milliseconds())
	return nil, gnet.None
}

// OnTraffic consumes every complete unit (the upgrade request, then
// frames) in the inbound buffer and leaves a partial one for later.
func (srv *Server) OnTraffic(c gnet.Conn) gnet.Action {
	s := c.Context().(*session)
	buf, _ := c.Peek(-1)
	// gnet's Discard(0) would drop everything buffered, partial frame
	// included: discard only what was consumed.
	n := s.consume(buf)
	if s.closed() {
		// A write failed and gnet closed c inside consume: c is released.
		return gnet.None
	}
	if n > 0 {
		c.Discard(n)
	}
	if s.asm != nil && !s.asm.Fragmented() {
		s.asm.Release()
		s.asm = nil
	}
	// A client that sends (pings, say) but never reads would grow the
	// outbound buffer without bound: cut it off.
	if c.OutboundBuffered() > maxOutbound && s.state < stClosing {
		s.srv.metrics.fail("slow_reader")
		s.abort()
	}
	return gnet.None
}

// consume returns how many bytes of buf it used.
func (s *session) consume(buf []byte) int {
	used := 0
	if s.state == stUpgrade {
		n := s.upgrade(buf)
		if n == 0 || s.state != stHello {
			return len(buf) * boolInt(s.state >= stClosing)
		}
		used = n
	}
	for s.state < stClosing && used < len(buf) {
		h, payload, n, err := ws.ParseFrame(buf[used:], s.srv.cfg.MaxMessageSize)
		if err != nil {
			s.closeFrameError(err)
			return len(buf)
		}
		if n == 0 {
			break
		}
		used += n
		s.lastRead = s.srv.clock()
		s.pingOut = false
		msg, ok, err := s.feed(h, payload)
		if err != nil {
			s.closeFrameError(err)
			return len(buf)
		}
		if ok {
			s.message(msg)
		}
	}
	if s.state >= stClosing {
		return len(buf)
	}
	return used
}

// feed assembles a message. A whole-frame message (nearly all of them)
// needs no state; an assembler is allocated only while a fragmented
// message is open, so idle sessions carry none.
func (s *session) feed(h ws.Header, payload []byte) (ws.Message, bool, error) {
	if s.asm == nil {
		if h.Fin || h.OpCode.IsControl() {
			var whole ws.Assembler
			return whole.Feed(h, payload, s.srv.cfg.MaxMessageSize)
		}
		s.asm = new(ws.Assembler)
	}
	return s.asm.Feed(h, payload, s.srv.cfg.MaxMessageSize)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// upgrade handles the HTTP handshake; 0 means it needs more bytes.
func (s *session) upgrade(buf []byte) int {
	req, n, err := ws.ParseUpgrade(buf)
	if err != nil {
		s.srv.metrics.upgradesBad.Inc()
		var ue *ws.UpgradeError
		if errors.As(err, &ue) {
			s.writeRaw(ue.AppendResponse)
		}
		s.abort()
		return 0
	}
	if n == 0 {
		return 0
	}
	if s.srv.draining.Load() || int(s.srv.connections.Load()) > s.srv.maxConns {
		s.srv.metrics.upgradesRefused.Inc()
		s.writeRaw(func(b []byte) []byte {
			return ws.AppendHTTPResponse(b, 503, "server busy\n", "Retry-After", "30")
		})
		s.abort()
		return 0
	}
	s.writeRaw(func(b []byte) []byte { return ws.AppendUpgradeResponse(b, &req, req.Protocol()) })
	if s.closed() {
		return 0
	}
	s.srv.metrics.upgrades.Inc()
	s.state = stHello
	return n
}

// writeRaw writes bytes that are not a websocket frame (HTTP responses).
func (s *session) writeRaw(enc func([]byte) []byte) {
	bp := outPool.Get().(*[]byte)
	b := enc((*bp)[:0])
	s.write(b)
	*bp = b[:0]
	outPool.Put(bp)
}

func (s *session) closeFrameError(err error) {
	var ce *ws.CloseError
	if errors.As(err, &ce) {
		kind := "bad_frame"
		if ce.Code == ws.StatusMessageTooBig {
			kind = "too_large"
		}
		s.fail(kind, ce.Code, ce.Reason)
		return
	}
	s.fail("bad_frame", ws.StatusProtocolError, "bad frame")
}

// message dispatches one complete websocket message.
func (s *session) message(msg ws.Message) {
	switch msg.Op {
	case ws.OpText:
		s.text(msg.Payload)
	case ws.OpBinary:
		s.fail("binary_frame", ws.StatusUnsupportedData, "binary messages are not part of the protocol")
	case ws.OpPing:
		s.sendControl(ws.OpPong, msg.Payload)
	case ws.OpPong:
		// lastRead was refreshed by the frame itself.
	case ws.OpClose:
		s.closeWith(ws.StatusNormalClosure, "")
	}
}

// OnClose releases the session: unregister, hand unacked direct
// notifications to storage, and clear node_id if it is still ours.
func (srv *Server) OnClose(c gnet.Conn, _ error) gnet.Action {
	s, _ := c.Context().(*session)
	if s == nil {
		return gnet.None
	}
	srv.connections.Add(-1)
	srv.wheel.unschedule(s)
	if s.asm != nil {
		s.asm.Reset()
		s.asm = nil
	}
	s.state = stClosed
	// A session with a uaid may be in the registry, from its hello on
	// (see hello); remove only removes s itself.
	if s.uaid != ([16]byte{}) {
		srv.registry.remove(s)
	}
	if s.registered {
		s.leave()
	}
	return gnet.None
}

// OnTick advances the timing wheel and runs each due session's check on
// its own loop.
func (srv *Server) OnTick() (time.Duration, gnet.Action) {
	srv.dueSlice = srv.wheel.advance(time.Now(), srv.dueSlice[:0])
	for _, s := range srv.dueSlice {
		s.onLoop(s.timer)
	}
	clear(srv.dueSlice)
	return srv.wheel.res / 2, gnet.None
}

// timer checks the deadline the session was scheduled for.
func (s *session) timer() {
	now := time.Now().UnixMilli()
	cfg := &s.srv.cfg
	idle := int64(s.srv.clock() - s.lastRead) // uint32 difference: wraps correctly
	switch s.state {
	case stUpgrade, stHello:
		s.fail("hello_timeout", ws.StatusPolicyViolation, "no hello in time")
	case stHelloing, stReady:
		switch {
		case s.pingOut:
			// Any inbound frame clears pingOut, and this deadline was set
			// PongTimeout after the ping: nothing answered.
			s.fail("pong_timeout", ws.StatusGoingAway, "no answer to ping")
		case idle >= cfg.PingInterval.Milliseconds():
			s.pingOut = true
			s.sendControl(ws.OpPing, nil)
			if s.closed() {
				return
			}
			s.srv.metrics.pings.Inc()
			s.srv.wheel.schedule(s, now+cfg.PongTimeout.Milliseconds())
		default:
			s.srv.wheel.schedule(s, now+cfg.PingInterval.Milliseconds()-idle)
		}
	}
}

// clientMessages recycles decoded messages: DecodeClient reuses their
// slices, so the inbound path allocates nothing, and no connection keeps
// one while idle.
var clientMessages = sync.Pool{New: func() any { return new(protocol.ClientMessage) }}

// text decodes and dispatches one protocol message.
func (s *session) text(payload []byte) {
	m := clientMessages.Get().(*protocol.ClientMessage)
	defer clientMessages.Put(m)
	s.dispatch(payload, m)
}

func (s *session) dispatch(payload []byte, m *protocol.ClientMessage) {
	if err := protocol.DecodeClient(payload, m); err != nil {
		kind := "bad_json"
		if errors.Is(err, protocol.ErrUnknownType) {
			kind = "unknown_type"
		}
		s.fail(kind, ws.StatusUnsupportedData, err.Error())
		return
	}
	if m.Type == protocol.MsgHello {
		s.hello(m)
		return
	}
	if s.state != stReady {
		s.fail("no_hello", ws.StatusPolicyViolation, "hello must come first")
		return
	}
	switch m.Type {
	case protocol.MsgRegister:
		s.register(m)
	case protocol.MsgUnregister:
		s.unregister(m)
	case protocol.MsgAck:
		s.ack(m)
	case protocol.MsgNack:
		s.srv.metrics.nacked.Inc()
	case protocol.MsgPing:
		s.clientPing()
	case protocol.MsgBroadcastSubscribe:
		// No broadcasts are published yet: accepted, nothing to send.
	}
}

// clientPing answers {} unless the client pings abusively often (Firefox
// pings about every 30 minutes; some old clients loop), which closes with
// 4774 as the reference does.
func (s *session) clientPing() {
	now := s.srv.clock()
	if s.clientPinged && int64(now-s.lastClientPing) < s.srv.cfg.MinClientPing.Milliseconds() {
		s.fail("ping_abuse", 4774, "pinging too often")
		return
	}
	s.lastClientPing, s.clientPinged = now, true
	s.sendJSON(protocol.AppendPingReply)
}
