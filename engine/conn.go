package engine

import (
	"context"
	"sync"

	"github.com/panjf2000/gnet/v2"

	"github.com/autopush-go/autopush/engine/session"
)

// conn is one connection: the gnet conn, its session core and its place
// in the timing wheel. It is owned by the connection's event loop: every
// field but due/scheduled/slot (the wheel's, under its lock) is read and written
// only there, in gnet callbacks or in functions handed to Server.onLoop by
// the node API and the storage workers.
//
// Kept small, with no pointer back to the Server (the glue always has
// one at hand): with gnet's own state a connection must stay within the
// idle connection budget (TestConnSize).
type conn struct {
	c gnet.Conn

	// The wheel's, under its lock (Timing). The deadline is 32 bits, in
	// ms from the wheel's start and compared wrapping (engine/wheel), as
	// the session's own times: 64 bits would put conn past its budget.
	due       uint32
	slot      uint16 // 1 + the wheel slot it is filed in; 0: in none
	scheduled bool   // due is a deadline; false: none

	flushing uint8 // flushIdle, flushRunning, flushClosed
	s        session.Session
}

// Timing is the connection's place in the timing wheel (engine/wheel).
func (cn *conn) Timing() (*uint32, *uint16, *bool) { return &cn.due, &cn.slot, &cn.scheduled }

const (
	flushIdle    uint8 = iota
	flushRunning       // inside c.Write
	flushClosed        // gnet closed the connection inside that Write
)

// loopCtx is one transition of one connection: the session's Ctx, and the
// connection it runs for as the session's Host.
type loopCtx struct {
	session.Ctx
	srv *Server
	cn  *conn
}

// ctxPool recycles transition contexts: a loop takes one per callback, so
// no connection holds one while idle and the hot path allocates none.
var ctxPool = sync.Pool{New: func() any { return &loopCtx{Ctx: session.Ctx{Out: make([]byte, 0, 2048)}} }}

// begin takes a context for a transition of cn.
func (srv *Server) begin(cn *conn) *loopCtx {
	lc := ctxPool.Get().(*loopCtx)
	lc.srv, lc.cn = srv, cn
	lc.Env, lc.Host = srv.env, lc
	return lc
}

// end applies what the transition produced and recycles lc. It reports
// whether the connection is still open: false when it had closed already,
// is closing, or its write failed (gnet closed it inside the write, and
// the session's Close has run).
func (lc *loopCtx) end() bool {
	open := lc.apply()
	lc.release()
	return open
}

// release recycles lc without applying anything more.
func (lc *loopCtx) release() {
	lc.Reset()
	lc.srv, lc.cn = nil, nil
	ctxPool.Put(lc)
}

// apply writes Out, then queues Jobs, closes if asked and reschedules the
// session's timer. A write that fails makes gnet close the connection
// inside c.Write: OnClose runs, the fd is closed, and the main reactor may
// hand the same fd number to a new connection at once, which a later
// write through c would reach. So after a failed write nothing else of
// the transition is applied, and nothing is ever written once the session
// is closed.
func (lc *loopCtx) apply() bool {
	srv, cn, x := lc.srv, lc.cn, &lc.Ctx
	if cn.s.Closed() {
		return false
	}
	if len(x.Out) > 0 {
		cn.flushing = flushRunning
		cn.c.Write(x.Out)
		if cn.flushing == flushClosed {
			cn.flushing = flushIdle
			srv.closed(cn, x.Pending)
			return false
		}
		cn.flushing = flushIdle
		srv.metrics.sent.Add(x.SentDirect)
		srv.metrics.sentStored.Add(x.SentStored)
		x.Out, x.SentDirect, x.SentStored, x.Pending = x.Out[:0], 0, 0, 0
	}
	for i := range x.Jobs {
		if !srv.submit(cn, x.Jobs[i]) {
			// The rest of the transition's work is shed with the
			// connection: the client reconnects, possibly elsewhere.
			clear(x.Jobs)
			x.Jobs = x.Jobs[:0]
			cn.s.Overloaded(x)
			return lc.apply() // its close frame
		}
	}
	if x.Close {
		cn.c.Close()
	}
	if x.Due != 0 {
		srv.wheel.Schedule(cn, x.Due)
	}
	return !x.Close
}

// onLoop runs fn as a transition of cn on its event loop, unless the
// connection has closed by then. Safe for concurrent use: this is how
// storage results and node API calls reach a session.
// It counts as pending work until fn has run (Server.Pending).
func (srv *Server) onLoop(cn *conn, fn func(x *session.Ctx)) error {
	srv.pending.Add(1)
	err := cn.c.EventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		defer srv.pending.Add(-1)
		if !cn.s.Closed() {
			lc := srv.begin(cn)
			fn(&lc.Ctx)
			lc.end()
		}
		return nil
	}))
	if err != nil {
		srv.pending.Add(-1)
	}
	return err
}

// Enroll implements session.Host: the node's registry now maps the
// session's uaid to this connection, and an older local connection of
// the same user agent is evicted.
func (lc *loopCtx) Enroll() bool {
	srv := lc.srv
	old, ok := srv.registry.put(lc.cn)
	if old != nil {
		connectedAt := lc.cn.s.ConnectedAt()
		srv.onLoop(old, func(x *session.Ctx) { old.s.Evict(x, connectedAt) })
	}
	return ok
}

// Unenroll implements session.Host.
func (lc *loopCtx) Unenroll() { lc.srv.registry.remove(lc.cn) }

// closed runs once the connection closed: the session ends and leaves its
// work to a storage worker. unsent is how many of the notifications just
// handed to a failed write never went out.
func (srv *Server) closed(cn *conn, unsent int) {
	srv.connections.Add(-1)
	srv.wheel.Unschedule(cn)
	// A session with a uaid may be in the registry from its hello on;
	// remove only removes cn itself.
	if cn.s.UAID() != ([16]byte{}) {
		srv.registry.remove(cn)
	}
	if leave, ok := cn.s.Close(srv.env, unsent); ok {
		srv.leave(leave)
	}
}
