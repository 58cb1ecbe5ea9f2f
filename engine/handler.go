package engine

import (
	"context"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// The gnet event handler: bytes in from the loop's buffer to the session
// core, its effects out (loopCtx.apply); no goroutine and no I/O besides the
// loop's own.

// maxOutbound bounds what may wait unsent for one client: far above
// MaxUnacked notifications, far below what a leak would need.
const maxOutbound = 256 << 10

// OnOpen gives the connection a session, unless its source holds
// max-connections-per-source already (persource.go); the upgrade must
// arrive within HelloTimeout too.
func (srv *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if refusal, action, ok := srv.admit(c); !ok {
		return refusal, action
	}
	srv.connections.Add(1)
	cn := &conn{c: c}
	c.SetContext(cn)
	lc := srv.begin(cn)
	cn.s.Open(&lc.Ctx)
	lc.end()
	return nil, gnet.None
}

// OnTraffic feeds the inbound buffer to the session, which consumes every
// complete unit (the upgrade request, then frames) and leaves a partial
// one for later.
func (srv *Server) OnTraffic(c gnet.Conn) gnet.Action {
	cn := c.Context().(*conn)
	buf, _ := c.Peek(-1)
	lc := srv.begin(cn)
	n := cn.s.Consume(&lc.Ctx, buf)
	lc.end()
	if cn.s.Closed() {
		// A write failed and gnet closed c inside it: c is released.
		return gnet.None
	}
	// gnet's Discard(0) would drop everything buffered, partial frame
	// included: discard only what was consumed.
	if n > 0 {
		c.Discard(n)
	}
	// A client that sends (pings, say) but never reads would grow the
	// outbound buffer without bound: cut it off.
	if c.OutboundBuffered() > maxOutbound && !cn.s.Closing() {
		lc := srv.begin(cn)
		cn.s.SlowReader(&lc.Ctx)
		lc.end()
	}
	return gnet.None
}

// OnClose ends the session. Inside a failing write (loopCtx.apply) it only
// marks the connection: apply then knows which notifications never went
// out and ends the session itself.
func (srv *Server) OnClose(c gnet.Conn, _ error) gnet.Action {
	cn, _ := c.Context().(*conn)
	if cn == nil {
		return gnet.None // refused at OnOpen
	}
	srv.release(c)
	if cn.s.Closed() {
		return gnet.None
	}
	if cn.flushing == flushRunning {
		cn.flushing = flushClosed
		return gnet.None
	}
	srv.closed(cn, 0)
	return gnet.None
}

// runWheel is the timing wheel's ticker: it sleeps until the next slot
// holding a connection is due, or until one is filed before that.
func (srv *Server) runWheel() {
	defer srv.bg.Done()
	t := time.NewTimer(srv.wheel.UntilNext(time.Now()))
	defer t.Stop()
	for {
		select {
		case <-srv.quit:
			return
		case <-srv.wheel.Woken():
		case <-t.C:
			srv.tick()
		}
		t.Reset(srv.wheel.UntilNext(time.Now()))
	}
}

// tick advances the timing wheel and runs the due sessions' checks on
// their loops: one task per loop for all its due sessions, not one each,
// so an idle node's keepalives wake each loop at most once a tick however
// many connections it holds.
func (srv *Server) tick() {
	srv.dueSlice = srv.wheel.Advance(time.Now(), srv.dueSlice[:0])
	for len(srv.dueSlice) > 0 {
		loop := srv.dueSlice[0].c.EventLoop()
		var mine []*conn
		rest := srv.dueSlice[:0]
		for _, cn := range srv.dueSlice {
			if cn.c.EventLoop() == loop {
				mine = append(mine, cn)
			} else {
				rest = append(rest, cn)
			}
		}
		clear(srv.dueSlice[len(rest):])
		srv.dueSlice = rest
		srv.tickOnLoop(loop, mine)
	}
}

// tickOnLoop runs the checks of the due sessions cns, all of loop, as
// one task on it; a connection closed by then is skipped.
func (srv *Server) tickOnLoop(loop gnet.EventLoop, cns []*conn) {
	srv.pending.Add(1)
	err := loop.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		defer srv.pending.Add(-1)
		for _, cn := range cns {
			if !cn.s.Closed() {
				lc := srv.begin(cn)
				cn.s.Tick(&lc.Ctx)
				lc.end()
			}
		}
		return nil
	}))
	if err != nil {
		srv.pending.Add(-1)
	}
}
