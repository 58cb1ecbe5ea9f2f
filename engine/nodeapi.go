package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/panjf2000/gnet/v2"

	"github.com/autopush-go/autopush/engine/session"
	"github.com/autopush-go/autopush/internal/exposition"
	"github.com/autopush-go/autopush/internal/nodeapi"
	"github.com/autopush-go/autopush/internal/profiling"
	"github.com/autopush-go/autopush/internal/protocol"
)

// The internal node API (internal/nodeapi has the contract), on its own
// listener (Config.RouterListen), never the public one. The dockerflow
// routes (/__heartbeat__, /__lbheartbeat__, /__version__), /health and
// /metrics are served there too, without authentication.

// loopWait bounds how long an API call waits for the connection's event
// loop to answer.
const loopWait = 2 * time.Second

// nodeRoutes is the node API's route table.
func (srv *Server) nodeRoutes() []nodeapi.Route {
	return append(nodeapi.Routes(apiNode{srv}, nodeapi.ServerConfig{
		Secret:       srv.cfg.NodeSecret,
		MaxBody:      int64(srv.cfg.MaxMessageSize) * 2,
		BodyTimeout:  srv.cfg.NodeAPIBodyTimeout,
		Unauthorized: srv.metrics.apiUnauthorized.Inc,
	}),
		nodeapi.Route{Pattern: "GET /__heartbeat__", Handler: srv.handleHeartbeat},
		nodeapi.Route{Pattern: "GET /__lbheartbeat__", Handler: srv.handleLBHeartbeat},
		nodeapi.Route{Pattern: "GET /__version__", Handler: srv.handleVersion},
		nodeapi.Route{Pattern: "GET /health", Handler: srv.handleHealth},
		nodeapi.Route{Pattern: "GET /metrics", Handler: srv.handleMetrics},
	)
}

func (srv *Server) nodeAPI() http.Handler {
	mux := http.NewServeMux()
	for _, r := range srv.nodeRoutes() {
		mux.HandleFunc(r.Pattern, r.Handler)
	}
	if srv.cfg.Pprof {
		profiling.Register(mux)
	}
	return mux
}

// NodeAPIRoutes lists the node API's routes as ServeMux patterns
// ("METHOD /path/{param}"), so its OpenAPI document in docs/ can be
// checked against the server. Safe for concurrent use.
func (srv *Server) NodeAPIRoutes() []string {
	var out []string
	for _, r := range srv.nodeRoutes() {
		out = append(out, r.Pattern)
	}
	return out
}

// apiNode is the node as the node API sees it: each call runs as a
// transition on the connection's loop.
type apiNode struct{ srv *Server }

func (n apiNode) Deliver(uaid [16]byte, notif *protocol.Notification, connectedAt int64) int {
	m := n.srv.metrics
	cn := n.srv.registry.get(uaid)
	if cn == nil {
		m.directMiss.Inc()
		return nodeapi.StatusNotHere
	}
	return n.srv.onLoopWait(cn, func(lc *loopCtx) int {
		if cn.s.Stale(connectedAt) {
			m.directStale.Inc()
			return nodeapi.StatusStale
		}
		got := cn.s.Deliver(&lc.Ctx, notif)
		if !lc.apply() && cn.s.Closed() && got == session.Delivered {
			// The write failed and closed the connection: the endpoint
			// stores the message instead (the session's Close did not).
			got = session.NotHere
		}
		switch got {
		case session.Delivered:
			m.directOK.Inc()
		case session.Busy:
			m.directBusy.Inc()
		default:
			m.directMiss.Inc()
		}
		return status(got)
	})
}

func (n apiNode) Check(uaid [16]byte) int {
	cn := n.srv.registry.get(uaid)
	if cn == nil {
		return nodeapi.StatusNotHere
	}
	return n.srv.onLoopWait(cn, func(lc *loopCtx) int {
		got := cn.s.Check(&lc.Ctx)
		lc.apply()
		return status(got)
	})
}

func (n apiNode) Drop(uaid [16]byte, connectedAt int64) int {
	cn := n.srv.registry.get(uaid)
	if cn == nil {
		return nodeapi.StatusNotHere
	}
	return n.srv.onLoopWait(cn, func(lc *loopCtx) int {
		got := cn.s.Evict(&lc.Ctx, connectedAt)
		lc.apply()
		return status(got)
	})
}

// status is the node API's answer for what a session call did.
func status(o session.Outcome) int {
	switch o {
	case session.Delivered:
		return nodeapi.StatusDelivered
	case session.Busy:
		return nodeapi.StatusBusy
	case session.Checking:
		return nodeapi.StatusChecking
	case session.CheckLater:
		return nodeapi.StatusCheckLater
	case session.Evicted:
		return nodeapi.StatusDropped
	}
	return nodeapi.StatusNotHere
}

// onLoopWait runs fn as a transition on cn's event loop and returns its
// status, or 404 when the connection closed before fn could run. fn applies the
// transition's effects itself (it needs to know whether its write went
// out). If the loop does not answer within loopWait the caller gets 503
// (the endpoint stores the message), and fn, should it run later, does
// not run at all: a delivery must never happen after its sender was told
// "busy", or the client would get it twice.
func (srv *Server) onLoopWait(cn *conn, fn func(lc *loopCtx) int) int {
	const (
		pending = iota
		claimed // fn is running or ran: its answer is the answer
		gaveUp  // the caller answered 503: fn must not run
	)
	var state atomic.Int32
	res := make(chan int, 1)
	err := cn.c.EventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		if !state.CompareAndSwap(pending, claimed) {
			return nil
		}
		if cn.s.Closed() {
			res <- nodeapi.StatusNotHere
			return nil
		}
		lc := srv.begin(cn)
		code := fn(lc)
		lc.release()
		res <- code
		return nil
	}))
	if err != nil {
		return nodeapi.StatusNotHere
	}
	t := time.NewTimer(loopWait)
	defer t.Stop()
	select {
	case code := <-res:
		return code
	case <-t.C:
		if state.CompareAndSwap(pending, gaveUp) {
			return nodeapi.StatusBusy
		}
		return <-res // fn claimed the work just in time: wait for it
	}
}

func (srv *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), srv.cfg.StorageTimeout)
	defer cancel()
	status, code := "ok", http.StatusOK
	err := srv.store.Health(ctx)
	srv.noteHealth(err)
	if err != nil {
		status, code = "error", http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "storage": status, "draining": srv.env.Draining.Load()})
}

func (srv *Server) handleLBHeartbeat(w http.ResponseWriter, _ *http.Request) {
	if srv.env.Draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "draining"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

func (srv *Server) handleVersion(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(srv.version)
}

func (srv *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"status":      "ok",
		"connections": srv.connections.Load(),
		"clients":     srv.registry.len(),
		"draining":    srv.env.Draining.Load(),
		"max":         srv.maxConns,
	})
}

// handleMetrics serves the node's series and the process's
// (go_goroutines, go_memstats_*, process_resident_memory_bytes, ...).
func (srv *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	exposition.Handler(srv.metrics.set.WritePrometheus, metrics.WriteProcessMetrics)(w, r)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
