package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/engine"
	"github.com/autopush-go/autopush/sender/node"
	"github.com/autopush-go/autopush/storage"
)

// Config of a stack. DefaultConfig holds every default. The fields both
// tiers must agree on are set here once; Engine and API hold the rest of
// each tier's settings (their storage settings are not used: the caller
// passes the store).
type Config struct {
	// WSListen is the public websocket address user agents connect to.
	// Default "127.0.0.1:8080".
	WSListen string
	// NodeListen is the connection node's internal API address. Default
	// "127.0.0.1:8081".
	NodeListen string
	// HTTPListen is the WebPush HTTP API address. Unless EndpointURL is
	// set, it must name its port (not 0): endpoints are minted under it
	// before the API tier listens. Default "127.0.0.1:8082".
	HTTPListen string
	// EndpointURL is the public base URL of push endpoints, as application
	// servers reach the API tier. Default "": "http://" + HTTPListen.
	EndpointURL string
	// CryptoKey is the Fernet key list both tiers share (first encrypts,
	// all decrypt). Required.
	CryptoKey string
	// NodeSecret is the internal node API's shared secret, set on both
	// tiers. Default "": New makes a random one for this process (only
	// its own API tier calls its node API, so nobody else needs it, and
	// no other process, a local one included, can deliver through it).
	NodeSecret string

	// Engine is the connection node's config; New overrides its Listen,
	// RouterListen, EndpointURL, CryptoKey and NodeSecret with the fields
	// above. Default engine.DefaultConfig() with DrainWindow 1s (a stack
	// holds few clients).
	Engine engine.Config
	// API is the endpoint node's config; New overrides its Listen,
	// EndpointURL, CryptoKey and NodeSecret with the fields above. Its
	// PushAPIKeys open the outbound sender's API (closed while empty).
	// Default apitier.DefaultConfig().
	API apitier.Config
	// Sender is the outbound sender's and its providers' config: the
	// endpoint node runs the sender as autoendpoint does (workers on
	// unless sender-workers is false), when it configures a provider
	// (node.BuildConfigured). Default node.DefaultConfig(): none.
	Sender node.Config
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	ecfg := engine.DefaultConfig()
	ecfg.DrainWindow = time.Second
	return Config{
		WSListen:   "127.0.0.1:8080",
		NodeListen: "127.0.0.1:8081",
		HTTPListen: "127.0.0.1:8082",
		Engine:     ecfg,
		API:        apitier.DefaultConfig(),
		Sender:     node.DefaultConfig(),
	}
}

// Validate reports the first setting that cannot work: the tiers' own
// checks on their wired configs, then the stack's.
func (c *Config) Validate() error {
	ecfg, acfg := c.tiers()
	if c.NodeSecret == "" { // New makes one
		ecfg.NodeSecret, acfg.NodeSecret = "-", "-"
	}
	if err := ecfg.Validate(); err != nil {
		return err
	}
	if err := acfg.Validate(); err != nil {
		return err
	}
	if err := c.Sender.Validate(); err != nil {
		return err
	}
	if c.EndpointURL != "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(c.HTTPListen); err != nil || port == "" || port == "0" {
		return fmt.Errorf("stack: config: HTTP listen address %q names no port for the endpoint URL (name one, or set the endpoint URL)", c.HTTPListen)
	}
	return nil
}

// tiers returns both tiers' configs wired together.
func (c *Config) tiers() (engine.Config, apitier.Config) {
	url := c.EndpointURL
	if url == "" {
		url = "http://" + c.HTTPListen
	}
	e, a := c.Engine, c.API
	e.Listen, e.RouterListen, e.EndpointURL, e.CryptoKey, e.NodeSecret = c.WSListen, c.NodeListen, url, c.CryptoKey, c.NodeSecret
	a.Listen, a.EndpointURL, a.CryptoKey, a.NodeSecret = c.HTTPListen, url, c.CryptoKey, c.NodeSecret
	return e, a
}

// Stack is both tiers of one deployment in this process. Start is called
// once; Shutdown, once Start succeeded, from any goroutine; the accessors
// are safe for concurrent use once Start has returned.
type Stack struct {
	node        *engine.Server
	api         *apitier.Server
	pushes      *node.Sender
	endpointURL string

	stopOnce sync.Once
	stopErr  error
}

// New prepares both tiers over store; Start runs them. The store is the
// caller's: Shutdown does not close it. Each tier logs to log with a
// "tier" attribute (autoconnect, autoendpoint).
func New(cfg Config, store storage.Store, log *slog.Logger) (*Stack, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.NodeSecret == "" {
		var b [32]byte
		rand.Read(b[:])
		cfg.NodeSecret = hex.EncodeToString(b[:])
	}
	ecfg, acfg := cfg.tiers()
	conn, err := engine.New(ecfg, store, log.With("tier", "autoconnect"))
	if err != nil {
		return nil, err
	}
	api, err := apitier.New(acfg, store, log.With("tier", "autoendpoint"))
	if err != nil {
		return nil, err
	}
	// No provider configured (WebPush only): no sender at all.
	pushes, err := node.BuildConfigured(cfg.Sender, store, log.With("tier", "autoendpoint"))
	if err != nil {
		return nil, err
	}
	if pushes != nil {
		api.SetPushService(pushes)
		api.SetBridges(pushes.Bridges())
	}
	// One process, one scrape: the API tier's /metrics (on its
	// metrics-listen) serves the connection node's series too (the node
	// API's serves its own), and the sender's (apitier/ops.go).
	api.AlsoMetrics(conn.WriteMetrics)
	return &Stack{node: conn, api: api, pushes: pushes, endpointURL: acfg.EndpointURL}, nil
}

// Start starts the connection node, then the API tier, and returns once
// both accept connections. When the API tier cannot start, the connection
// node is closed again.
func (s *Stack) Start() error {
	if err := s.node.Start(); err != nil {
		return err
	}
	// Pushes to this node's clients are method calls, not HTTP: its URL
	// is known once it listens.
	s.api.SetLocalNode(s.node.NodeURL(), s.node.Node())
	if err := s.api.Start(); err != nil {
		s.node.Close()
		return err
	}
	if s.pushes == nil {
		return nil
	}
	return s.pushes.Start()
}

// Shutdown stops gracefully, as a deployment's SIGTERM does: the
// connection node drains first (its clients are closed over its drain
// window, their unacked direct messages stored; pushes meanwhile are
// stored by the API tier, which still answers), then the API tier finishes
// the requests in flight. ctx bounds both. Calls after the first return
// its result.
func (s *Stack) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopErr = errors.Join(s.node.Drain(ctx), s.api.Shutdown(ctx))
		if s.pushes != nil {
			s.stopErr = errors.Join(s.stopErr, s.pushes.Stop(ctx))
			s.pushes.Close()
		}
	})
	return s.stopErr
}

// Reload re-reads the files a SIGHUP reloads: the outbound sender's
// prototype keys and the push API's clients. What does not load is
// logged and counted, and what is in use stays.
func (s *Stack) Reload() {
	if s.pushes != nil {
		s.pushes.Reload()
	}
	s.api.Reload()
}

// WSAddr is the websocket listen address, with the real port.
func (s *Stack) WSAddr() string { return s.node.Addr() }

// NodeAddr is the connection node's internal API address.
func (s *Stack) NodeAddr() string { return s.node.RouterAddr() }

// NodeURL is the internal API URL the connection node writes in router
// records.
func (s *Stack) NodeURL() string { return s.node.NodeURL() }

// HTTPAddr is the WebPush HTTP API's listen address, with the real port.
func (s *Stack) HTTPAddr() string { return s.api.Addr() }

// MetricsAddr is the address serving GET /metrics, both tiers' series and
// the sender's ("" with metrics-listen off).
func (s *Stack) MetricsAddr() string { return s.api.MetricsAddr() }

// EndpointURL is the public base URL push endpoints are minted under.
func (s *Stack) EndpointURL() string { return s.endpointURL }

// Engine is the connection node.
func (s *Stack) Engine() *engine.Server { return s.node }

// API is the endpoint node.
func (s *Stack) API() *apitier.Server { return s.api }

// Pushes is the outbound sender the endpoint node's push API uses; nil
// when the config configures no provider (node.BuildConfigured).
func (s *Stack) Pushes() *node.Sender { return s.pushes }
