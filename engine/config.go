package engine

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/autopush-go/autopush/engine/session"
	"github.com/autopush-go/autopush/internal/listener"
	"github.com/autopush-go/autopush/storage"
)

// Config of a connection node. DefaultConfig holds every default; the
// settings package fills it from a JSON file, AUTOCONNECT__NAME variables
// and -name flags.
type Config struct {
	// Listen is the public websocket address. Default ":8080".
	Listen string `conf:"listen" help:"public websocket listen address"`
	// RouterListen is the internal node API address (never the public
	// one). Default "127.0.0.1:8081".
	RouterListen string `conf:"router-listen" help:"internal node API listen address"`
	// NodeURL is how endpoint nodes reach this node's internal API; it
	// is stored in router records. Default: http:// + RouterListen.
	NodeURL string `conf:"node-url" help:"this node's internal API URL as other nodes reach it"`
	// NodeSecret must be sent by callers of the internal API as
	// "Authorization: Bearer <secret>": the endpoint nodes and the other
	// connection nodes. Required (any long random string, the same on
	// every node of both tiers): without it any process that reaches the
	// port, a local one included, could deliver to any client. Default "".
	NodeSecret string `conf:"node-secret" help:"shared secret for the internal node API"`
	// EndpointURL is the public base URL of the endpoint tier, used to
	// mint push endpoints. Default "http://localhost:8082".
	EndpointURL string `conf:"endpoint-url" help:"public base URL of push endpoints"`
	// CryptoKey is the Fernet key list (first encrypts, all decrypt)
	// shared with the endpoint tier. Required.
	CryptoKey string `conf:"crypto-key" help:"Fernet key list shared with autoendpoint (tools/cmd/autokey makes one)"`

	// Storage settings (storage, data-dir, cql-*), shared with the other
	// tier; defaults in storage.DefaultSettings.
	storage.Settings

	// MaxConnections: connections beyond it get 503 as they are accepted.
	// Default 0: the fd ceiling.
	MaxConnections int `conf:"max-connections" help:"refuse connections beyond this many with 503 at accept (0: fd limit less 256)"`
	// MaxConnectionsPerSource caps the connections open at once on the
	// websocket port from one source address (an IPv4 address, an IPv6
	// /64), so that a few sources cannot take the node's fds from everyone
	// else. A connection beyond it is refused as it is accepted: it is
	// written a 503 answer (Retry-After) and closed at once, before any
	// handshake. Firefox holds one connection per profile, so a source
	// holds as many as it has Firefox profiles connected to this node: a
	// large office or a carrier NAT behind one IPv4 address can pass the
	// cap, and its surplus is refused until some leave (raise the cap, or
	// exempt the address). Behind a load balancer or proxy that does not
	// pass the client's address, every connection comes from the
	// balancer: list its addresses in per-source-exempt. 0: no cap.
	// Default 1024.
	MaxConnectionsPerSource int `conf:"max-connections-per-source" help:"websocket connections open at once from one address (IPv6: one /64); more are refused with 503 at accept (0: no cap)"`
	// PerSourceExempt are the sources max-connections-per-source does not
	// apply to, as CIDR prefixes or addresses ("10.0.0.0/8", "::1"): the
	// load balancers in front. Loopback is not exempt unless listed
	// ("127.0.0.0/8"). Default none.
	PerSourceExempt []string `conf:"per-source-exempt" help:"addresses or CIDR prefixes exempt from max-connections-per-source (the load balancer's; comma-separated)"`
	// EventLoops is the number of gnet event loops. Default 0: one per CPU.
	EventLoops int `conf:"event-loops" help:"number of event loops (0: one per CPU)"`
	// HelloTimeout: a client must send hello within it. Default 10s.
	HelloTimeout time.Duration `conf:"hello-timeout" help:"time allowed between upgrade and hello (checked on a 1s timing wheel: the close comes a second or two after it)"`
	// PingInterval: the server sends a websocket ping after this much
	// inbound silence. Default 5m.
	PingInterval time.Duration `conf:"ping-interval" help:"send a websocket ping after this much client silence"`
	// PongTimeout: no frame within it after our ping closes. A drain also
	// waits this long after its last 1001 close for the clients' answers
	// (Drain). Default 30s.
	PongTimeout time.Duration `conf:"pong-timeout" help:"close when nothing answers a ping (or a drain's close) within this"`
	// MinClientPing: client pings more often than this are abusive and
	// close the connection with 4774. Default 45s (Firefox pings about
	// every 30 minutes).
	MinClientPing time.Duration `conf:"min-client-ping" help:"minimum interval between client pings"`
	// MaxUnacked is how many notifications may be in flight unacked per
	// client before direct deliveries get 503 busy. Default 10.
	MaxUnacked int `conf:"max-unacked" help:"unacked notifications per client before deliveries are refused"`
	// MaxMessageSize bounds one websocket message. Default 32 KiB.
	MaxMessageSize int `conf:"max-message-size" help:"largest websocket message accepted, bytes"`
	// StorageWorkers bounds concurrent storage calls. Default 64.
	StorageWorkers int `conf:"storage-workers" help:"concurrent storage calls"`
	// StorageTimeout bounds one storage call. Default 5s.
	StorageTimeout time.Duration `conf:"storage-timeout" help:"timeout of one storage call"`
	// DrainWindow spreads the closing of clients on SIGTERM. Default 10s.
	DrainWindow time.Duration `conf:"drain-window" help:"window over which clients are closed on shutdown"`
	// NodeAPIHeaderTimeout bounds reading a node API request's header,
	// NodeAPIBodyTimeout its body once the header is in (408), and
	// NodeAPIIdleTimeout a keep-alive connection waiting for its next
	// request. Defaults 5s, 5s and 120s (above the endpoint nodes'
	// 90s keep-alive, so they close their idle connections first).
	NodeAPIHeaderTimeout time.Duration `conf:"node-api-header-timeout" help:"time allowed to send a node API request's header"`
	NodeAPIBodyTimeout   time.Duration `conf:"node-api-body-timeout" help:"time allowed to send a node API request's body"`
	NodeAPIIdleTimeout   time.Duration `conf:"node-api-idle-timeout" help:"close node API keep-alive connections idle this long"`
	// NodeAPIMaxConnections caps the node API's open connections; more
	// are answered 503 and closed. Each endpoint node keeps up to its
	// node-idle-conns (64) open to each connection node. Default 4096.
	NodeAPIMaxConnections int `conf:"node-api-max-connections" help:"node API connections open at once; more are refused with 503"`
	// MaxChannels bounds the channels (subscriptions) of one user agent,
	// each a stored row: a register beyond it is answered status 429. The
	// reference's own ceiling is 100,000 (autopush-rs stores at most that
	// many channels per user agent, Bigtable's mutation limit); Firefox
	// profiles hold tens. Counted once per connection, at its first
	// register (docs/engine.md). 0: no limit. Default 100000.
	MaxChannels int `conf:"max-channels" help:"channels per user agent; registers beyond get status 429 (0: no limit)"`
	// MessagePage is how many stored messages are read per page. Default 10.
	MessagePage int `conf:"message-page" help:"stored messages read per page"`
	// CursorLag keeps a user's read cursor at least this far behind now.
	// A message's sort key is taken before it is written (the endpoint
	// stamps it on arrival, then calls a node and storage), so a slow
	// write can land behind messages that were written, read and acked
	// after it; a cursor moved past those would hide it for good. Acked
	// messages are deleted, so the lag costs only a re-read of what is
	// still stored. It must exceed the longest delay between stamping and
	// writing (the endpoint's node and storage timeouts) plus clock skew
	// between nodes. Default 60s.
	CursorLag time.Duration `conf:"cursor-lag" help:"keep the read cursor this far behind now (must exceed the endpoint's node+storage timeouts)"`
	// GCPercent is the Go GC target (GOGC) the binary sets unless the GOGC
	// variable is set. An idle node allocates nothing, so a low target
	// costs GC work only while connections are being set up, and keeps RSS
	// near the live heap: at 100 the heap may grow to twice what 19,000
	// idle connections need (docs/benchmarks.md). Default 25.
	GCPercent int `conf:"gc-percent" help:"Go GC target percent, used when GOGC is unset"`
	// GCPercentBusy is the GC target while the collector takes more than
	// 3% of the node's CPU (a stream of pushes or connects), back to
	// GCPercent once it takes under 1%, the memory returned to the OS then
	// (internal/gctune): at 25 under 9,000 pushes/s the collector was a
	// quarter of the server's CPU and p99 passed 50 ms below 10,000/s
	// (docs/benchmarks.md). 0 keeps GCPercent always; unused when GOGC is
	// set. Default 100.
	GCPercentBusy int `conf:"gc-percent-busy" help:"Go GC target percent while the collector is busy (0: always gc-percent)"`
	// Pprof serves Go's runtime profiles at /debug/pprof/ on RouterListen
	// (internal/profiling), unauthenticated like /metrics there: turn it
	// on only where the node API is reached by the operator alone.
	// Default false.
	Pprof bool `conf:"pprof" help:"serve Go's runtime profiles at /debug/pprof/ on router-listen"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `conf:"log-level" enum:"debug|info|warn|error" help:"least severe level logged"`
	// VersionFile is served at /__version__. Default "version.json".
	VersionFile string `conf:"version-file" help:"file served at /__version__"`

	// MsgLimit: a user agent that comes back to a backlog larger than
	// this is dropped, as the reference's msg_limit: its record, channels
	// and messages are deleted and its next hello gets a new uaid. The
	// backlog is the stored messages received before its hello, counted
	// as they are sent until storage is found empty; what arrives once it
	// is connected never counts, even when it goes through storage
	// because the client's max-unacked window is full (docs/protocol.md,
	// Message limit). Default 150 (the reference's); 0 turns it off.
	MsgLimit int `conf:"msg-limit" help:"backlog a returning user agent may be sent before it is reset: stored messages received before its hello (0: no limit)"`

	// Broadcasts (megaphone): where the node learns the current version of
	// each broadcast id. MegaphoneAPIURL, when set, is polled with GET and
	// must answer {"broadcasts": {"id": "version", ...}} (Megaphone's
	// GET /v1/broadcasts, or another autoendpoint's); when empty, the node
	// polls storage, where autoendpoint's publish route
	// (PUT /v1/broadcasts/{broadcaster}/{channel}) writes. Default "".
	MegaphoneAPIURL string `conf:"megaphone-api-url" help:"Megaphone URL polled for broadcast versions (empty: poll storage)"`
	// MegaphoneAPIToken, when set, is sent to MegaphoneAPIURL as
	// "Authorization: Bearer <token>". Default "".
	MegaphoneAPIToken string `conf:"megaphone-api-token" help:"bearer token for megaphone-api-url"`
	// MegaphonePollInterval is how often the broadcast versions are polled
	// (from Megaphone or storage); a failed poll keeps the last versions.
	// Default 30s (the reference's).
	MegaphonePollInterval time.Duration `conf:"megaphone-poll-interval" help:"how often broadcast versions are polled"`
	// BroadcastBatch is how many clients one event loop brings up to date
	// with a broadcast change in one turn, before it serves its other
	// work again. Default 64.
	BroadcastBatch int `conf:"broadcast-batch" help:"clients an event loop sends a broadcast change to per turn"`
	// BroadcastRate bounds how many clients per second each event loop
	// sends a broadcast change to: a change reaches a node's clients
	// spread over time (a million on 8 loops: about 12 s) rather than in
	// a burst that takes the CPU deliveries need. The reference only
	// tells clients at their next keepalive check. Default 10,000.
	BroadcastRate int `conf:"broadcast-rate" help:"clients per second each event loop sends a broadcast change to"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Listen:         ":8080",
		RouterListen:   "127.0.0.1:8081",
		EndpointURL:    "http://localhost:8082",
		Settings:       storage.DefaultSettings(),
		HelloTimeout:   10 * time.Second,
		PingInterval:   5 * time.Minute,
		PongTimeout:    30 * time.Second,
		MinClientPing:  45 * time.Second,
		MaxUnacked:     10,
		MaxMessageSize: 32 << 10,
		StorageWorkers: 64,
		StorageTimeout: 5 * time.Second,
		DrainWindow:    10 * time.Second,
		MessagePage:    10,
		MaxChannels:    100000,

		MaxConnectionsPerSource: 1024,

		NodeAPIHeaderTimeout:  5 * time.Second,
		NodeAPIBodyTimeout:    5 * time.Second,
		NodeAPIIdleTimeout:    120 * time.Second,
		NodeAPIMaxConnections: 4096,
		CursorLag:             time.Minute,
		GCPercent:             25,
		GCPercentBusy:         100,
		LogLevel:              "info",
		VersionFile:           "version.json",

		MsgLimit:              150,
		MegaphonePollInterval: 30 * time.Second,
		BroadcastBatch:        64,
		BroadcastRate:         10000,
	}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Listen == "" || c.RouterListen == "":
		return errors.New("engine: config: listen and router-listen are required")
	case c.Listen == c.RouterListen && !strings.HasSuffix(c.Listen, ":0"):
		return errors.New("engine: config: the internal node API must not share the public listener")
	case c.CryptoKey == "":
		return errors.New("engine: config: crypto-key is required (tools/cmd/autokey prints one)")
	case c.NodeSecret == "":
		return errors.New("engine: config: node-secret is required (any long random string, the same on every node of both tiers)")
	case c.NodeAPIHeaderTimeout <= 0 || c.NodeAPIBodyTimeout <= 0 || c.NodeAPIIdleTimeout <= 0 || c.NodeAPIMaxConnections < 1:
		return errors.New("engine: config: node-api timeouts and node-api-max-connections must be positive")
	case c.Settings.Validate() != nil:
		return fmt.Errorf("engine: config: %w", c.Settings.Validate())
	case c.HelloTimeout <= 0 || c.PingInterval <= 0 || c.PongTimeout <= 0 || c.StorageTimeout <= 0:
		return errors.New("engine: config: timeouts must be positive")
	case c.MaxUnacked < 1 || c.MaxMessageSize < 1024 || c.StorageWorkers < 1 || c.MessagePage < 1:
		return errors.New("engine: config: max-unacked, storage-workers, message-page must be >= 1 and max-message-size >= 1024")
	case c.MaxChannels > session.MaxChannelLimit:
		return fmt.Errorf("engine: config: max-channels must be at most %d", session.MaxChannelLimit)
	case c.GCPercent < 10:
		return errors.New("engine: config: gc-percent below 10 spends the node's CPU on GC")
	case c.GCPercentBusy != 0 && c.GCPercentBusy < c.GCPercent:
		return errors.New("engine: config: gc-percent-busy must be 0 (off) or at least gc-percent")
	case c.MaxConnections < 0 || c.EventLoops < 0 || c.DrainWindow < 0 || c.MinClientPing < 0 || c.CursorLag < 0 ||
		c.MaxChannels < 0 || c.MaxConnectionsPerSource < 0:
		return errors.New("engine: config: max-connections, max-connections-per-source, event-loops, drain-window, min-client-ping, cursor-lag, max-channels must not be negative")
	}
	if _, err := listener.ParsePrefixes(c.PerSourceExempt); err != nil {
		return fmt.Errorf("engine: config: per-source-exempt %w", err)
	}
	if _, err := url.Parse(c.EndpointURL); err != nil {
		return fmt.Errorf("engine: config: endpoint-url: %w", err)
	}
	return c.validateBroadcasts()
}

// validateBroadcasts checks the broadcast and message-limit settings.
func (c *Config) validateBroadcasts() error {
	switch {
	case c.MsgLimit < 0:
		return errors.New("engine: config: msg-limit must not be negative (0 turns it off)")
	case c.MegaphonePollInterval < 100*time.Millisecond:
		return errors.New("engine: config: megaphone-poll-interval must be at least 100ms")
	case c.BroadcastBatch < 1 || c.BroadcastRate < c.BroadcastBatch:
		return errors.New("engine: config: broadcast-batch must be >= 1 and broadcast-rate at least broadcast-batch")
	}
	if c.MegaphoneAPIURL != "" {
		u, err := url.Parse(c.MegaphoneAPIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("engine: config: megaphone-api-url %q is not an http(s) URL", c.MegaphoneAPIURL)
		}
	}
	return nil
}
