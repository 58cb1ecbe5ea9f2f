package swrve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
)

// Name is the provider's name in storage, metrics and the push API.
const Name = "swrve"

// Config of the Swrve provider; the settings package fills it (flags
// -swrve-*, variables PREFIX__SWRVE_*).
type Config struct {
	// URL is the push endpoint. Default "https://service.swrve.com/push"
	// (EU data centre: https://eu-service.swrve.com/push).
	URL string `conf:"swrve-url" help:"Swrve push API endpoint"`
	// Rate is Swrve's rate limit: the most calls the account accepts in
	// any second, from every sender node sharing the store together.
	// Default 300.
	Rate float64 `conf:"swrve-rate" help:"most calls a second the Swrve account accepts, from all sender nodes together (its rate limit)"`
	// Delay is the time between two calls of the account, all nodes
	// together (also known as delayMillis); at most 95% of Rate, for
	// headroom. Default 4ms (250 calls a second).
	Delay time.Duration `conf:"swrve-delay" help:"time between two calls to Swrve, all sender nodes together (the pace; leaves headroom under swrve-rate)"`
	// AverageLatency is the expected average answer time (also known as
	// averageProcessingMillis); the sending pool holds
	// AverageLatency/Delay sends and the look-ahead. Default
	// 2s (pool 500 + 62).
	AverageLatency time.Duration `conf:"swrve-average-latency" help:"expected average Swrve answer time (sizes the sending pool)"`
	// Timeout bounds one send, answer included. Default 30s.
	Timeout time.Duration `conf:"swrve-timeout" help:"timeout of one send to Swrve"`
	// KeysFile is the YAML mapping of message prototypes to campaign
	// push keys (messagePrototypePushKeys, keys.go). Reloaded on SIGHUP
	// and when it changes. Default "" (no mapping: every push fails with
	// MESSAGE_PROTOTYPE_KEY).
	KeysFile string `conf:"swrve-keys-file" help:"YAML file mapping message prototypes to Swrve push keys (reloaded on SIGHUP and change)"`
	// KeysPoll is how often the keys file is checked for changes; 0 only
	// reloads on SIGHUP. Default 10s.
	KeysPoll time.Duration `conf:"swrve-keys-poll" help:"how often the keys file is checked for changes (0: only on SIGHUP)"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		URL: "https://service.swrve.com/push", Rate: 300, Delay: 4 * time.Millisecond, AverageLatency: 2 * time.Second,
		Timeout: 30 * time.Second, KeysPoll: 10 * time.Second,
	}
}

// Limits are what the sender drives the provider with.
func (c *Config) Limits() provider.Limits {
	return provider.Limits{Rate: c.Rate, Delay: c.Delay, AverageLatency: c.AverageLatency, Timeout: c.Timeout}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("swrve: config: swrve-url %q is not an absolute http(s) URL", c.URL)
	}
	if err := c.Limits().Validate(); err != nil {
		return fmt.Errorf("swrve: config: %w", err)
	}
	if c.KeysPoll < 0 {
		return errors.New("swrve: config: swrve-keys-poll must not be negative")
	}
	return nil
}

// Client sends through Swrve's push API. Safe for concurrent use.
type Client struct {
	cfg  Config
	keys *Keys
	http *http.Client
}

var _ provider.Provider = (*Client)(nil)

// New makes a client; keys may be shared with a watcher that reloads them.
func New(cfg Config, keys *Keys) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pool := cfg.Limits().PoolSize()
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
		// One idle connection per sending slot (and the reader), so a
		// steady rate reuses connections instead of dialling.
		MaxIdleConns:        pool + 1,
		MaxIdleConnsPerHost: pool + 1,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &Client{cfg: cfg, keys: keys, http: &http.Client{Transport: tr, Timeout: cfg.Timeout}}, nil
}

// Name implements provider.Provider.
func (c *Client) Name() string { return Name }

// Limits implements provider.Provider.
func (c *Client) Limits() provider.Limits { return c.cfg.Limits() }

// Keys is the mapping in use.
func (c *Client) Keys() *Keys { return c.keys }

// answer is Swrve's JSON body, on success and on error.
type answer struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// maxAnswer bounds how much of an answer is read: Swrve's are tiny.
const maxAnswer = 64 << 10

var _ provider.Checker = (*Client)(nil)

// Check implements provider.Checker: a prototype without a push key for
// the platform fails before any call (MESSAGE_PROTOTYPE_KEY).
func (c *Client) Check(n *provider.Notification) (provider.Result, bool) {
	if _, ok := c.keys.Lookup(n.PrototypeKey, n.Platform); !ok {
		return noKey(n), false
	}
	return provider.Result{}, true
}

func noKey(n *provider.Notification) provider.Result {
	return provider.Result{Verdict: provider.NoPrototypeKey,
		Message: fmt.Sprintf("no Swrve push_key for message prototype %q on %s", n.PrototypeKey, n.Platform)}
}

// Send implements provider.Provider. The mapping is looked up again: a
// reload may have dropped the prototype since Check.
func (c *Client) Send(ctx context.Context, n *provider.Notification) provider.Result {
	key, ok := c.keys.Lookup(n.PrototypeKey, n.Platform)
	if !ok {
		return noKey(n)
	}
	form := url.Values{"push_key": {key}, "user": {n.Token}}
	if n.Message != "" {
		form.Set("message", n.Message)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL, strings.NewReader(form.Encode()))
	if err != nil {
		return provider.Result{Verdict: provider.Broken, Err: fmt.Errorf("swrve: request: %w", err), Message: err.Error()}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// No answer: refused, reset, timed out. The request may have
		// reached Swrve (a reset or timeout after it was written), like a
		// 504 seen from this side, so it is retried, not failed.
		return provider.Result{Verdict: provider.Retry, Err: fmt.Errorf("swrve: send: %w", err), Message: provider.TransportMessage(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil && resp.StatusCode/100 != 2 {
		return provider.Result{Verdict: provider.Retry, Status: resp.StatusCode, Err: fmt.Errorf("swrve: read answer: %w", err), Message: provider.TransportMessage(err)}
	}
	return classify(resp.StatusCode, resp.Header.Get("Retry-After"), body, time.Now())
}

// classify maps an answer to a verdict: 2xx is sent, 429, 500, 502, 503
// and 504 retry (after the Retry-After sent), any other status fails.
func classify(status int, retryAfter string, body []byte, now time.Time) provider.Result {
	r := provider.Result{Status: status}
	var a answer
	if json.Unmarshal(body, &a) == nil && a.Message != "" {
		r.Message = a.Message
	} else {
		r.Message = strings.TrimSpace(string(body[:min(len(body), 512)]))
	}
	if a.Code != 0 && a.Code != status {
		r.Reason = strconv.Itoa(a.Code)
	}
	switch {
	case status/100 == 2:
		r.Verdict, r.Message = provider.Sent, ""
	case status == 429 || status == 500 || status == 502 || status == 503 || status == 504:
		r.Verdict = provider.Retry
		r.RetryAfter = parseRetryAfter(retryAfter, now)
	default:
		r.Verdict = provider.Fail
	}
	return r
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 10.2.3);
// anything else is no wait. Capped at a day.
func parseRetryAfter(v string, now time.Time) time.Duration { return provider.ParseRetryAfter(v, now) }

// Watch reloads the keys file every poll interval when it changed, until
// ctx ends; each outcome is logged and goes to observe (nil error:
// reloaded).
func Watch(ctx context.Context, keys *Keys, poll time.Duration, log *slog.Logger, observe func(error)) {
	keys.Watch(ctx, poll, func(err error) {
		ReportReload(log, keys, err, "file changed")
		if observe != nil {
			observe(err)
		}
	})
}

// ReportReload logs the outcome of a reload.
func ReportReload(log *slog.Logger, keys *Keys, err error, why string) {
	if err != nil {
		log.Error("swrve keys not reloaded", "why", why, "error", err)
		return
	}
	log.Info("swrve keys reloaded", "why", why, "prototypes", keys.Len())
}
