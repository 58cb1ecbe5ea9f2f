package engine

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/autopush-go/autopush/internal/protocol"
)

// The internal node API, on its own listener (Config.RouterListen), never
// the public one:
//
//	PUT    /push/{uaid}                 deliver now: 200 written to the
//	                                    client's socket, 404 not connected
//	                                    here, 503 busy (store and notify)
//	PUT    /notif/{uaid}                check storage: 200 checking, 202
//	                                    busy (will check when acks drain),
//	                                    404 not here
//	DELETE /notif/{uaid}/{connected_at} drop a connection at least as old
//	                                    as connected_at: 200 closed, 404
//
// Callers authenticate with "Authorization: Bearer <NodeSecret>"; with no
// secret configured only loopback callers are served. A shared secret,
// not an allow-list, because endpoint nodes scale and move while the
// secret stays in the deployment's configuration.
//
// The dockerflow routes (/__heartbeat__, /__lbheartbeat__, /__version__),
// /health and /metrics are served here too, without authentication.

// loopWait bounds how long an API call waits for the connection's event
// loop to answer.
const loopWait = 2 * time.Second

// nodeRoutes is the node API's route table: ServeMux patterns and their
// handlers.
func (srv *Server) nodeRoutes() []nodeRoute {
	return []nodeRoute{
		{"PUT /push/{uaid}", srv.authed(srv.handlePush)},
		{"PUT /notif/{uaid}", srv.authed(srv.handleNotif)},
		{"DELETE /notif/{uaid}/{connected_at}", srv.authed(srv.handleDrop)},
		{"GET /__heartbeat__", srv.handleHeartbeat},
		{"GET /__lbheartbeat__", srv.handleLBHeartbeat},
		{"GET /__version__", srv.handleVersion},
		{"GET /health", srv.handleHealth},
		{"GET /metrics", srv.handleMetrics},
	}
}

type nodeRoute struct {
	pattern string
	handler http.HandlerFunc
}

func (srv *Server) nodeAPI() http.Handler {
	mux := http.NewServeMux()
	for _, r := range srv.nodeRoutes() {
		mux.HandleFunc(r.pattern, r.handler)
	}
	return mux
}

// NodeAPIRoutes lists the node API's routes as ServeMux patterns
// ("METHOD /path/{param}"), so its OpenAPI document in docs/ can be
// checked against the server. Safe for concurrent use.
func (srv *Server) NodeAPIRoutes() []string {
	var out []string
	for _, r := range srv.nodeRoutes() {
		out = append(out, r.pattern)
	}
	return out
}

func (srv *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !srv.authorized(r) {
			srv.metrics.apiUnauthorized.Inc()
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

func (srv *Server) authorized(r *http.Request) bool {
	if srv.cfg.NodeSecret == "" {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		ip := net.ParseIP(host)
		return err == nil && ip != nil && ip.IsLoopback()
	}
	want := "Bearer " + srv.cfg.NodeSecret
	got := r.Header.Get("Authorization")
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// sessionFor resolves the {uaid} path value to the session holding it.
func (srv *Server) sessionFor(w http.ResponseWriter, r *http.Request) *session {
	uaid, ok := protocol.ParseUAID(r.PathValue("uaid"))
	if !ok {
		http.Error(w, "invalid uaid", http.StatusBadRequest)
		return nil
	}
	s := srv.registry.get(uaid)
	if s == nil {
		http.Error(w, "not connected here", http.StatusNotFound)
	}
	return s
}

// onLoopWait runs fn on s's event loop and returns its status, or 404 when
// the connection went away first. If the loop does not answer within
// loopWait the caller gets 503 (the endpoint stores the message), and fn,
// should it run later, does not run at all: a delivery must never happen
// after its sender was told "busy", or the client would get it twice.
func onLoopWait(s *session, fn func() int) int {
	const (
		pending = iota
		claimed // fn is running or ran: its answer is the answer
		gaveUp  // the caller answered 503: fn must not run
	)
	var state atomic.Int32
	res := make(chan int, 1)
	err := s.onLoop(func() {
		if state.CompareAndSwap(pending, claimed) {
			res <- fn()
		}
	})
	if err != nil {
		return http.StatusNotFound
	}
	t := time.NewTimer(loopWait)
	defer t.Stop()
	select {
	case code := <-res:
		return code
	case <-t.C:
		if state.CompareAndSwap(pending, gaveUp) {
			return http.StatusServiceUnavailable
		}
		return <-res // fn claimed the work just in time: wait for it
	}
}

func (srv *Server) handlePush(w http.ResponseWriter, r *http.Request) {
	s := srv.sessionFor(w, r)
	if s == nil {
		srv.metrics.directMiss.Inc()
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(srv.cfg.MaxMessageSize)*2))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	var n protocol.Notification
	if err := protocol.DecodeNotification(body, &n); err != nil {
		http.Error(w, "invalid notification: "+err.Error(), http.StatusBadRequest)
		return
	}
	code := onLoopWait(s, func() int { return s.deliverDirect(&n) })
	w.WriteHeader(code)
}

func (srv *Server) handleNotif(w http.ResponseWriter, r *http.Request) {
	s := srv.sessionFor(w, r)
	if s == nil {
		return
	}
	w.WriteHeader(onLoopWait(s, s.requestCheck))
}

func (srv *Server) handleDrop(w http.ResponseWriter, r *http.Request) {
	connectedAt, err := strconv.ParseInt(r.PathValue("connected_at"), 10, 64)
	if err != nil {
		http.Error(w, "invalid connected_at", http.StatusBadRequest)
		return
	}
	s := srv.sessionFor(w, r)
	if s == nil {
		return
	}
	w.WriteHeader(onLoopWait(s, func() int { return s.evict(connectedAt) }))
}

func (srv *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), srv.cfg.StorageTimeout)
	defer cancel()
	status, code := "ok", http.StatusOK
	if err := srv.store.Health(ctx); err != nil {
		status, code = "error", http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "storage": status, "draining": srv.draining.Load()})
}

func (srv *Server) handleLBHeartbeat(w http.ResponseWriter, _ *http.Request) {
	if srv.draining.Load() {
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
		"draining":    srv.draining.Load(),
		"max":         srv.maxConns,
	})
}

func (srv *Server) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	srv.metrics.set.WritePrometheus(w)
	// go_goroutines, go_memstats_*, process_resident_memory_bytes, ...
	metrics.WriteProcessMetrics(w)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
