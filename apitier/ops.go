package apitier

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/internal/dockerflow"
	"github.com/autopush-go/autopush/internal/endpointdiag"
	"github.com/autopush-go/autopush/internal/exposition"
	"github.com/autopush-go/autopush/internal/listener"
	"github.com/autopush-go/autopush/internal/profiling"
)

// Operations routes (dockerflow and the reference's), unauthenticated:
//
//	GET /__heartbeat__    storage health: 200 {"status":"ok",...} or 503
//	GET /__lbheartbeat__  200 while serving, 503 once shutting down
//	GET /__version__      the version.json file
//	GET /health           storage health with uptime and version (200/503)
//	GET /status           200 {"status":"ok","version":...}, no storage call
//	GET /__milestones__   with reference-milestones, tracked messages by
//	                      current state in the reference's shape (200/503);
//	                      off, 404 as an unknown path
//
// and, on its own listener (metrics-listen), never the public one:
//
//	GET /metrics          Prometheus text format, process metrics too
//	GET /__endpoint__     an endpoint's diagnosis, with an admin token (admin.go)

func (s *Server) handleHeartbeat(ctx context.Context, c *app.RequestContext, _ *reqState) {
	status, code := s.health(ctx)
	httpapi.WriteJSON(c, code, map[string]any{"status": status, "storage": status, "draining": s.draining.Load()})
}

func (s *Server) handleLBHeartbeat(_ context.Context, c *app.RequestContext, _ *reqState) {
	if s.draining.Load() {
		httpapi.WriteJSON(c, http.StatusServiceUnavailable, map[string]any{"status": "draining"})
		return
	}
	httpapi.WriteJSON(c, http.StatusOK, map[string]any{"status": "ok"})
}

func (s *Server) handleVersion(_ context.Context, c *app.RequestContext, _ *reqState) {
	c.Data(http.StatusOK, "application/json", s.version)
}

func (s *Server) handleHealth(ctx context.Context, c *app.RequestContext, _ *reqState) {
	status, code := s.health(ctx)
	httpapi.WriteJSON(c, code, map[string]any{
		"status":   status,
		"storage":  status,
		"version":  s.versionString(),
		"uptime_s": int64(time.Since(s.started).Seconds()),
		"draining": s.draining.Load(),
	})
}

func (s *Server) handleStatus(_ context.Context, c *app.RequestContext, _ *reqState) {
	httpapi.WriteJSON(c, http.StatusOK, map[string]any{"status": "ok", "version": s.versionString()})
}

// handleReferenceMilestones is GET /__milestones__ on this listener: the
// reference's flat {"state": count} of tracked messages by the state
// they are in now (apitier/tracking, reference.go). Not the operator's
// /__milestones__ on metrics-listen, which counts milestones reached.
func (s *Server) handleReferenceMilestones(ctx context.Context, c *app.RequestContext, st *reqState) {
	if !s.cfg.ReferenceMilestones {
		st.x.Fail(errNotFound)
		return
	}
	counts, err := s.tracker.ReferenceCounts(ctx)
	if err != nil {
		st.x.Fail(s.storageError("read live counts", err))
		return
	}
	httpapi.WriteJSON(c, http.StatusOK, counts)
}

// writeMetrics writes every series GET /metrics serves (exposition.Write
// groups them and adds each family's HELP and TYPE).
func (s *Server) writeMetrics(b io.Writer) {
	s.metrics.set.WritePrometheus(b)
	s.regAPI.WriteMetrics(b)  // autoendpoint_bridge_auth_failures_total
	s.pushAPI.WriteMetrics(b) // autoendpoint_push_*
	s.recAPI.WriteMetrics(b)  // autoendpoint_receipts_total
	if s.pushes != nil {
		s.pushes.WriteMetrics(b) // autosender_*
	}
	s.tracker.WriteMetrics(b) // autopush_milestones_total, from storage
	for _, write := range s.extraMetrics {
		write(b)
	}
	// go_goroutines, go_memstats_*, process_resident_memory_bytes, ...
	metrics.WriteProcessMetrics(b)
}

// opsListener serves GET /metrics on metrics-listen: the operator's
// numbers (rates, node names, errors) are not for the public port's
// strangers. net/http, with its own time limits: one route, scraped by
// one monitoring system.
type opsListener struct {
	ln  net.Listener
	srv *http.Server
}

// opsRoute is a route AlsoOps adds.
type opsRoute struct {
	pattern string
	h       http.Handler
}

func (s *Server) startOps() (*opsListener, error) {
	ln, err := net.Listen("tcp", s.cfg.MetricsListen)
	if err != nil {
		return nil, &listener.ListenError{Tier: "autoendpoint", Setting: "metrics-listen", Addr: s.cfg.MetricsListen, Off: `""`, Err: err}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", exposition.Handler(s.writeMetrics))
	mux.HandleFunc("GET /__milestones__", s.tracker.ServeMilestones)
	mux.HandleFunc("GET "+endpointdiag.Route, s.serveEndpointDiag) // admin.go
	if s.cfg.Pprof {
		profiling.Register(mux)
	}
	for _, r := range s.extraOps {
		mux.Handle(r.pattern, r.h)
	}
	o := &opsListener{ln: ln, srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    8 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}}
	go o.srv.Serve(ln)
	return o, nil
}

// closeOps stops the metrics listener at once (a failed Start).
func (s *Server) closeOps() {
	if s.ops != nil {
		s.ops.srv.Close()
	}
}

// health asks storage whether it can serve.
func (s *Server) health(ctx context.Context) (string, int) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StorageTimeout)
	defer cancel()
	if err := s.store.Health(ctx); err != nil {
		s.log.Warn("heartbeat: storage unhealthy", "error", err)
		return "error", http.StatusServiceUnavailable
	}
	return "ok", http.StatusOK
}

// versionString is the "version" of version.json, "unknown" without one.
func (s *Server) versionString() string { return dockerflow.VersionString(s.version) }
