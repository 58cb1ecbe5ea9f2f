package apitier

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/apitier/megaphone"
	"github.com/autopush-go/autopush/apitier/pushapi"
	"github.com/autopush-go/autopush/apitier/receipts"
	"github.com/autopush-go/autopush/apitier/registration"
	"github.com/autopush-go/autopush/apitier/tracking"
	"github.com/autopush-go/autopush/internal/dockerflow"
	"github.com/autopush-go/autopush/internal/listener"
	"github.com/autopush-go/autopush/internal/nodeapi"
	"github.com/autopush-go/autopush/sender/bridge"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/cloudwego/hertz/pkg/app/server"
	"github.com/cloudwego/hertz/pkg/common/config"
	"github.com/cloudwego/hertz/pkg/common/hlog"
	"github.com/cloudwego/hertz/pkg/network/standard"
	hertzproto "github.com/cloudwego/hertz/pkg/protocol"

	"github.com/autopush-go/autopush/apitier/routecache"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/owedcheck"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/storage"
)

// Server is one endpoint node: the public HTTP API on Hertz. Its methods
// are safe for concurrent use; Start and Shutdown are called once each.
type Server struct {
	cfg       Config
	tlsAddr   string // tls-listen's, once started
	log       *slog.Logger
	store     storage.Store
	keys      *token.Keys
	vapid     *vapid.Verifier
	nodes     *nodeapi.Client
	routes    *routecache.Cache
	owed      *owedcheck.Set // storage checks owed (router.go, step 4)
	metrics   *apiMetrics
	version   []byte
	audience  string   // VAPID "aud": the endpoint URL's origin
	formerAud []string // vapid-former-aud's origins
	location  string   // Location prefix: endpoint URL + "/m/"
	// Tracked pushes (apitier/tracking) and the Link header of push
	// answers (apitier/receipts; "": receipts off).
	tracker     *tracking.Tracker
	receiptLink string
	fateStop    chan struct{} // stops the tracker's sweep; nil: not running
	started     time.Time
	pushes      PushService     // the outbound sender (apis.go); nil: off
	bridges     *bridge.Bridges // the mobile bridges (bridged.go); nil: none
	// The APIs of their own packages (apis.go).
	pushAPI *pushapi.API
	regAPI  *registration.API
	recAPI  *receipts.API
	megAPI  *megaphone.API
	// extraMetrics are other series /metrics serves (AlsoMetrics).
	extraMetrics []func(io.Writer)
	// extraOps are other routes of metrics-listen (AlsoOps).
	extraOps []opsRoute

	h        *server.Hertz
	ln       *listener.Listener
	ops      *opsListener // GET /metrics on metrics-listen (ops.go); nil: off
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
	var former []string
	for _, u := range cfg.VAPIDFormerAud {
		o, err := origin(u)
		if err != nil {
			return nil, err
		}
		former = append(former, o)
	}
	if log == nil {
		log = slog.Default()
	}
	hertzLogOnce.Do(quietHertz)
	hertzLog.Store(log)
	s := &Server{
		cfg: cfg, log: log, store: store, keys: keys,
		vapid:    newVerifier(cfg),
		version:  dockerflow.Version(cfg.VersionFile),
		audience: aud, formerAud: former,
		location: strings.TrimRight(cfg.EndpointURL, "/") + "/m/",
		done:     make(chan error, 1),
		routes:   routecache.New(cfg.RouteCacheSize, cfg.RouteCacheTTL),
	}
	if err := s.newAPIs(); err != nil {
		return nil, err
	}
	s.tracker, err = tracking.New(tracking.Config{Keys: cfg.TrackingKeys, Receipts: cfg.Receipts,
		SweepInterval: cfg.FateSweepInterval, StorageTimeout: cfg.StorageTimeout}, store, log)
	if err != nil {
		return nil, fmt.Errorf("apitier: config: %w", err)
	}
	s.receiptLink = s.recAPI.Link()
	s.metrics = newMetrics(s.openConns, s.apiRoutes())
	s.owed = owedcheck.New(owedcheck.Config{}, s.payOwedCheck)
	s.owed.Register(s.metrics.set, "autoendpoint")
	s.nodes = nodeapi.NewClient(nodeapi.ClientConfig{
		Secret: cfg.NodeSecret, Timeout: cfg.NodeTimeout, ConnectTimeout: cfg.NodeConnectTimeout,
		IdleConnsPerNode: cfg.NodeIdleConns, Observe: s.metrics.nodeCall,
	})
	return s, nil
}

// SetLocalNode has pushes to the user agents of the connection node
// whose router records name url handed to n, that node in this process
// (the single-node server), without the node API's HTTP round trip: the
// same answers (delivered, busy, not here) and the same routing after
// them. Call before Start.
func (s *Server) SetLocalNode(url string, n nodeapi.Node) { s.nodes.SetLocal(url, n) }

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
		// Bodies are streamed (the handler reads them: httpapi.ReadBody) with
		// Hertz reading ahead at most the largest body any route takes.
		// Hertz's stream mode reads ahead a Content-Length body of up to
		// this size exactly (8 KiB of it at most; the handler reads the
		// rest, never past its end). A body announced larger takes
		// Hertz's other read-ahead, which reads whatever bytes the
		// connection holds, past the body's end (a pipelined request's
		// too): such a body is refused and the connection closed, so
		// what it read past the end is never served. A chunked body is
		// read by the handler, up to its last chunk. All of it within
		// the request's one deadline (internal/listener).
		server.WithStreamBody(true),
		server.WithMaxRequestBodySize(s.maxBodyLimit()),
		server.WithDisablePreParseMultipartForm(true),
		server.WithMaxHeaderBytes(maxHeaderBytes),
		// The listener holds each request to request-timeout from its
		// first byte; Hertz's own read deadline (set after a keep-alive
		// request's first bytes) cannot extend it.
		server.WithReadTimeout(s.cfg.RequestTimeout),
		// Not 0: the connection would close after each request on the
		// standard transport (and on netpoll Hertz 0.10.6 then resets
		// keep-alive connections sending requests back to back).
		server.WithIdleTimeout(s.cfg.IdleTimeout),
		// Tells the listener when Hertz starts on a request, which for a
		// pipelined one (read along with the request before) is not its
		// first byte.
		server.WithTracer(requestStart{}),
		server.WithExitWaitTime(s.cfg.ShutdownTimeout),
		server.WithRedirectTrailingSlash(false),
		server.WithHandleMethodNotAllowed(true),
		server.WithDisablePrintRoute(true),
		server.WithOnAccept(func(c net.Conn) context.Context { return listener.WithConn(context.Background(), c) }),
	}, opts...)
	claimServerDate()
	h := server.New(opts...)
	// An over-limit body announced with Expect: 100-continue is refused
	// (413, by the handler) without asking the client to send it.
	h.ContinueHandler = func(hdr *hertzproto.RequestHeader) bool { return hdr.ContentLength() <= s.bodyLimit(hdr) }
	h.Use(s.guard, s.cors)
	for _, r := range s.routeTable() {
		h.Handle(r.Method, r.Path, s.handle(r.label, r.fn))
	}
	h.NoRoute(s.handle(routeNotFound, func(_ context.Context, c *app.RequestContext, st *reqState) {
		st.x.Fail(errNotFound)
	}))
	h.NoMethod(s.handle(routeNoMethod, s.handleNoMethod))
	return h
}

// routeDef is one route: method and Hertz path, metric label, handler.
type routeDef struct {
	Route
	label string
	fn    handlerFunc
}

// routeTable lists every route newHertz registers (Routes and the Allow
// of a 405 read it too).
func (s *Server) routeTable() []routeDef {
	own := []routeDef{
		{Route{http.MethodPost, "/wpush/:version/:token"}, routeWPushV1, s.handlePush},
		{Route{http.MethodPost, "/wpush/:token"}, routeWPushV1, s.handlePush},
		{Route{http.MethodDelete, "/m/:message_id"}, routeMessage, s.handleDelete},
		{Route{http.MethodGet, "/__heartbeat__"}, routeHeartbeat, s.handleHeartbeat},
		{Route{http.MethodGet, "/__lbheartbeat__"}, routeLB, s.handleLBHeartbeat},
		{Route{http.MethodGet, "/__version__"}, routeVersion, s.handleVersion},
		{Route{http.MethodGet, "/health"}, routeHealth, s.handleHealth},
		{Route{http.MethodGet, "/status"}, routeStatus, s.handleStatus},
		{Route{http.MethodGet, "/__milestones__"}, routeMilestones, s.handleReferenceMilestones},
	}
	// The broadcasts, the outbound sender's push API, the bridge
	// registration API and the receipts (apis.go).
	return append(own, s.apiRoutes()...)
}

// bodyLimit is the largest body the request's route reads: a POST /push
// body (pushapi.MaxBody), a registration (registration.MaxBody) or a
// push message (max-data-bytes).
func (s *Server) bodyLimit(hdr *hertzproto.RequestHeader) int {
	p := hdr.RequestURI()
	if pushapi.Serves(p) {
		return pushapi.MaxBody
	}
	if registration.Serves(p) {
		return registration.MaxBody
	}
	if receipts.Serves(p) {
		return receipts.AckBody
	}
	return s.cfg.MaxDataBytes
}

// maxBodyLimit is the largest body any route reads (bodyLimit's
// largest).
func (s *Server) maxBodyLimit() int {
	return max(pushapi.MaxBody, registration.MaxBody, s.cfg.MaxDataBytes, storage.MaxBroadcastLen, receipts.AckBody)
}

// requestStart is the Hertz tracer that starts a request's deadline
// (listener.Conn.BeginRequest) when Hertz starts on the request.
type requestStart struct{}

func (requestStart) Start(ctx context.Context, _ *app.RequestContext) context.Context {
	now := time.Now()
	listener.FromContext(ctx).BeginRequest(now)
	refreshDate(now) // date.go
	return ctx
}

func (requestStart) Finish(context.Context, *app.RequestContext) {}

// maxHeaderBytes bounds a request's header block: crypto headers are at
// most storage's 4 KiB, a VAPID header well under 2 KiB.
const maxHeaderBytes = 32 << 10

// Start listens and serves, returning once the listener accepts
// connections (a listen address with port 0 gets a free port; Addr says
// which).
func (s *Server) Start() error {
	exempt, err := listener.ParsePrefixes(s.cfg.PerSourceExempt)
	if err != nil {
		return fmt.Errorf("apitier: config: per-source-exempt %w", err)
	}
	raw, err := s.listen()
	if err != nil {
		return err
	}
	if s.cfg.MetricsListen != "" {
		if s.ops, err = s.startOps(); err != nil {
			raw.Close()
			return err
		}
	}
	ln := listener.New(raw, listener.Config{
		MaxConns:          s.cfg.MaxConnections,
		MaxConnsPerSource: s.cfg.MaxConnectionsPerSource,
		Exempt:            exempt,
		RequestTimeout:    s.cfg.RequestTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		Refusal:           rawAnswer(errTooManyConns),
		SourceRefusal:     rawAnswer(errTooManyFromSource),
		OnRefuse:          s.metrics.connsRefused.Inc,
		OnSourceRefuse:    s.metrics.connsRefusedSource.Inc,
		OnAcceptError:     listener.LogAcceptErrors(s.log, "", s.metrics.acceptErrors),
		Unhandled:         s.unhandled,
	})
	s.ln = ln
	// The standard transport (a goroutine per connection, as net/http)
	// serves the listener, which netpoll cannot: the listener caps
	// connections, sets their deadlines and knows the idle ones.
	s.h = s.newHertz(server.WithListener(ln), server.WithTransport(standard.NewTransporter))
	s.started = time.Now()
	go func() { s.done <- s.h.Run() }()
	if err := s.waitRunning(ln); err != nil {
		return err
	}
	s.pushAPI.Start() // watches push-clients-file
	s.owed.Start()
	if s.tracker.On() {
		s.fateStop = make(chan struct{})
		go s.tracker.Sweep(s.fateStop)
	}
	s.recAPI.Start() // the receipt webhooks, when on
	s.log.Info("autoendpoint started", "listen", s.Addr(), "metrics", s.MetricsAddr(), "endpoint_url", s.cfg.EndpointURL,
		"vapid_aud", s.audience, "max_data_bytes", s.cfg.MaxDataBytes)
	return nil
}

// listen opens listen and, when set, tls-listen, as one listener.
func (s *Server) listen() (net.Listener, error) {
	raw, err := listener.Listen("autoendpoint", "listen", s.cfg.Listen)
	if err != nil || s.cfg.TLSListen == "" {
		return raw, err
	}
	pair, err := tls.LoadX509KeyPair(s.cfg.TLSCertFile, s.cfg.TLSKeyFile)
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("apitier: tls-cert-file, tls-key-file: %w", err)
	}
	plain, err := listener.Listen("autoendpoint", "tls-listen", s.cfg.TLSListen)
	if err != nil {
		raw.Close()
		return nil, err
	}
	s.tlsAddr = plain.Addr().String()
	// The handshake runs on the connection's first read, under the
	// listener's request deadline, never in Accept.
	secure := tls.NewListener(plain, &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	})
	return listener.Merge(raw, secure), nil
}

// waitRunning waits, up to 10 s, for the Hertz server Start started on
// ln to run; one that stopped or never runs has its listener and the
// operations server closed.
func (s *Server) waitRunning(ln *listener.Listener) error {
	deadline := time.Now().Add(10 * time.Second)
	for !s.h.IsRunning() {
		select {
		case err := <-s.done:
			ln.Close()
			s.closeOps()
			if err == nil {
				err = errors.New("stopped")
			}
			return fmt.Errorf("apitier: serve %s: %w", ln.Addr(), err)
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.closeOps()
			return fmt.Errorf("apitier: serve %s: not running after 10s", ln.Addr())
		}
	}
	return nil
}

// Config is the configuration the node runs with (what New was given).
func (s *Server) Config() Config { return s.cfg }

// MetricsAddr is the metrics listener's address, with the real port (""
// before Start, or with metrics-listen off).
func (s *Server) MetricsAddr() string {
	if s.ops == nil {
		return ""
	}
	return s.ops.ln.Addr().String()
}

// AlsoMetrics adds write to what /metrics serves: it is called on each
// scrape, after this node's own series and before the process metrics.
// A process that runs a connection node too serves the node's series
// there (stack). Call it before Start.
func (s *Server) AlsoMetrics(write func(io.Writer)) { s.extraMetrics = append(s.extraMetrics, write) }

// AlsoOps adds a route to metrics-listen (pattern as http.ServeMux's),
// the operator's listener: the route authenticates its callers itself.
// Nothing serves it with metrics-listen off. Call it before Start.
func (s *Server) AlsoOps(pattern string, h http.Handler) {
	s.extraOps = append(s.extraOps, opsRoute{pattern, h})
}

// openConns is how many connections the listener holds (0 before Start).
func (s *Server) openConns() int {
	if s.ln == nil {
		return 0
	}
	return s.ln.Open()
}

// Addr is the listen address with the real port ("" before Start).
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// TLSAddr is tls-listen's address once started ("": none).
func (s *Server) TLSAddr() string { return s.tlsAddr }

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
		s.ln.WakeIdle()
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
	s.owed.Stop(s.log)
	if s.fateStop != nil {
		close(s.fateStop)
		s.fateStop = nil
	}
	s.recAPI.Stop()
	s.nodes.CloseIdle()
	s.pushAPI.Close()
	if s.ops != nil {
		err = errors.Join(err, s.ops.srv.Shutdown(ctx))
	}
	if err == nil {
		s.log.Info("autoendpoint stopped")
	}
	return err
}

// reqState is what a handler reports for the request summary and the
// metrics. Pooled: handlers must not keep it.
type reqState struct {
	route    string
	x        httpapi.Exchange // the handler's errors and body
	outcome  string
	vapid    bool
	key      [32]byte // sha256 of the VAPID key verified, when fates are on
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
		st.x.Begin(c)
		h(ctx, c, st)
		if !st.x.BodyRead() && hasBody(c) {
			// Never drain a body nobody wants: close after the answer.
			c.SetConnectionClose()
			listener.FromContext(ctx).AbandonBody()
		}
		if code, failed := st.x.Failed(); failed {
			s.metrics.errno(code)
		}
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
	if code, failed := st.x.Failed(); failed {
		errnoText := "null"
		if code != errno.None {
			errnoText = fmt.Sprint(int(code))
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
	l := hertzLog.Load()
	switch {
	case l == nil:
	case bytes.Contains(p, []byte("HERTZ: Error=")):
		// A request Hertz refused (unparsable, too large, too slow): the
		// client's fault, counted in autoendpoint_requests_total
		// {route="unparsed"}; at warn level a flood of them would flood
		// the logs.
		l.Debug(strings.TrimSpace(string(p)), "component", "hertz")
	default:
		l.Warn(strings.TrimSpace(string(p)), "component", "hertz")
	}
	return len(p), nil
}

var _ io.Writer = hertzWriter{}
