package apitier

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/internal/dockerflow"
)

// Operations routes (dockerflow and the reference's), unauthenticated:
//
//	GET /__heartbeat__    storage health: 200 {"status":"ok",...} or 503
//	GET /__lbheartbeat__  200 while serving, 503 once shutting down
//	GET /__version__      the version.json file
//	GET /health           storage health with uptime and version (200/503)
//	GET /status           200 {"status":"ok","version":...}, no storage call
//	GET /metrics          VictoriaMetrics text format, process metrics too

func (s *Server) handleHeartbeat(ctx context.Context, c *app.RequestContext, _ *reqState) {
	status, code := s.health(ctx)
	writeJSON(c, code, map[string]any{"status": status, "storage": status, "draining": s.draining.Load()})
}

func (s *Server) handleLBHeartbeat(_ context.Context, c *app.RequestContext, _ *reqState) {
	if s.draining.Load() {
		writeJSON(c, http.StatusServiceUnavailable, map[string]any{"status": "draining"})
		return
	}
	writeJSON(c, http.StatusOK, map[string]any{"status": "ok"})
}

func (s *Server) handleVersion(_ context.Context, c *app.RequestContext, _ *reqState) {
	c.Data(http.StatusOK, "application/json", s.version)
}

func (s *Server) handleHealth(ctx context.Context, c *app.RequestContext, _ *reqState) {
	status, code := s.health(ctx)
	writeJSON(c, code, map[string]any{
		"status":   status,
		"storage":  status,
		"version":  s.versionString(),
		"uptime_s": int64(time.Since(s.started).Seconds()),
		"draining": s.draining.Load(),
	})
}

func (s *Server) handleStatus(_ context.Context, c *app.RequestContext, _ *reqState) {
	writeJSON(c, http.StatusOK, map[string]any{"status": "ok", "version": s.versionString()})
}

func (s *Server) handleMetrics(_ context.Context, c *app.RequestContext, _ *reqState) {
	var b bytes.Buffer
	s.metrics.set.WritePrometheus(&b)
	if s.pushes != nil {
		s.pushes.WriteMetrics(&b) // autosender_*
	}
	for _, write := range s.extraMetrics {
		write(&b)
	}
	// go_goroutines, go_memstats_*, process_resident_memory_bytes, ...
	metrics.WriteProcessMetrics(&b)
	c.Data(http.StatusOK, "text/plain; version=0.0.4", b.Bytes())
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

func writeJSON(c *app.RequestContext, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"status":"error"}`)
	}
	c.Data(code, "application/json", b)
}
