package apitier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/autopush-go/autopush/internal/dockerflow"
	"github.com/autopush-go/autopush/internal/nodeapi"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/cloudwego/hertz/pkg/app/server"
	"github.com/cloudwego/hertz/pkg/common/config"
	"github.com/cloudwego/hertz/pkg/common/hlog"
	"github.com/cloudwego/hertz/pkg/network/standard"

	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/storage"
)

// Server is one endpoint node: the public HTTP API on Hertz. Its methods
// are safe for concurrent use; Start and Shutdown are called once each.
type Server struct {
	cfg      Config
	log      *slog.Logger
	store    storage.Store
	keys     *token.Keys
	vapid    *vapid.Verifier
	nodes    *nodeapi.Client
	metrics  *apiMetrics
	version  []byte
	audience string // VAPID "aud": the endpoint URL's origin
	location string // Location prefix: endpoint URL + "/m/"
	started  time.Time
	pushes   PushService // the outbound sender's API (push.go); nil: off

	h        *server.Hertz
	ln       *trackingListener
	done     chan error
	draining atomic.Bool
}

// New prepares a node; Start runs it. The store is the caller's: Shutdown
// does not close it.
func New(cfg Config, store storage.Store, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys, err := token.ParseKeys(cfg.CryptoKey)
	if err != nil {
		return nil, fmt.Errorf("apitier: crypto-key: %w", err)
	}
	aud, err := origin(cfg.EndpointURL)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	hertzLogOnce.Do(quietHertz)
	hertzLog.Store(log)
	metrics := newMetrics()
	s := &Server{
		cfg: cfg, log: log, store: store, keys: keys,
		vapid: newVerifier(cfg),
		nodes: nodeapi.NewClient(nodeapi.ClientConfig{
			Secret: cfg.NodeSecret, Timeout: cfg.NodeTimeout, ConnectTimeout: cfg.NodeConnectTimeout,
			IdleConnsPerNode: cfg.NodeIdleConns, Observe: metrics.nodeCall,
		}),
		metrics:  metrics,
		version:  dockerflow.Version(cfg.VersionFile),
		audience: aud,
		location: strings.TrimRight(cfg.EndpointURL, "/") + "/m/",
		done:     make(chan error, 1),
	}
	return s, nil
}

// newVerifier configures VAPID verification from cfg.
func newVerifier(cfg Config) *vapid.Verifier {
	v := &vapid.Verifier{MaxSkew: cfg.VAPIDSkew, CacheSize: cfg.VAPIDCache, AnySub: cfg.VAPIDAnySub}
	if cfg.VAPIDSkew == 0 {
		v.MaxSkew = -1 // the verifier's 0 means its default
	}
	if cfg.VAPIDCache == 0 {
		v.CacheSize = -1
	}
	return v
}

// newHertz builds the HTTP server with every route; Start passes the
// listener, the handler tests none.
func (s *Server) newHertz(opts ...config.Option) *server.Hertz {
	opts = append([]config.Option{
		server.WithHostPorts(s.cfg.Listen),
		// Bodies are read by the handler, up to max-data-bytes + 1, so a
		// body of any size gets the JSON 413 (Hertz's own limit answers
		// in plain text). Smaller bodies arrive whole before the handler.
		server.WithStreamBody(true),
		server.WithMaxRequestBodySize(s.cfg.MaxDataBytes + 1),
		server.WithDisablePreParseMultipartForm(true),
		server.WithMaxHeaderBytes(maxHeaderBytes),
		server.WithReadTimeout(s.cfg.ReadTimeout),
		// Not 0: the connection would close after each request on the
		// standard transport (and on netpoll Hertz 0.10.6 then resets
		// keep-alive connections sending requests back to back).
		server.WithIdleTimeout(s.cfg.IdleTimeout),
		server.WithExitWaitTime(s.cfg.ShutdownTimeout),
		server.WithRedirectTrailingSlash(false),
		server.WithHandleMethodNotAllowed(true),
		server.WithDisablePrintRoute(true),
	}, opts...)
	h := server.New(opts...)
	h.Use(s.cors)
	h.POST("/wpush/:version/:token", s.handle(routeWPushV1, s.handlePush))
	h.POST("/wpush/:token", s.handle(routeWPushV1, s.handlePush))
	h.DELETE("/m/:message_id", s.handle(routeMessage, s.handleDelete))
	h.GET("/__heartbeat__", s.handle(routeHeartbeat, s.handleHeartbeat))
	h.GET("/__lbheartbeat__", s.handle(routeLB, s.handleLBHeartbeat))
	h.GET("/__version__", s.handle(routeVersion, s.handleVersion))
	h.GET("/health", s.handle(routeHealth, s.handleHealth))
	h.GET("/status", s.handle(routeStatus, s.handleStatus))
	h.GET("/metrics", s.handle(routeMetrics, s.handleMetrics))
	// The outbound sender's API (push.go).
	h.POST("/push", s.handle(routePushPost, s.handlePushPost))
	h.GET("/push/:id", s.handle(routePushGet, s.handlePushGet))
	h.GET("/push", s.handle(routePushList, s.handlePushList))
	h.NoRoute(s.handle(routeNotFound, func(_ context.Context, c *app.RequestContext, st *reqState) {
		s.writeError(c, st, errNotFound)
	}))
	h.NoMethod(s.handle(routeNoMethod, func(_ context.Context, c *app.RequestContext, st *reqState) {
		s.writeError(c, st, errNoMethod)
	}))
	return h
}

// maxHeaderBytes bounds a request's header block: crypto headers are at
// most storage's 4 KiB, a VAPID header well under 2 KiB.
const maxHeaderBytes = 32 << 10

// Start listens and serves, returning once the listener accepts
// connections (a listen address with port 0 gets a free port; Addr says
// which).
func (s *Server) Start() error {
	raw, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("apitier: listen %s: %w", s.cfg.Listen, err)
	}
	ln := newTrackingListener(raw)
	s.ln = ln
	// The standard transport (a goroutine per connection, as net/http)
	// serves the tracking listener, which netpoll cannot (conns.go).
	s.h = s.newHertz(server.WithListener(ln), server.WithTransport(standard.NewTransporter))
	s.started = time.Now()
	go func() { s.done <- s.h.Run() }()
	deadline := time.Now().Add(10 * time.Second)
	for !s.h.IsRunning() {
		select {
		case err := <-s.done:
			ln.Close()
			if err == nil {
				err = errors.New("stopped")
			}
			return fmt.Errorf("apitier: serve %s: %w", ln.Addr(), err)
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("apitier: serve %s: not running after 10s", ln.Addr())
		}
	}
	s.log.Info("autoendpoint started", "listen", s.Addr(), "endpoint_url", s.cfg.EndpointURL,
		"vapid_aud", s.audience, "max_data_bytes", s.cfg.MaxDataBytes)
	return nil
}

// Addr is the listen address with the real port ("" before Start).
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops gracefully: /__lbheartbeat__ fails from now on, the
// listener closes, idle keep-alive connections are closed, and requests
// in flight finish (within ctx and shutdown-timeout). Every push answered
// 201 is stored or delivered before its answer, so nothing accepted is
// lost.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	if s.h == nil {
		return nil
	}
	stopped := make(chan error, 1)
	go func() { stopped <- s.h.Shutdown(ctx) }()
	var err error
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		s.ln.t.wakeIdle()
		select {
		case err = <-stopped:
			waiting = false
		case <-tick.C:
		}
	}
	select {
	case e := <-s.done:
		err = errors.Join(err, e)
	case <-ctx.Done():
		err = errors.Join(err, ctx.Err())
	}
	s.nodes.CloseIdle()
	if err == nil {
		s.log.Info("autoendpoint stopped")
	}
	return err
}

// reqState is what a handler reports for the request summary and the
// metrics. Pooled: handlers must not keep it.
type reqState struct {
	route    string
	errno    errno.Code
	failed   bool
	outcome  string
	vapid    bool
	encoding string
	dataLen  int
}

var statePool = sync.Pool{New: func() any { return new(reqState) }}

type handlerFunc func(ctx context.Context, c *app.RequestContext, st *reqState)

// handle wraps a handler with the request metrics and summary log.
func (s *Server) handle(route string, h handlerFunc) app.HandlerFunc {
	return func(ctx context.Context, c *app.RequestContext) {
		start := time.Now()
		st := statePool.Get().(*reqState)
		*st = reqState{route: route}
		h(ctx, c, st)
		s.finish(ctx, c, st, start)
		statePool.Put(st)
	}
}

// finish counts the request and logs its summary line.
func (s *Server) finish(ctx context.Context, c *app.RequestContext, st *reqState, start time.Time) {
	d := time.Since(start)
	code := c.Response.StatusCode()
	s.metrics.request(st.route, code, d)
	if !s.cfg.RequestLog || !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs,
		slog.String("method", string(c.Method())),
		slog.String("route", st.route),
		slog.Int("code", code),
		slog.Float64("ms", float64(d.Microseconds())/1000),
		slog.String("remote", c.RemoteAddr().String()),
	)
	if xff := c.Request.Header.Peek("X-Forwarded-For"); len(xff) > 0 {
		attrs = append(attrs, slog.String("forwarded_for", string(xff)))
	}
	if st.failed {
		errnoText := "null"
		if st.errno != errno.None {
			errnoText = fmt.Sprint(int(st.errno))
		}
		attrs = append(attrs, slog.String("errno", errnoText))
	}
	if st.outcome != "" {
		attrs = append(attrs, slog.String("outcome", st.outcome), slog.Int("data_len", st.dataLen),
			slog.String("encoding", st.encoding), slog.Bool("vapid", st.vapid))
	}
	if ua := c.Request.Header.UserAgent(); len(ua) > 0 {
		attrs = append(attrs, slog.String("user_agent", string(ua)))
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
}

// Hertz logs through a process-wide logger: it is pointed, once, at the
// last node's logger, and only warnings and errors get through.
var (
	hertzLogOnce sync.Once
	hertzLog     atomic.Pointer[slog.Logger]
)

func quietHertz() {
	hlog.SetOutput(hertzWriter{})
	hlog.SetLevel(hlog.LevelWarn)
}

type hertzWriter struct{}

func (hertzWriter) Write(p []byte) (int, error) {
	if l := hertzLog.Load(); l != nil {
		l.Warn(strings.TrimSpace(string(p)), "component", "hertz")
	}
	return len(p), nil
}

var _ io.Writer = hertzWriter{}
