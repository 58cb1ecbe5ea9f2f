package apns

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender/provider"
)

// Client sends through APNs, one HTTP/2 client per app. Safe for
// concurrent use.
type Client struct {
	cfg  Config
	apps map[string]*app
	// slots bounds sends in flight to Concurrency, whoever calls Send.
	slots chan struct{}
	now   func() time.Time
	// badToken is told of each 400 BadDeviceToken (OnBadDeviceToken).
	badToken func(appID, token string)
}

// app is one configured application.
type app struct {
	topic  string
	url    string // base + "/3/device/"
	http   *http.Client
	tokens *tokenSource // nil: certificate authentication
}

var _ provider.Provider = (*Client)(nil)

// New makes a client, loading every app's key or certificate now, so
// that a bad one stops the start with an error naming the app.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	apps, _ := ParseApps(cfg.Apps) // Validate parsed it
	roots, err := rootCAs(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, apps: make(map[string]*app, len(apps)), slots: make(chan struct{}, cfg.Concurrency), now: time.Now}
	for _, id := range sortedKeys(apps) {
		a, err := newApp(cfg, apps[id], roots, c.now())
		if err != nil {
			return nil, fmt.Errorf("apns: app %q: %w", id, err)
		}
		c.apps[id] = a
	}
	return c, nil
}

func rootCAs(caFile string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		if caFile == "" {
			return nil, fmt.Errorf("apns: system root certificates: %w", err)
		}
		pool = x509.NewCertPool()
	}
	if caFile == "" {
		return pool, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("apns: apns-ca-file: %w", err)
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("apns: apns-ca-file %s: no PEM certificate in it", caFile)
	}
	return pool, nil
}

func newApp(cfg Config, a App, roots *x509.CertPool, now time.Time) (*app, error) {
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	out := &app{topic: a.Topic, url: a.Endpoint + "/3/device/"}
	if a.TokenAuth() {
		b, err := readPEM(a.Key)
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		k, err := ParseSigningKey(b)
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		out.tokens = &tokenSource{key: k, kid: a.KeyID, iss: a.TeamID}
		// Sign one now: a key that cannot sign fails the start, not sends.
		if _, err := out.tokens.token(now); err != nil {
			return nil, err
		}
	} else {
		cert, err := loadCertificate(a.Cert, a.CertKey, now)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	out.http = &http.Client{Transport: newTransport(cfg, tc)}
	return out, nil
}

// newTransport is an HTTP/2-only transport: APNs speaks nothing else, and
// one connection multiplexes all of an app's sends. Pings find a dead
// connection before a send waits on it.
func newTransport(cfg Config, tc *tls.Config) *http.Transport {
	var p http.Protocols
	p.SetHTTP2(true)
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
		ForceAttemptHTTP2:     true,
		Protocols:             &p,
		MaxIdleConns:          4,
		MaxIdleConnsPerHost:   4,
		// For HTTP/2 this is how many connections are dialled at a time:
		// a burst on a cold client shares the first connection instead
		// of opening one per send; more are opened, one by one, only when
		// APNs's stream limit is reached.
		MaxConnsPerHost: 1,
		// Apple asks providers to keep connections open rather than
		// reconnect per burst.
		IdleConnTimeout: 10 * time.Minute,
		HTTP2:           &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 10 * time.Second},
	}
}

// Name implements provider.Provider.
func (c *Client) Name() string { return Name }

// Limits implements provider.Provider.
func (c *Client) Limits() provider.Limits { return c.cfg.Limits() }

// AppIDs are the configured app ids, sorted.
func (c *Client) AppIDs() []string {
	ids := make(map[string]App, len(c.apps))
	for id := range c.apps {
		ids[id] = App{}
	}
	return sortedKeys(ids)
}

// OnBadDeviceToken sets fn, called with the app id and device token of
// every 400 BadDeviceToken answer, which fails the push but never drops
// the registration: the bridges watch them for a sandbox/production
// mix-up (docs/bridges.md). fn must be quick and safe for concurrent
// use. Call before the first Send.
func (c *Client) OnBadDeviceToken(fn func(appID, token string)) { c.badToken = fn }

// Close drops idle connections.
func (c *Client) Close() {
	for _, a := range c.apps {
		a.http.CloseIdleConnections()
	}
}

// maxAnswer bounds how much of an answer is read: APNs's are tiny.
const maxAnswer = 4 << 10

// Send implements provider.Provider. Nothing it returns holds the
// device token (provider.Result.WithoutToken).
func (c *Client) Send(ctx context.Context, n *provider.Notification) provider.Result {
	return c.send(ctx, n).WithoutToken(n.Token)
}

func (c *Client) send(ctx context.Context, n *provider.Notification) provider.Result {
	a := c.apps[n.AppID]
	if a == nil {
		err := fmt.Errorf("apns: app %q is not configured (apns-apps has %q)", n.AppID, c.AppIDs())
		return provider.Result{Verdict: provider.Broken, Err: err, Message: err.Error()}
	}
	if n.Token == "" {
		return provider.Result{Verdict: provider.DeviceGone, Reason: "MissingDeviceToken", Message: "the registration has no APNs device token"}
	}
	body, err := payload(n)
	if err != nil {
		// Stored before the registration API checked it; autopush-rs
		// refuses such a push too.
		return provider.Result{Verdict: provider.Fail, Reason: "InvalidApsData",
			Message: fmt.Sprintf("the registration's aps: %v", err)}
	}
	if len(body) > c.cfg.MaxData {
		return provider.Result{Verdict: provider.Fail, Reason: "PayloadTooLarge",
			Message: fmt.Sprintf("payload of %d bytes is over apns-max-data %d", len(body), c.cfg.MaxData)}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		return provider.Result{Verdict: provider.Retry, Err: fmt.Errorf("apns: wait for a send slot: %w", ctx.Err()), Message: provider.TransportMessage(ctx.Err())}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url+url.PathEscape(n.Token), bytes.NewReader(body))
	if err != nil {
		return provider.Result{Verdict: provider.Broken, Err: fmt.Errorf("apns: request: %w", err), Message: err.Error()}
	}
	now := c.now()
	setHeaders(req.Header, a.topic, n, now)
	var tok string
	if a.tokens != nil {
		if tok, err = a.tokens.token(now); err != nil {
			return provider.Result{Verdict: provider.Broken, Err: fmt.Errorf("apns: %w", err), Message: err.Error()}
		}
		req.Header.Set("Authorization", "bearer "+tok)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		// No answer: refused, reset, timed out. APNs may have taken it
		// (a timeout after the request was written), so it is retried.
		// The error names the URL, whose last segment is the token.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = a.url + provider.RedactedToken
		}
		return provider.Result{Verdict: provider.Retry, Err: fmt.Errorf("apns: send: %w", err), Message: provider.TransportMessage(err)}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil && resp.StatusCode != http.StatusOK {
		return provider.Result{Verdict: provider.Retry, Status: resp.StatusCode, Err: fmt.Errorf("apns: read answer: %w", err), Message: provider.TransportMessage(err)}
	}
	r := classify(resp.StatusCode, resp.Header.Get("Retry-After"), answer, now)
	switch {
	case r.Reason == "ExpiredProviderToken" && tok != "":
		a.tokens.expire(tok)
	case r.Status == http.StatusBadRequest && r.Reason == BadDeviceToken && c.badToken != nil:
		c.badToken(n.AppID, n.Token)
	}
	return r
}

// setHeaders sets APNs's request headers for n.
func setHeaders(h http.Header, topic string, n *provider.Notification, now time.Time) {
	h.Set("Content-Type", "application/json")
	h.Set("apns-topic", topic)
	h.Set("apns-push-type", "alert")
	// No urgency (provider.Default) is 10, as autopush-rs always sends.
	h.Set("apns-priority", "10")
	if n.Priority == provider.Normal {
		h.Set("apns-priority", "5")
	}
	// 0: deliver once if the device is reachable now, else discard.
	exp := int64(0)
	if n.TTL > 0 {
		exp = now.Add(n.TTL).Unix()
	}
	h.Set("apns-expiration", strconv.FormatInt(exp, 10))
	// The collapse id is the Topic when there is one (a newer push
	// replaces an older one not yet seen), else the push id: a resend of
	// the same push (its first send was interrupted) then replaces the
	// first in the device's notification list instead of showing twice,
	// and distinct pushes never share one (docs/bridges.md).
	switch {
	case n.CollapseKey != "":
		h.Set("apns-collapse-id", CollapseID(n.CollapseKey))
	case n.ID != "":
		h.Set("apns-collapse-id", CollapseID(n.ID))
	}
	// The push id as apns-id ties Apple's delivery logs to ours; APNs
	// does not deduplicate by it.
	if id, err := uuid.Parse(n.ID); err == nil && len(n.ID) == 36 {
		h.Set("apns-id", id.String())
	}
}
