package session

import (
	"errors"
	"time"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
)

// Consume handles every complete unit in buf (the upgrade request, then
// frames) and returns how many bytes it used; the caller keeps the rest (a
// partial unit) for the next call. Once the session is closing it uses
// everything. Payloads are unmasked in place, so bytes must never be fed
// twice.
func (s *Session) Consume(x *Ctx, buf []byte) int {
	n := s.consume(x, buf)
	if s.asm != nil && !s.asm.Fragmented() {
		s.asm.Release()
		s.asm = nil
	}
	return n
}

func (s *Session) consume(x *Ctx, buf []byte) int {
	used := 0
	if s.state == stAnswering {
		return len(buf) // one request per connection: the rest is ignored
	}
	if s.state == stUpgrade {
		n := s.upgrade(x, buf)
		if n == 0 || s.state != stHello {
			if s.state >= stAnswering { // answered, answering or closing
				return len(buf)
			}
			return 0
		}
		used = n
	}
	var now time.Time
	for s.state < stClosing && used < len(buf) {
		h, payload, n, err := ws.ParseFrame(buf[used:], x.Config.MaxMessageSize)
		if err != nil {
			s.closeFrameError(x, err)
			return len(buf)
		}
		if n == 0 {
			break
		}
		used += n
		if now.IsZero() {
			now = x.Now()
		}
		s.lastRead = x.clock(now)
		s.pingOut = false
		msg, ok, err := s.feed(x, h, payload)
		if err != nil {
			s.closeFrameError(x, err)
			return len(buf)
		}
		if ok {
			s.message(x, msg)
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
func (s *Session) feed(x *Ctx, h ws.Header, payload []byte) (ws.Message, bool, error) {
	if s.asm == nil {
		if h.Fin || h.OpCode.IsControl() {
			var whole ws.Assembler
			return whole.Feed(h, payload, x.Config.MaxMessageSize)
		}
		s.asm = new(ws.Assembler)
	}
	return s.asm.Feed(h, payload, x.Config.MaxMessageSize)
}

// upgrade handles the HTTP handshake; 0 means it needs more bytes (or
// failed: then the session is closing).
func (s *Session) upgrade(x *Ctx, buf []byte) int {
	req, n, err := ws.ParseUpgrade(buf)
	if err != nil {
		if s.plainHTTP(x, &req, err) {
			return 0
		}
		x.Metrics.UpgradesBad.Inc()
		var ue *ws.UpgradeError
		if errors.As(err, &ue) {
			x.Out = ue.AppendResponse(x.Out)
		}
		s.abort(x)
		return 0
	}
	if n == 0 {
		return 0
	}
	if x.Draining.Load() || (x.Full != nil && x.Full()) {
		x.Metrics.UpgradesRefused.Inc()
		x.Out = append(x.Out, BusyAnswer...)
		s.abort(x)
		return 0
	}
	if x.StorageDown.Load() {
		// Its hello could only fail: refused before it costs a job, with
		// the API tier's Retry-After (docs/operations.md, Storage outage).
		x.Metrics.UpgradesRefused.Inc()
		x.Out = ws.AppendHTTPResponse(x.Out, 503, "storage unavailable\n", "Retry-After", "30")
		s.abort(x)
		return 0
	}
	x.Out = ws.AppendUpgradeResponse(x.Out, &req, req.Protocol())
	x.Metrics.Upgrades.Inc()
	s.state = stHello
	return n
}

func (s *Session) closeFrameError(x *Ctx, err error) {
	var ce *ws.CloseError
	if errors.As(err, &ce) {
		kind := "bad_frame"
		if ce.Code == ws.StatusMessageTooBig {
			kind = "too_large"
		}
		s.fail(x, kind, ce.Code, ce.Reason)
		return
	}
	s.fail(x, "bad_frame", ws.StatusProtocolError, "bad frame")
}

// message dispatches one complete websocket message.
func (s *Session) message(x *Ctx, msg ws.Message) {
	if s.leaving() {
		return // the client closed: nothing it sends after counts
	}
	if s.state == stGoingAway {
		s.goingAway(x, msg)
		return
	}
	switch msg.Op {
	case ws.OpText:
		s.text(x, msg.Payload)
	case ws.OpBinary:
		s.fail(x, "binary_frame", ws.StatusUnsupportedData, "binary messages are not part of the protocol")
	case ws.OpPing:
		x.Out = ws.AppendFrame(x.Out, ws.OpPong, msg.Payload)
	case ws.OpPong:
		// lastRead was refreshed by the frame itself.
	case ws.OpClose:
		s.clientClose(x)
	}
}

// goingAway reads what a client sends after the node's 1001 close
// (Shutdown): its acks, sent before it read that close, and its close
// frame, which ends the connection once the acked messages are deleted.
// Nothing else is answered: no frame may follow our close.
func (s *Session) goingAway(x *Ctx, msg ws.Message) {
	switch msg.Op {
	case ws.OpClose:
		s.clientClose(x)
	case ws.OpText:
		m := clientMessages.Get().(*protocol.ClientMessage)
		defer clientMessages.Put(m)
		if protocol.DecodeClient(msg.Payload, m) == nil && m.Type == protocol.MsgAck {
			s.ack(x, m)
		}
	}
}

// text decodes and dispatches one protocol message.
func (s *Session) text(x *Ctx, payload []byte) {
	m := clientMessages.Get().(*protocol.ClientMessage)
	defer clientMessages.Put(m)
	if err := protocol.DecodeClient(payload, m); err != nil {
		kind := "bad_json"
		if errors.Is(err, protocol.ErrUnknownType) {
			kind = "unknown_type"
		}
		s.fail(x, kind, ws.StatusUnsupportedData, err.Error())
		return
	}
	if m.Type == protocol.MsgHello {
		s.hello(x, m)
		return
	}
	if s.state != stReady {
		s.fail(x, "no_hello", ws.StatusPolicyViolation, "hello must come first")
		return
	}
	switch m.Type {
	case protocol.MsgRegister:
		s.register(x, m)
	case protocol.MsgUnregister:
		s.unregister(x, m)
	case protocol.MsgAck:
		s.ack(x, m)
	case protocol.MsgNack:
		x.Metrics.Nacked.Inc()
	case protocol.MsgPing:
		s.clientPing(x)
	case protocol.MsgBroadcastSubscribe:
		s.broadcastSubscribe(x, m)
	}
}

// clientPing answers {} unless the client pings abusively often (Firefox
// pings about every 30 minutes; some old clients loop), which closes with
// 4774 as the reference does.
func (s *Session) clientPing(x *Ctx) {
	now := x.clock(x.Now())
	if s.clientPinged && int64(now-s.lastClientPing) < x.Config.MinClientPing.Milliseconds() {
		s.fail(x, "ping_abuse", 4774, "pinging too often")
		return
	}
	s.lastClientPing, s.clientPinged = now, true
	s.sendJSON(x, protocol.AppendPingReply)
}

// Tick checks the deadline the session asked for (Ctx.Due): the hello
// timeout, then the keepalive ping and its answer.
func (s *Session) Tick(x *Ctx) {
	now := x.Now()
	cfg := &x.Config
	idle := int64(x.clock(now) - s.lastRead) // uint32 difference: wraps correctly
	switch s.state {
	case stUpgrade, stHello:
		s.fail(x, "hello_timeout", ws.StatusPolicyViolation, "no hello in time")
	case stAnswering:
		x.Out = ws.AppendHTTPResponse(x.Out, 503, "storage did not answer in time\n", "Retry-After", "30")
		s.fail(x, "hello_timeout", ws.StatusPolicyViolation, "")
	case stGoingAway:
		// No ping may follow the node's close: a client silent for the
		// keepalive interval is dropped (the node bounds the wait anyway:
		// engine.Drain). The acks it sent were read; their deletes end
		// within the storage timeout whatever happens to the connection.
		if s.pingOut || idle >= cfg.PingInterval.Milliseconds() {
			s.abort(x)
		} else {
			x.schedule(now.Add(cfg.PingInterval - time.Duration(idle)*time.Millisecond))
		}
	case stHelloing, stReady:
		switch {
		case s.leaving():
			// Only the close answer is written now; the deletes and the
			// read it waits for end within the storage timeout.
		case s.pingOut:
			// Any inbound frame clears pingOut, and this deadline was set
			// PongTimeout after the ping: nothing answered.
			s.fail(x, "pong_timeout", ws.StatusGoingAway, "no answer to ping")
		case idle >= cfg.PingInterval.Milliseconds():
			s.pingOut = true
			x.Out = ws.AppendFrame(x.Out, ws.OpPing, nil)
			x.Metrics.Pings.Inc()
			x.schedule(now.Add(cfg.PongTimeout))
		case s.flow != nil && s.flow.retry:
			// A failed storage read, tried again (retryCheck); the
			// keepalive's deadline comes back once it is done.
			if s.retryCheck(x, now) {
				x.schedule(now.Add(cfg.PingInterval - time.Duration(idle)*time.Millisecond))
			}
		default:
			x.schedule(now.Add(cfg.PingInterval - time.Duration(idle)*time.Millisecond))
			// A safety net under the fan-out: a change that did not
			// reach this client yet goes out now.
			s.Broadcast(x)
		}
	}
}
