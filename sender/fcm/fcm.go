package fcm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/autopush-go/autopush/sender/provider"
)

// Client sends through FCM's HTTP v1 API. Safe for concurrent use.
type Client struct {
	cfg  Config
	apps map[string]*app
	http *http.Client
}

// app is one configured application with its token cache.
type app struct {
	url    string // the project's messages:send URL
	tokens *tokens
}

var _ provider.Provider = (*Client)(nil)

// New validates cfg and reads every app's credentials, so a missing or
// bad service account stops the start (the error names the app id).
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	apps, _ := ParseApps(cfg.Apps) // Validate parsed them
	pool := cfg.Limits().PoolSize()
	c := &Client{cfg: cfg, apps: make(map[string]*app, len(apps)), http: &http.Client{
		Transport: transport(cfg.Timeout, pool+1),
		Timeout:   cfg.Timeout,
		// A redirect is not FCM's answer to a send: report it as is.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	// Token fetches are rare (hourly per app) and get their own small pool.
	tokenHTTP := &http.Client{Transport: transport(cfg.Timeout, 2), Timeout: cfg.Timeout}
	base := strings.TrimSuffix(cfg.URL, "/")
	for _, id := range sortedKeys(apps) {
		conf, err := loadServiceAccount(apps[id].Credentials)
		if err != nil {
			return nil, fmt.Errorf("fcm: app %q: %w", id, err)
		}
		c.apps[id] = &app{
			url:    base + "/v1/projects/" + apps[id].ProjectID + "/messages:send",
			tokens: newTokens(conf, tokenHTTP),
		}
	}
	return c, nil
}

func transport(timeout time.Duration, idle int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: timeout,
		// One idle connection per sending slot, so a steady rate reuses
		// connections instead of dialling.
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
}

// Name implements provider.Provider.
func (c *Client) Name() string { return Name }

// Limits implements provider.Provider.
func (c *Client) Limits() provider.Limits { return c.cfg.Limits() }

// Config is the configuration in use (ClampTTL, CheckData).
func (c *Client) Config() Config { return c.cfg }

// AppIDs lists the configured app ids, sorted.
func (c *Client) AppIDs() []string { return sortedKeys(c.apps) }

// request is the body of messages:send. Fields are in alphabetical
// order, as autopush-rs serialises them.
type request struct {
	Message message `json:"message"`
}

type message struct {
	Android android `json:"android"`
	Token   string  `json:"token"`
}

type android struct {
	CollapseKey string            `json:"collapse_key,omitempty"`
	Data        map[string]string `json:"data"`
	Priority    string            `json:"priority,omitempty"`
	TTL         string            `json:"ttl"`
}

// Body is the exact JSON sent for n (TTL clamped, data keys sorted).
// A notification without urgency (provider.Default) carries no
// priority, as autopush-rs sends none: FCM then uses its default for
// data messages, normal.
func (c *Client) Body(n *provider.Notification) ([]byte, error) {
	prio := ""
	switch n.Priority {
	case provider.High:
		prio = "HIGH"
	case provider.Normal:
		prio = "NORMAL"
	}
	ttl := int64(c.cfg.ClampTTL(n.TTL) / time.Second)
	return marshal(request{Message: message{Token: n.Token, Android: android{
		CollapseKey: n.CollapseKey, Data: dataMap(n.Data), Priority: prio, TTL: strconv.FormatInt(ttl, 10) + "s",
	}}})
}

// maxAnswer bounds how much of an answer is read: FCM's are small.
const maxAnswer = 64 << 10

// Send implements provider.Provider. Nothing it returns holds the
// registration token (provider.Result.WithoutToken): it travels in the
// body, but an answer may quote it.
func (c *Client) Send(ctx context.Context, n *provider.Notification) provider.Result {
	return c.send(ctx, n).WithoutToken(n.Token)
}

func (c *Client) send(ctx context.Context, n *provider.Notification) provider.Result {
	a, ok := c.apps[n.AppID]
	if !ok {
		err := fmt.Errorf("fcm: no FCM app %q configured (fcm-apps has %d)", n.AppID, len(c.apps))
		return provider.Result{Verdict: provider.Broken, Err: err, Message: err.Error()}
	}
	if err := c.cfg.CheckData(n.Data); err != nil {
		return provider.Result{Verdict: provider.Fail, Reason: "too_much_data", Message: err.Error()}
	}
	body, err := c.Body(n)
	if err != nil {
		return provider.Result{Verdict: provider.Broken, Err: fmt.Errorf("fcm: body: %w", err), Message: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	bearer, err := a.tokens.get(ctx)
	if err != nil {
		return oauthFailure(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return provider.Result{Verdict: provider.Broken, Err: fmt.Errorf("fcm: request: %w", err), Message: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// No answer: the request may have reached FCM, as with a 504.
		return provider.Result{Verdict: provider.Retry, Err: fmt.Errorf("fcm: send: %w", err), Message: provider.TransportMessage(err)}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil && resp.StatusCode/100 != 2 {
		return provider.Result{Verdict: provider.Retry, Status: resp.StatusCode, Err: fmt.Errorf("fcm: read answer: %w", err), Message: provider.TransportMessage(err)}
	}
	r := classify(resp.StatusCode, resp.Header.Get("Retry-After"), answer, time.Now())
	if r.Verdict == provider.Retry && (r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden) {
		a.tokens.invalidate(bearer)
	}
	return r
}

// oauthFailure is a send that got no access token: retried, as the
// token endpoint may be down for a moment; a bad key shows in Message.
func oauthFailure(err error) provider.Result {
	r := provider.Result{Verdict: provider.Retry, Reason: "oauth", Err: fmt.Errorf("fcm: access token: %w", err)}
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re):
		// Google answers a refused assertion 400 invalid_grant, 401 or 403.
		r.Auth = re.Response.StatusCode/100 == 4
		r.Message = fmt.Sprintf("token endpoint answered %d: %s", re.Response.StatusCode, clip(strings.TrimSpace(string(re.Body)), maxMessage))
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		r.Message = "timeout waiting for an access token"
	default:
		r.Message = clip(err.Error(), maxMessage)
	}
	return r
}

// fcmError is FCM's error answer (google.rpc.Status with FcmError
// details).
type fcmError struct {
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type      string `json:"@type"`
			ErrorCode string `json:"errorCode"`
		} `json:"details"`
	} `json:"error"`
}

const fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"

// Bounds of what an answer may put in a Result.
const (
	maxReasonPart = 64
	maxMessage    = 512
)

// ParseError reads FCM's error body: its status (INVALID_ARGUMENT), its
// FcmError errorCode (UNREGISTERED; "" when none) and message. A body
// that is not FCM's JSON gives its text, clipped, as the message.
// Strings are clipped to valid UTF-8 of bounded length.
func ParseError(body []byte) (status, errorCode, msg string) {
	var e fcmError
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return "", "", clip(strings.TrimSpace(string(body)), maxMessage)
	}
	for _, d := range e.Error.Details {
		if d.Type == fcmErrorType && d.ErrorCode != "" {
			errorCode = d.ErrorCode
			break
		}
	}
	return clip(e.Error.Status, maxReasonPart), clip(errorCode, maxReasonPart), clip(e.Error.Message, maxMessage)
}

// classify maps an answer to a verdict (autopush-rs's rules, and FCM's
// documented retryable errors).
func classify(status int, retryAfter string, body []byte, now time.Time) provider.Result {
	r := provider.Result{Status: status}
	if status/100 == 2 {
		r.Verdict = provider.Sent
		return r
	}
	st, code, msg := ParseError(body)
	r.Message = msg
	r.Reason = st
	if code != "" && code != st {
		r.Reason = strings.TrimPrefix(st+"/"+code, "/")
	}
	switch {
	case status == http.StatusNotFound && code == "UNREGISTERED":
		// FCM's answer for a token that is no longer valid. autopush-rs
		// drops the registration on any 404; a 404 without UNREGISTERED
		// (a wrong fcm-url or project, a proxy's page) says nothing about
		// the device, and taking it for one would drop every device of
		// the app (docs/bridges.md, "No mass drop"): it fails the push.
		r.Verdict = provider.DeviceGone
	case status == http.StatusForbidden && code == "SENDER_ID_MISMATCH":
		// The token belongs to another project: a new token won't help.
		r.Verdict = provider.Fail
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// Our access token was refused (revoked, or the clocks
		// disagree): Send drops it and the retry fetches another. The
		// reason keeps the failure visible in the attempt log.
		r.Verdict = provider.Retry
		r.Auth = true
		if r.Reason == "" {
			r.Reason = "auth"
		}
	case status == http.StatusTooManyRequests || status/100 == 5:
		r.Verdict = provider.Retry
		r.RetryAfter = provider.ParseRetryAfter(retryAfter, now)
	default:
		// 400 INVALID_ARGUMENT (a malformed token included: autopush-rs
		// does not drop the registration for it either), other 4xx
		// (404 without UNREGISTERED included), 3xx.
		r.Verdict = provider.Fail
	}
	if r.Message == "" {
		r.Message = cmp.Or(http.StatusText(status), "HTTP "+strconv.Itoa(status))
	}
	return r
}

// clip cuts s to at most n bytes of valid UTF-8.
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
