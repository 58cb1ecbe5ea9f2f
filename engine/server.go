package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/autopush-go/autopush/engine/broadcast"
	"github.com/autopush-go/autopush/engine/session"
	"github.com/autopush-go/autopush/engine/wheel"
	"github.com/autopush-go/autopush/internal/dockerflow"
	"github.com/autopush-go/autopush/internal/listener"
	"github.com/autopush-go/autopush/internal/nodeapi"
	"github.com/autopush-go/autopush/internal/owedcheck"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage"
	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/pool/goroutine"
)

// Server is one connection node: the public websocket listener on gnet
// event loops and the internal node API on its own listener.
type Server struct {
	gnet.BuiltinEventEngine

	cfg      Config
	env      *session.Env // what every session shares
	log      *slog.Logger
	store    storage.Store
	keys     *token.Keys
	nodes    *nodeapi.Client // this node's calls to other nodes
	registry *registry
	deletes  *deletes
	wheel    *wheel.Wheel[*conn]
	workers  *workers
	metrics  *engineMetrics
	version  []byte
	maxConns int
	sources  *listener.Sources // max-connections-per-source; nil: no cap
	capLog   listener.Throttle // the log lines of refusals

	connections atomic.Int64
	pending     atomic.Int64   // see Pending
	leaving     sync.WaitGroup // leave jobs that could not be queued

	megaphone *http.Client   // the broadcast poller's (broadcasts.go)
	health    healthCache    // the public port's health checks
	watch     storageWatch   // storage down or up (storagewatch.go)
	owed      owedWrites     // writes owed while storage fails (owed.go)
	checks    *owedcheck.Set // storage checks owed to other nodes (jobs.go, notifyHolder)
	quit      chan struct{}  // closed by Close: background work stops
	bg        sync.WaitGroup // background goroutines (the broadcast poller)

	eng      gnet.Engine
	booted   chan error
	ran      chan struct{} // closed when gnet.Run returned, runErr its error
	runErr   error
	closing  atomic.Bool // Close began: gnet's end is asked for
	failed   chan error  // see Failed
	api      *http.Server
	apiLn    *listener.Listener
	addr     string
	nodeURL  string
	started  time.Time
	dueSlice []*conn // reused by tick
}

// New prepares a node; Start runs it. The store is the caller's: Close
// does not close it.
func New(cfg Config, store storage.Store, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys, err := token.ParseKeys(cfg.CryptoKey)
	if err != nil {
		return nil, fmt.Errorf("engine: crypto-key: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	exempt, err := listener.ParsePrefixes(cfg.PerSourceExempt)
	if err != nil {
		return nil, fmt.Errorf("engine: config: per-source-exempt %w", err)
	}
	srv := &Server{
		cfg: cfg, log: log, store: store, keys: keys,
		sources:  listener.NewSources(cfg.MaxConnectionsPerSource, exempt),
		registry: newRegistry(),
		deletes:  newDeletes(),
		wheel:    wheel.New[*conn](time.Second, 1024, time.Now()),
		booted:   make(chan error, 1),
		ran:      make(chan struct{}),
		failed:   make(chan error, 1),
		version:  dockerflow.Version(cfg.VersionFile),
		nodes:    nodeapi.NewClient(nodeapi.ClientConfig{Secret: cfg.NodeSecret, Timeout: 3 * time.Second}),
		quit:     make(chan struct{}),
		// Megaphone is a third party: its own client, its own timeout.
		megaphone: &http.Client{Timeout: cfg.StorageTimeout},
	}
	srv.metrics = newMetrics(srv)
	srv.checks = owedcheck.New(owedcheck.Config{}, srv.payOwedCheck)
	srv.checks.Register(srv.metrics.set, "autoconnect")
	srv.env = &session.Env{
		Config: session.Config{
			HelloTimeout: cfg.HelloTimeout, PingInterval: cfg.PingInterval, PongTimeout: cfg.PongTimeout,
			MinClientPing: cfg.MinClientPing, MaxUnacked: cfg.MaxUnacked, MaxMessageSize: cfg.MaxMessageSize,
			MessagePage: cfg.MessagePage, CursorLag: cfg.CursorLag, MsgLimit: cfg.MsgLimit,
			MaxChannels: cfg.MaxChannels,
		},
		Metrics: srv.metrics.session,
		Log:     log,
		Now:     time.Now,
		Epoch:   time.Now(),
		Full:    func() bool { return int(srv.connections.Load()) > srv.maxConns },

		Broadcasts:  broadcast.New(),
		Version:     srv.version,
		Connections: srv.connections.Load,
	}
	return srv, nil
}

// Start opens both listeners and returns once the node accepts
// connections. It raises the fd limit and logs the connection ceiling.
func (srv *Server) Start() error {
	limit, err := raiseFDLimit()
	if err != nil {
		return err
	}
	srv.maxConns = srv.cfg.MaxConnections
	if ceiling := int(limit) - fdReserve; srv.maxConns == 0 || srv.maxConns > ceiling {
		srv.maxConns = max(ceiling, 1)
	}
	raw, err := listener.Listen("autoconnect", "router-listen", srv.cfg.RouterListen)
	if err != nil {
		return err
	}
	srv.apiLn = listener.New(raw, listener.Config{
		MaxConns:      srv.cfg.NodeAPIMaxConnections,
		Refusal:       []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
		OnRefuse:      srv.metrics.apiRefused.Inc,
		OnAcceptError: listener.LogAcceptErrors(srv.log, "node API: ", srv.metrics.apiAcceptErrors),
	})
	srv.nodeURL = srv.cfg.NodeURL
	if srv.nodeURL == "" {
		srv.nodeURL = "http://" + srv.apiLn.Addr().String()
	}
	// A router record naming this node (a client that reconnected here)
	// is this node's to answer without a round trip through its own API.
	srv.nodes.SetLocal(srv.nodeURL, srv.Node())
	srv.workers = newWorkers(srv.cfg.StorageWorkers, 1<<16)
	// Header, body (nodeapi.ServerConfig.BodyTimeout), write and idle
	// time limits on every connection; net/http sets the deadlines.
	srv.api = &http.Server{
		Handler:           srv.nodeAPI(),
		ReadHeaderTimeout: srv.cfg.NodeAPIHeaderTimeout,
		ReadTimeout:       srv.cfg.NodeAPIHeaderTimeout + srv.cfg.NodeAPIBodyTimeout,
		WriteTimeout:      srv.cfg.NodeAPIHeaderTimeout + srv.cfg.NodeAPIBodyTimeout + loopWait + time.Second,
		IdleTimeout:       srv.cfg.NodeAPIIdleTimeout,
		MaxHeaderBytes:    8 << 10,
		ErrorLog:          slog.NewLogLogger(srv.log.Handler(), slog.LevelDebug),
	}
	go srv.api.Serve(srv.apiLn)

	// gnet's shared goroutine pool serves only EventLoop.Register and
	// Enroll on Linux, which the engine never calls; its housekeeping
	// goroutines would wake an idle node three times a second for it.
	goroutine.DefaultWorkerPool.Release()
	opts := []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithReusePort(false),
		// A restart must be able to listen again at once on the port
		// clients know, even while connections it closed sit in TIME_WAIT.
		gnet.WithReuseAddr(true),
		gnet.WithTCPKeepAlive(0),
		// Small buffers: idle connections hold none, and Firefox frames
		// are a few hundred bytes.
		gnet.WithReadBufferCap(16 << 10),
		gnet.WithWriteBufferCap(16 << 10),
		gnet.WithLogger(gnetLogger{srv.log}),
	}
	if srv.cfg.EventLoops > 0 {
		opts = append(opts, gnet.WithNumEventLoop(srv.cfg.EventLoops))
	}
	// The versions are known before the first hello (a failed poll is
	// retried every interval).
	srv.pollOnce()
	srv.bg.Add(2)
	go srv.pollBroadcasts()
	go srv.runWheel() // handler.go
	srv.checks.Start()
	srv.started = time.Now()
	go srv.serveWS(opts)
	select {
	case err := <-srv.booted:
		if err != nil {
			return err
		}
	case <-srv.ran:
		srv.abortStart()
		return &listener.ListenError{Tier: "autoconnect", Setting: "listen", Addr: srv.cfg.Listen, Err: srv.runErr}
	}
	srv.log.Info("autoconnect started", "listen", srv.addr, "node_api", srv.apiLn.Addr().String(),
		"node_url", srv.nodeURL, "fd_limit", limit, "max_connections", srv.maxConns)
	return nil
}

// serveWS serves the websocket listener (gnet) until Close stops it, or it
// stops on its own: then Failed says so.
func (srv *Server) serveWS(opts []gnet.Option) {
	srv.runErr = gnet.Run(srv, "tcp://"+srv.cfg.Listen, opts...)
	close(srv.ran)
	if srv.closing.Load() {
		return
	}
	err := srv.runErr
	if err == nil {
		err = errors.New("gnet stopped on its own (its log line says why)")
	}
	srv.failed <- fmt.Errorf("engine: websocket listener %s: %w", srv.cfg.Listen, err)
}

// Failed delivers the error that stopped the websocket listener when it
// stopped without Close asking, and its connections with it: gnet stops
// listening for good when an accept fails, for want of a file descriptor
// say (admit keeps the node's own connections under max-connections; the
// rest of the process may still use up the descriptors). A node that no
// client can reach serves nothing: its process should Close and exit
// with an error, so that its supervisor restarts it and its load
// balancer stops sending it clients.
func (srv *Server) Failed() <-chan error { return srv.failed }

// OnBoot records the engine and the actual listen address (port 0 in
// tests).
func (srv *Server) OnBoot(eng gnet.Engine) gnet.Action {
	srv.eng = eng
	fd, err := eng.Dup()
	if err != nil {
		srv.booted <- fmt.Errorf("engine: dup listener: %w", err)
		return gnet.None
	}
	port, err := listenPort(fd)
	syscallClose(fd)
	if err != nil {
		srv.booted <- err
		return gnet.None
	}
	host, _, _ := net.SplitHostPort(srv.cfg.Listen)
	srv.addr = net.JoinHostPort(host, strconv.Itoa(port))
	srv.booted <- nil
	return gnet.None
}

// Pending is how much work the node has handed off and not finished:
// storage jobs queued or running, their results waiting for an event
// loop, the work closed connections leave. 0 means the node has nothing
// of its own to do until a client, the node API or a timer asks (tests
// wait for it; autoconnect_pending_work serves it). Safe for concurrent
// use.
func (srv *Server) Pending() int64 { return srv.pending.Load() }

// Addr is the websocket listen address (with the real port).
func (srv *Server) Addr() string { return srv.addr }

// RouterAddr is the node API listen address.
func (srv *Server) RouterAddr() string { return srv.apiLn.Addr().String() }

// NodeURL is the node API URL stored in router records.
func (srv *Server) NodeURL() string { return srv.nodeURL }

// Node is this node as its node API serves it, for an endpoint in the
// same process to call directly (nodeapi.Client.SetLocal, with NodeURL):
// the same answers, without HTTP. Safe for concurrent use once Start has
// returned.
func (srv *Server) Node() nodeapi.Node { return apiNode{srv} }

// Config is the configuration the node runs with (what New was given).
// Safe for concurrent use.
func (srv *Server) Config() Config { return srv.cfg }

// WriteMetrics writes the node's metrics (autoconnect_*, without the
// process metrics) in the Prometheus text format, for a process that
// serves them with others on one /metrics. Safe for concurrent use.
func (srv *Server) WriteMetrics(w io.Writer) { srv.metrics.set.WritePrometheus(w) }

// Close stops everything at once, without draining: connections are
// dropped. Use Drain for a graceful stop.
func (srv *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.closing.Store(true)
	var err error
	select {
	case <-srv.ran: // it stopped on its own (Failed)
	default:
		err = srv.eng.Stop(ctx)
	}
	<-srv.ran
	if e := srv.runErr; e != nil && !errors.Is(e, context.Canceled) {
		err = errors.Join(err, e)
	}
	err = errors.Join(err, srv.api.Shutdown(ctx))
	close(srv.quit)
	srv.bg.Wait()
	srv.workers.stop()
	srv.leaving.Wait()
	// Owed writes (owed.go): a last try, then what is left is lost.
	if n := srv.payOwed(); n > 0 {
		srv.log.Error("storage unavailable at shutdown: owed writes lost (unacked notifications, acked deletes)", "count", n)
	}
	srv.checks.Stop(srv.log) // after what may owe one: the leaves, payOwed
	srv.nodes.CloseIdle()
	return err
}

// abortStart stops what Start began before the websocket listener
// failed: the node API and the background work. The node is not used
// again (no Close).
func (srv *Server) abortStart() {
	srv.api.Close()
	// Serve closes the listener only once it has taken it, and its
	// goroutine may not have run yet: the port must be free on return.
	srv.apiLn.Close()
	close(srv.quit)
	srv.bg.Wait()
	srv.checks.Stop(srv.log)
	srv.workers.stop()
}

// gnetLogger sends gnet's own log lines to the node's logger; its start-up
// banner is debug detail next to our own start line.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(f string, a ...any) { g.l.Debug(fmt.Sprintf(f, a...), "component", "gnet") }
func (g gnetLogger) Infof(f string, a ...any)  { g.l.Debug(fmt.Sprintf(f, a...), "component", "gnet") }
func (g gnetLogger) Warnf(f string, a ...any)  { g.l.Warn(fmt.Sprintf(f, a...), "component", "gnet") }
func (g gnetLogger) Errorf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...), "component", "gnet") }
func (g gnetLogger) Fatalf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...), "component", "gnet") }
