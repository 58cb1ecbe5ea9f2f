package engine

import (
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/autopush-go/autopush/engine/session"
	"github.com/autopush-go/autopush/engine/ws"
)

// The per-source cap (max-connections-per-source) is taken as gnet hands
// a connection to its loop (OnOpen) and given back as gnet closes it
// (OnClose): a connection over it never gets a session, a slot in the
// wheel, or an fd for longer than its accept. The count lives in
// listener.Sources, one map entry per source with connections open,
// nothing per connection: OnClose finds the source again from the peer
// address gnet keeps until then.

// sourceRefusal is written to a connection over the cap before it is
// closed: an HTTP answer, as the push API gives (Firefox backs off and
// retries as for any failed handshake).
var sourceRefusal = ws.AppendHTTPResponse(nil, 503, "too many connections from this address\n", "Retry-After", "30")

// capLogEvery bounds the log lines of refusals: an operator whose load
// balancer is not exempt learns it at once, a flood does not fill the log.
const capLogEvery = time.Minute

// admit takes a place for c under max-connections and the per-source
// cap, or refuses it: the answer to write, and gnet.Close. Refusing at
// accept, not only at the upgrade, bounds the descriptors a crowd of
// connections that never upgrade can hold: gnet stops listening for good
// when an accept fails for want of one.
func (srv *Server) admit(c gnet.Conn) ([]byte, gnet.Action, bool) {
	if int(srv.connections.Load()) >= srv.maxConns {
		srv.metrics.refusedFull.Inc()
		discardUnread(c.Fd())
		return session.BusyAnswer, gnet.Close, false
	}
	src := srv.sources.Of(c.RemoteAddr())
	if srv.sources.Take(src) {
		return nil, gnet.None, true
	}
	srv.metrics.refusedSource.Inc()
	if srv.capLog.Allow(capLogEvery) {
		srv.log.Warn("websocket connections refused: a source holds max-connections-per-source (a load balancer's addresses belong in per-source-exempt)",
			"source", src.String(), "max_connections_per_source", srv.cfg.MaxConnectionsPerSource,
			"refused_total", srv.metrics.refusedSource.Get())
	}
	discardUnread(c.Fd())
	return sourceRefusal, gnet.Close, false
}

// release gives back c's place: gnet closes it, and it was admitted.
func (srv *Server) release(c gnet.Conn) { srv.sources.Release(srv.sources.Of(c.RemoteAddr())) }

// discardUnread reads what the client sent already (its handshake,
// usually: it writes it as soon as it connects), at most 64 KiB: a close
// with unread bytes resets the connection, and the reset can destroy the
// answer in the client's receive buffer before it reads it. The socket
// does not block (gnet's).
func discardUnread(fd int) {
	var buf [4096]byte
	for range 16 {
		if n, err := syscall.Read(fd, buf[:]); n <= 0 || err != nil {
			return
		}
	}
}
