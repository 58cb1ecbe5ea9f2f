package apitier

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	"github.com/autopush-go/autopush/apitier/receipts"
	"github.com/autopush-go/autopush/apitier/tracking"
	"github.com/autopush-go/autopush/internal/listener"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/storage"
)

// Config of an endpoint node's HTTP tier. DefaultConfig holds every
// default; the settings package fills it from a JSON file, AUTOEND__NAME
// variables (AUTOENDPOINT__NAME too) and -name flags. The outbound
// sender's settings (sender-*, swrve-*, fcm-*, apns-*) are not here:
// who runs the sender beside the node composes them
// (sender/node.Config), as autoendpoint's main and the
// single-node server do.
type Config struct {
	// Listen is the public HTTP address. Default ":8082".
	Listen string `conf:"listen" help:"public HTTP listen address"`
	// EndpointURL is the public base URL of this tier as application
	// servers reach it. Message Locations are {endpoint-url}/m/{id}, and
	// a VAPID token's "aud" must be its origin (scheme://host[:port]).
	// The connection nodes mint push endpoints from the same setting.
	// Default "http://localhost:8082".
	EndpointURL string `conf:"endpoint-url" help:"public base URL of push endpoints (VAPID aud is its origin)"`
	// TLSListen is a second public address serving the same API over
	// https, with TLSCertFile and TLSKeyFile (PEM; the certificate file
	// may hold its chain after it). Both addresses share the connection
	// caps and the server. For a node without a proxy in front (the
	// quickstart: web-push libraries speak https only); behind a proxy
	// that terminates TLS, leave it empty. Default "": none.
	// VAPIDFormerAud lists endpoint URLs (or their origins) this tier
	// served before endpoint-url moved (http to https, another host): a
	// VAPID token whose aud names one of them is still accepted. An
	// application server signs for the origin of the endpoint it pushes
	// to, and the endpoints handed out before the move name the old one,
	// so without it every one of them fails 401 until the browsers
	// subscribe again. Default none.
	VAPIDFormerAud []string `conf:"vapid-former-aud" help:"former endpoint-url origins whose VAPID tokens are still accepted after endpoint-url moved (comma-separated; empty: none)"`
	TLSListen      string   `conf:"tls-listen" help:"HTTPS listen address serving the same API beside listen, with tls-cert-file and tls-key-file (empty: none)"`
	TLSCertFile    string   `conf:"tls-cert-file" help:"PEM certificate (then its chain) of tls-listen"`
	TLSKeyFile     string   `conf:"tls-key-file" help:"PEM private key of tls-cert-file"`
	// CryptoKey is the Fernet key list (first encrypts, all decrypt)
	// shared with the connection nodes. Required.
	CryptoKey string `conf:"crypto-key" help:"Fernet key list shared with autoconnect (tools/cmd/autokey makes one)"`
	// NodeSecret is sent to the connection nodes' internal API as
	// "Authorization: Bearer <secret>", which refuses callers without it.
	// Required: the connection nodes' node-secret. Default "".
	NodeSecret string `conf:"node-secret" help:"shared secret for the connection nodes' internal API"`

	// Storage settings (storage, data-dir, cql-*), shared with the other
	// tier; defaults in storage.DefaultSettings.
	storage.Settings

	// MaxDataBytes bounds a push's body as received (the encrypted
	// payload, before base64). The reference's max_data_bytes is 5630
	// and limits the same thing (the request body), so the default
	// accepts every payload it accepts; the data stored and sent to the
	// client is its base64url, at most 7,507 characters. Larger bodies get
	// 413 errno 104. At most 12,288 (storage's 16 KiB of base64).
	// Default 5630.
	MaxDataBytes int `conf:"max-data-bytes" help:"largest push body accepted, bytes (reference: 5630)"`
	// NodeTimeout bounds one call to a connection node's internal API,
	// response included. A node that does not answer in time is treated
	// as gone: its node_id is cleared and the message stored. Keep it
	// above the node's own wait for its event loop (2s), so a slow node
	// answers 503 rather than delivering after the endpoint gave up and
	// stored (the client would get the message twice). Default 3s, the
	// reference's request timeout.
	NodeTimeout time.Duration `conf:"node-timeout" help:"timeout of one call to a connection node"`
	// NodeConnectTimeout bounds connecting to a node. Default 1s.
	NodeConnectTimeout time.Duration `conf:"node-connect-timeout" help:"timeout of connecting to a connection node"`
	// NodeIdleConns is how many keep-alive connections are kept open
	// to each connection node. Default 64.
	NodeIdleConns int `conf:"node-idle-conns" help:"keep-alive connections kept per connection node"`
	// StorageTimeout bounds the storage calls of one request, together
	// (a push makes 2 to 5). Default 5s.
	StorageTimeout time.Duration `conf:"storage-timeout" help:"timeout of a request's storage calls"`
	// RouteCacheSize bounds the route cache (apitier/routecache): per
	// subscription, the connection its last push was delivered to, so the
	// next one skips the storage read. A cached push names its connection
	// and the node refuses it (409) unless it is that connection and its
	// client unsubscribed nothing on it; then the push is routed from
	// storage. About 100 B an entry. 0 turns it off. Default 100000.
	RouteCacheSize int `conf:"route-cache-size" help:"subscriptions whose connection is cached (0: off)"`
	// RouteCacheTTL is how long an entry is used before storage is read
	// again. Default 10m.
	RouteCacheTTL time.Duration `conf:"route-cache-ttl" help:"how long a cached route is used"`
	// RequestTimeout bounds each request from its first byte until it has
	// arrived whole, header and body (Content-Length, or chunked up to its
	// last chunk): the first request of a connection from accept, a later
	// one from its first byte (a pipelined one, whose bytes came with the
	// request before, from when the node starts on it). One deadline,
	// never extended: a client that is slower in any way (a stalled
	// header, a header and no body, a body that stops, one byte a second)
	// gets 408 (JSON) at that deadline, nothing is stored, and the
	// connection closes. Each deadline falls up to a tenth of the timeout
	// (at most 0.5 s) later, at random, so that connections stalled
	// together are not all closed in one instant. It replaces
	// header-timeout and body-timeout, whose sum a client could hold a
	// connection for. Default 10s.
	RequestTimeout time.Duration `conf:"request-timeout" help:"time allowed to send a whole request, header and body, from its first byte"`
	// WriteTimeout bounds each write of an answer: a client that does not
	// read its answers is disconnected. Default 10s.
	WriteTimeout time.Duration `conf:"write-timeout" help:"time allowed to write each part of an answer"`
	// MaxConnections caps the connections open at once on the listener.
	// Beyond it a new connection gets 503 (JSON, Retry-After) and is
	// closed. In one process with a connection node the fds come out of
	// the same limit as its websockets. Default 10000.
	MaxConnections int `conf:"max-connections" help:"connections open at once; more are refused with 503"`
	// MaxConnectionsPerSource caps the connections open at once from one
	// source address (an IPv4 address, an IPv6 /64), so that one client
	// holding connections cannot take all of max-connections from the
	// others: beyond it a new connection from that source gets 503 (JSON,
	// Retry-After) and is closed. Behind a load balancer every connection
	// comes from the balancer: list its addresses in per-source-exempt.
	// 0: no per-source cap. Default 256.
	MaxConnectionsPerSource int `conf:"max-connections-per-source" help:"connections open at once from one address (IPv6: one /64); more are refused with 503 (0: no cap)"`
	// PerSourceExempt are the sources max-connections-per-source does not
	// apply to, as CIDR prefixes or addresses ("10.0.0.0/8", "::1"): the
	// load balancers in front. Loopback is not exempt unless listed
	// ("127.0.0.0/8"). Default none.
	PerSourceExempt []string `conf:"per-source-exempt" help:"addresses or CIDR prefixes exempt from max-connections-per-source (the load balancer's; comma-separated)"`
	// MetricsListen is the operations listener serving GET /metrics (this
	// node's series and the process's): never the public listener, whose
	// clients are strangers. Bind it where only the monitoring system
	// reaches it. "" turns it off. Default "127.0.0.1:8084".
	MetricsListen string `conf:"metrics-listen" help:"listen address of GET /metrics, apart from the public listener (empty: off)"`
	// Pprof serves Go's runtime profiles at /debug/pprof/ on MetricsListen
	// (internal/profiling), for the operator alone, as /metrics. Default
	// false.
	Pprof bool `conf:"pprof" help:"serve Go's runtime profiles at /debug/pprof/ on metrics-listen"`
	// AdminTokens are the bearer tokens of the admin routes on
	// MetricsListen (the endpoint diagnosis, GET /__endpoint__: the router
	// record and waiting messages of a user); each at least 16 characters
	// without whitespace. Default none: the admin routes answer 401.
	AdminTokens []string `conf:"admin-tokens" help:"bearer tokens of the admin routes on metrics-listen (GET /__endpoint__, the endpoint diagnosis; comma-separated); empty: closed"`
	// IdleTimeout closes a keep-alive connection idle this long. Keep it
	// above the idle timeout of the load balancer in front (AWS ELB: 60s),
	// or the balancer may send a request down a connection being closed.
	// Default 75s.
	IdleTimeout time.Duration `conf:"idle-timeout" help:"close keep-alive connections idle this long"`
	// ShutdownTimeout bounds a graceful shutdown: requests in flight
	// finish within it (idle keep-alive connections are closed at once).
	// Default 10s.
	ShutdownTimeout time.Duration `conf:"shutdown-timeout" help:"time allowed for requests in flight on shutdown"`
	// VAPIDSkew is the clock skew allowed on a VAPID token's exp, both
	// ways (expired, more than 24 h ahead). Default 60s, the leeway the
	// reference's JWT library gives exp.
	VAPIDSkew time.Duration `conf:"vapid-skew" help:"clock skew allowed on VAPID exp checks"`
	// VAPIDCache is how many verified VAPID tokens are remembered until
	// they expire, so an application server reusing a token pays one
	// signature check. 0 turns the cache off. Default 65536.
	VAPIDCache int `conf:"vapid-cache" help:"verified VAPID tokens cached until their exp (0: off)"`
	// VAPIDAnySub accepts any VAPID sub claim, as the reference does. By
	// default a sub, when present, must be a mailto: or http(s): URL.
	// Default false.
	VAPIDAnySub bool `conf:"vapid-any-sub" help:"accept any VAPID sub claim (default: mailto: or https: only)"`
	// RequestLog writes one JSON summary line per request at info level.
	// Default true.
	RequestLog bool `conf:"request-log" help:"log a summary line per request (info level)"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `conf:"log-level" enum:"debug|info|warn|error" help:"least severe level logged"`
	// VersionFile is served at /__version__. Default "version.json".
	VersionFile string `conf:"version-file" help:"file served at /__version__"`

	// BroadcastTokens are the bearer tokens that may publish broadcast
	// versions (PUT /v1/broadcasts/{broadcaster}/{channel}, Megaphone's
	// API) and list them (GET /v1/broadcasts); each at least 16
	// characters. Default none: both routes answer 401.
	BroadcastTokens []string `conf:"broadcast-tokens" help:"bearer tokens that may publish and list broadcasts (comma-separated)"`
	// BroadcastReaderTokens may only list broadcasts (GET /v1/broadcasts):
	// for connection nodes polling this tier as their megaphone-api-url.
	// Default none.
	BroadcastReaderTokens []string `conf:"broadcast-reader-tokens" help:"bearer tokens that may list broadcasts (comma-separated)"`
	// PushAPIKeys are keys of the outbound sender's API (POST /push,
	// GET /push...), sent as "Authorization: Bearer <key>", kept for
	// compatibility: each is an admin client without quotas (key-1,
	// key-2, ...); push-clients-file gives each team a client of its own.
	// With neither, that API is closed (401). Default empty.
	PushAPIKeys []string `conf:"push-api-keys" help:"API keys of the push sender's routes (Authorization: Bearer), each an admin client; use push-clients-file instead"`
	// PushClientsFile is the push API's clients (YAML, docs/sender.md
	// "Clients"): each a name, the SHA-256 of its key, its scopes (send,
	// read, admin) and quotas (rate, outstanding). Reloaded on SIGHUP and
	// when it changes; a file that does not load keeps the clients in
	// use. With push-api-keys, both sets of clients are in use. Default
	// "": none.
	PushClientsFile string `conf:"push-clients-file" help:"YAML file of the push API's clients: key hashes, scopes, quotas (reloaded on SIGHUP and change)"`
	// PushClientsPoll is how often push-clients-file is checked for
	// changes (its size, modification time and inode); 0: only on
	// SIGHUP. Default 10s.
	PushClientsPoll time.Duration `conf:"push-clients-poll" help:"how often push-clients-file is checked for changes (0: only on SIGHUP)"`
	// BridgeAuthKeys sign and verify the secrets of the bridge
	// registration API (/v1/{type}/{app_id}/registration..., docs/bridges.md):
	// a registration's secret is the hex HMAC-SHA256 of its UAID under
	// the first key; any key verifies, so keys rotate by putting the new
	// one first. The reference's auth_keys, byte for byte: its secrets
	// verify here. Each at least 16 characters without whitespace.
	// Empty closes the registration API (every route answers 401).
	// Default empty.
	BridgeAuthKeys []string `conf:"bridge-auth-keys" help:"keys of the bridge registration secrets (first signs, all verify; comma-separated); empty: registration closed"`
	// BridgeMaxChannels bounds the channels of one bridged registration
	// (POST .../registration/{uaid}/subscription), as max-channels bounds
	// a websocket user agent's: a subscription past it gets 429 and
	// nothing is written; re-subscribing a channel it has is allowed.
	// Concurrent subscriptions of one device can pass it by their number.
	// 0: no limit. Default 100000 (as max-channels).
	BridgeMaxChannels int `conf:"bridge-max-channels" help:"channels per bridged registration; subscriptions beyond get 429 (0: no limit)"`

	// TrackingKeys are VAPID public keys (base64url of the raw 65-byte
	// P-256 point, as in the "k" of a VAPID header) whose pushes are
	// tracked (docs/receipts.md, milestones): each one's fate is recorded
	// from received to delivered, expired or dropped, and counted on
	// /metrics and /__milestones__ of metrics-listen. Nothing of the
	// user, subscription or content is counted. Default none.
	TrackingKeys []string `conf:"tracking-keys" help:"VAPID public keys (base64url) whose pushes are tracked through the milestones (comma-separated)"`
	// ReferenceMilestones serves GET /__milestones__ on this listener
	// (the endpoint's, not metrics-listen) in the shape of the
	// reference's development report (docs/receipts.md): a flat JSON
	// object of how many tracked messages are in each state now, by the
	// reference's state names. Off, the route answers 404 like any
	// unknown path. Unauthenticated, like the reference's: turn it on
	// only where its numbers may be public. Default false.
	ReferenceMilestones bool `conf:"reference-milestones" help:"serve GET /__milestones__ on this listener: tracked messages by current state, the reference's flat JSON shape (unauthenticated)"`
	// Receipts turns on delivery receipts (RFC 8030 §5.1,
	// docs/receipts.md): the receipt subscription routes (/receipts),
	// the Push-Receipt header, and the Link to /receipts on every push's
	// answer. Off, the routes answer 404 and Push-Receipt is ignored, as
	// the reference does. Default false.
	Receipts bool `conf:"receipts" help:"serve delivery receipts (RFC 8030 Push-Receipt, /receipts)"`
	// ReceiptMaxWait bounds a long-polling GET of a receipt subscription
	// (its wait parameter). Keep it below the idle timeout of the load
	// balancer in front. Default 30s.
	ReceiptMaxWait time.Duration `conf:"receipt-max-wait" help:"longest wait of a long-polling receipts GET"`
	// ReceiptMaxWaiting bounds the long-polling receipts GETs waiting at
	// once on this node: each reads storage ten times a second while it
	// waits. One more that would wait is answered 429 with Retry-After:
	// 1. Default 512.
	ReceiptMaxWaiting int `conf:"receipt-max-waiting" help:"long-polling receipts GETs waiting at once (beyond: 429)"`
	// ReceiptWebhooks lets a receipt subscription name a webhook its
	// receipts are POSTed to (signed; at least once; docs/receipts.md).
	// This node then calls URLs application servers chose: https only,
	// public addresses only. Default false.
	ReceiptWebhooks bool `conf:"receipt-webhooks" help:"let receipt subscriptions name a webhook their receipts are POSTed to"`
	// ReceiptWebhookInterval is how often each webhook is served.
	// Default 1s.
	ReceiptWebhookInterval time.Duration `conf:"receipt-webhook-interval" help:"how often receipts are POSTed to their webhooks"`
	// ReceiptWebhookInsecure allows http webhooks and private or
	// loopback addresses: for tests and private deployments only.
	// Default false.
	ReceiptWebhookInsecure bool `conf:"receipt-webhook-insecure" help:"allow http webhooks and private addresses (tests, private deployments)"`
	// ReceiptWebhookTimeout bounds one webhook POST, from connecting to
	// the end of its answer; a webhook that takes longer is tried again
	// after a backoff (1s, doubling to 5m). Default 10s.
	ReceiptWebhookTimeout time.Duration `conf:"receipt-webhook-timeout" help:"longest a receipt webhook POST may take"`
	// ReceiptWebhookWorkers is how many webhook POSTs this node makes at
	// once (one per subscription at a time): slow webhooks hold at most
	// this many. Default 16.
	ReceiptWebhookWorkers int `conf:"receipt-webhook-workers" help:"receipt webhook POSTs in flight at once"`
	// ReceiptWebhooksPerKey bounds the receipt subscriptions with a
	// webhook one VAPID key may create (beyond: 403); each is called by
	// every node every receipt-webhook-interval, and never deleted.
	// 0: no limit. Default 20.
	ReceiptWebhooksPerKey int `conf:"receipt-webhooks-per-key" help:"receipt subscriptions with a webhook one VAPID key may create (beyond: 403; 0: no limit)"`
	// FateSweepInterval is how often this node settles the tracked
	// messages whose TTL passed as expired (every node may: each message
	// is settled once). Default 1s.
	FateSweepInterval time.Duration `conf:"fate-sweep-interval" help:"how often tracked messages past their TTL are settled as expired"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Listen:                  ":8082",
		EndpointURL:             "http://localhost:8082",
		Settings:                storage.DefaultSettings(),
		MaxDataBytes:            DefaultMaxDataBytes,
		NodeTimeout:             3 * time.Second,
		NodeConnectTimeout:      time.Second,
		NodeIdleConns:           64,
		StorageTimeout:          5 * time.Second,
		RouteCacheSize:          100000,
		RouteCacheTTL:           10 * time.Minute,
		RequestTimeout:          10 * time.Second,
		WriteTimeout:            10 * time.Second,
		MaxConnections:          10000,
		MaxConnectionsPerSource: 256,
		MetricsListen:           "127.0.0.1:8084",
		IdleTimeout:             75 * time.Second,
		ShutdownTimeout:         10 * time.Second,
		VAPIDSkew:               vapid.DefaultSkew,
		VAPIDCache:              vapid.DefaultCacheSize,
		RequestLog:              true,
		LogLevel:                "info",
		VersionFile:             "version.json",
		BridgeMaxChannels:       DefaultBridgeMaxChannels,
		PushClientsPoll:         10 * time.Second,
		ReceiptMaxWait:          30 * time.Second,
		ReceiptMaxWaiting:       receipts.DefaultMaxWaiting,
		FateSweepInterval:       time.Second,
		ReceiptWebhookInterval:  time.Second,
		ReceiptWebhookTimeout:   receipts.DefaultWebhookTimeout,
		ReceiptWebhookWorkers:   receipts.DefaultWebhookWorkers,
		ReceiptWebhooksPerKey:   receipts.DefaultWebhooksPerKey,
	}
}

const (
	// DefaultBridgeMaxChannels is bridge-max-channels' default: the
	// websocket tier's max-channels default.
	DefaultBridgeMaxChannels = 100000
	// DefaultMaxDataBytes is the reference's max_data_bytes.
	DefaultMaxDataBytes = 5630
	// MaxMaxDataBytes is the largest body whose base64url fits storage.
	MaxMaxDataBytes = storage.MaxDataLen / 4 * 3
)

// Check validates c as New would, reading push-clients-file too, without
// listening or opening the store (-check-config).
func (c *Config) Check() error {
	if err := c.Validate(); err != nil {
		return err
	}
	return c.CheckFiles()
}

// CheckFiles reads the files New reads: push-clients-file.
func (c *Config) CheckFiles() error {
	if _, err := clients.Load(c.PushClientsFile, c.PushAPIKeys); err != nil {
		return fmt.Errorf("apitier: config: %w", err)
	}
	return nil
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Listen == "":
		return errors.New("apitier: config: listen is required")
	case c.CryptoKey == "":
		return errors.New("apitier: config: crypto-key is required (tools/cmd/autokey prints one)")
	case c.NodeSecret == "":
		return errors.New("apitier: config: node-secret is required (the connection nodes' node-secret)")
	case c.Settings.Validate() != nil:
		return fmt.Errorf("apitier: config: %w", c.Settings.Validate())
	case c.MaxDataBytes < 1 || c.MaxDataBytes > MaxMaxDataBytes:
		return fmt.Errorf("apitier: config: max-data-bytes %d is outside 1..%d", c.MaxDataBytes, MaxMaxDataBytes)
	case c.NodeTimeout <= 0 || c.NodeConnectTimeout <= 0 || c.StorageTimeout <= 0 || c.RequestTimeout <= 0 ||
		c.WriteTimeout <= 0 || c.IdleTimeout <= 0 || c.ShutdownTimeout <= 0:
		return errors.New("apitier: config: timeouts must be positive")
	case c.NodeIdleConns < 1:
		return errors.New("apitier: config: node-idle-conns must be >= 1")
	case c.RouteCacheSize < 0 || (c.RouteCacheSize > 0 && c.RouteCacheTTL <= 0):
		return errors.New("apitier: config: route-cache-size must be >= 0, and route-cache-ttl positive when it is not 0")
	case c.MaxConnections < 1:
		return errors.New("apitier: config: max-connections must be >= 1")
	case c.MaxConnectionsPerSource < 0:
		return errors.New("apitier: config: max-connections-per-source must not be negative")
	case c.ReceiptMaxWait <= 0 || c.FateSweepInterval <= 0 || c.ReceiptWebhookInterval <= 0 ||
		c.ReceiptWebhookTimeout <= 0 || c.ReceiptWebhookWorkers < 1 || c.ReceiptMaxWaiting < 1:
		return errors.New("apitier: config: receipt-max-wait, receipt-max-waiting, fate-sweep-interval, receipt-webhook-interval, receipt-webhook-timeout and receipt-webhook-workers must be positive")
	case c.VAPIDSkew < 0 || c.VAPIDCache < 0 || c.BridgeMaxChannels < 0 || c.PushClientsPoll < 0 || c.ReceiptWebhooksPerKey < 0:
		return errors.New("apitier: config: vapid-skew, vapid-cache, bridge-max-channels, push-clients-poll and receipt-webhooks-per-key must not be negative")
	}
	if err := c.validateAddresses(); err != nil {
		return err
	}
	return c.validateSecrets()
}

// validateAddresses checks the URLs and listeners Validate's switch does
// not.
func (c *Config) validateAddresses() error {
	if _, err := origin(c.EndpointURL); err != nil {
		return err
	}
	for _, u := range c.VAPIDFormerAud {
		if _, err := origin(u); err != nil {
			return fmt.Errorf("apitier: config: vapid-former-aud %q is not an absolute http(s) URL without credentials", u)
		}
	}
	if c.TLSListen != "" && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		return errors.New("apitier: config: tls-listen needs tls-cert-file and tls-key-file")
	}
	return nil
}

// validateSecrets checks the exemptions, tokens and keys.
func (c *Config) validateSecrets() error {
	if _, err := listener.ParsePrefixes(c.PerSourceExempt); err != nil {
		return fmt.Errorf("apitier: config: per-source-exempt %w", err)
	}
	for _, tok := range append(append([]string(nil), c.BroadcastTokens...), c.BroadcastReaderTokens...) {
		if len(tok) < minBroadcastToken || strings.ContainsAny(tok, " \t") {
			return fmt.Errorf("apitier: config: broadcast tokens must be at least %d characters without spaces", minBroadcastToken)
		}
	}
	for _, tok := range c.AdminTokens {
		if len(tok) < minAdminToken || strings.ContainsAny(tok, " \t\r\n") {
			return fmt.Errorf("apitier: config: admin-tokens must be at least %d characters without whitespace", minAdminToken)
		}
	}
	if _, err := tracking.ParseKeys(c.TrackingKeys); err != nil {
		return fmt.Errorf("apitier: config: %w", err)
	}
	for _, k := range c.BridgeAuthKeys {
		if len(k) < minBridgeAuthKey || strings.ContainsAny(k, " \t\r\n") {
			return fmt.Errorf("apitier: config: bridge-auth-keys must be at least %d characters without whitespace", minBridgeAuthKey)
		}
	}
	return nil
}

// minBroadcastToken keeps guessable tokens out of the publish route,
// minAdminToken out of the admin routes.
const (
	minBroadcastToken = 16
	minAdminToken     = 16
)

// minBridgeAuthKey keeps guessable keys from signing registration
// secrets (the reference's are 32 random bytes in base64: 44 characters).
const minBridgeAuthKey = 16

// origin returns the scheme://host[:port] of an absolute http(s) URL,
// lower-cased and without a default port: what a VAPID "aud" names.
func origin(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("apitier: config: endpoint-url %q is not an absolute http(s) URL without credentials", base)
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}
