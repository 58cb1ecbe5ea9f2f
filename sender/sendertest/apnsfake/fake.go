package apnsfake

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/autopush-go/autopush/sender/sendertest/fakelog"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// Received is one request the fake got, in arrival order.
type Received struct {
	At time.Time
	// Proto is the request's protocol ("HTTP/2.0").
	Proto  string
	Method string
	Path   string
	// Token is the device token of the path.
	Token  string
	Header http.Header
	// Body is the exact request body (up to the payload limit and one
	// byte more).
	Body []byte
	// JWT is the provider token of the authorization header ("" with
	// certificate auth); KeyID its kid.
	JWT   string
	KeyID string
	// ClientCert is the common name of a verified client certificate.
	ClientCert string
	// Status and Reason are what the fake answered (Status 0: it reset
	// the stream).
	Status int
	Reason string
}

// Fault is what the fake does with one request that passed its checks
// instead of answering 200.
type Fault struct {
	// Status answers with this status and {"reason": Reason} (0: 200).
	Status int
	Reason string
	// RetryAfter is sent as the Retry-After header when set.
	RetryAfter string
	// Delay waits this long before answering (or resetting).
	Delay time.Duration
	// Reset aborts the stream without an answer (after Delay).
	Reset bool
	// Body, when not nil, is the answer's body as is, in place of
	// APNs's JSON (an answer from something other than APNs: a proxy's
	// page, a malformed body).
	Body []byte
}

// Options configure the fake.
type Options struct {
	// Topic is the apns-topic every request must carry ("": any).
	Topic string
	// MaxConcurrentStreams per connection, as APNs advertises it
	// (default 1000).
	MaxConcurrentStreams uint32
	// MaxPayload is the most body bytes (default 4096, Apple's limit).
	MaxPayload int
}

// Fake is the fake APNs. Its methods are safe for concurrent use.
type Fake struct {
	srv  *http.Server
	ln   net.Listener
	ca   *ca
	opts Options
	done chan struct{}

	log fakelog.Log[Received]

	mu      sync.Mutex
	keys    map[string]*Key
	gone    map[string]time.Time
	foreign map[string]bool
	queue   []Fault
	faults  func(Received) Fault
	latency func() time.Duration
	hold    chan struct{}
	now     func() time.Time
	jwts    map[string]bool
	second  map[int64]int

	conns atomic.Int64
}

// Start listens on 127.0.0.1:0 and serves HTTP/2 over TLS until Close.
func Start(opts Options) (*Fake, error) {
	if opts.MaxConcurrentStreams == 0 {
		opts.MaxConcurrentStreams = 1000
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = 4096
	}
	c, err := newCA()
	if err != nil {
		return nil, fmt.Errorf("apnsfake: CA: %w", err)
	}
	cert, err := c.serverCert()
	if err != nil {
		return nil, fmt.Errorf("apnsfake: server certificate: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("apnsfake: listen: %w", err)
	}
	f := &Fake{ln: ln, ca: c, opts: opts, done: make(chan struct{}),
		keys: map[string]*Key{}, gone: map[string]time.Time{}, foreign: map[string]bool{}, jwts: map[string]bool{},
		second: map[int64]int{}, now: time.Now}
	var p http.Protocols
	p.SetHTTP2(true)
	f.srv = &http.Server{
		Handler: http.HandlerFunc(f.serve),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				f.conns.Add(1)
			}
		},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		Protocols:         &p,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: int(opts.MaxConcurrentStreams)},
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			// Either a client certificate or a provider token, as APNs.
			ClientAuth: tls.VerifyClientCertIfGiven,
			ClientCAs:  c.pool,
			MinVersion: tls.VersionTLS12,
		},
		// TLS handshakes a test aborts are not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go f.srv.ServeTLS(ln, "", "")
	return f, nil
}

// URL is the base URL to configure as an app's endpoint
// ("https://127.0.0.1:port").
func (f *Fake) URL() string { return "https://" + f.ln.Addr().String() }

// CAPEM is the PEM of the CA that signed the fake's certificates.
func (f *Fake) CAPEM() []byte { return f.ca.pem }

// WriteCA writes CAPEM into dir (for apns-ca-file) and returns its path.
func (f *Fake) WriteCA(dir string) (string, error) {
	p := filepath.Join(dir, "apnsfake-ca.pem")
	if err := os.WriteFile(p, f.ca.pem, 0o600); err != nil {
		return "", fmt.Errorf("apnsfake: write CA: %w", err)
	}
	return p, nil
}

// IssueClientCert issues a client certificate (and its key, both PEM)
// the fake accepts instead of a provider token.
func (f *Fake) IssueClientCert(cn string) (certPEM, keyPEM []byte, err error) {
	return f.ca.issue(cn, false, time.Now().Add(24*time.Hour))
}

// Close stops the server, ending requests in flight.
func (f *Fake) Close() error {
	select {
	case <-f.done:
	default:
		close(f.done)
	}
	return f.srv.Close()
}

// AddKey trusts k's provider tokens.
func (f *Fake) AddKey(k *Key) {
	f.mu.Lock()
	f.keys[k.ID] = k
	f.mu.Unlock()
}

// SetNow sets the fake's clock, which judges a token's age (nil:
// time.Now).
func (f *Fake) SetNow(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now == nil {
		now = time.Now
	}
	f.now = now
}

// Gone makes tokens answer 410 Unregistered.
func (f *Fake) Gone(tokens ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range tokens {
		f.gone[t] = f.now()
	}
}

// OtherEnvironment makes tokens answer 400 BadDeviceToken, as APNs
// answers a token issued by its other environment: a development
// build's sandbox token sent to production, or a release build's token
// sent to the sandbox.
func (f *Fake) OtherEnvironment(tokens ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range tokens {
		f.foreign[t] = true
	}
}

// Queue adds answers that the next requests passing the checks get, one
// each, in order, before SetFaults's function is asked.
func (f *Fake) Queue(faults ...Fault) {
	f.mu.Lock()
	f.queue = append(f.queue, faults...)
	f.mu.Unlock()
}

// SetFaults sets the function that decides the fault of each request
// passing the checks when the queue is empty (nil: 200).
func (f *Fake) SetFaults(fn func(Received) Fault) {
	f.mu.Lock()
	f.faults = fn
	f.mu.Unlock()
}

// SetLatency sets the function that draws each answer's extra delay (nil:
// none).
func (f *Fake) SetLatency(fn func() time.Duration) {
	f.mu.Lock()
	f.latency = fn
	f.mu.Unlock()
}

// Hold makes requests wait, once recorded and before their answer, until
// release is called (tests of concurrency limits: the requests in flight
// stay there while the test looks).
func (f *Fake) Hold() (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.hold = ch
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			if f.hold == ch {
				f.hold = nil
			}
			f.mu.Unlock()
			close(ch)
		})
	}
}

// waitHold waits for a Hold's release; false when the request or the
// fake ended first.
func (f *Fake) waitHold(ctx context.Context) bool {
	f.mu.Lock()
	ch := f.hold
	f.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	case <-f.done:
	}
	return false
}

// Log returns a copy of every request received so far.
func (f *Fake) Log() []Received { return f.log.All() }

// Count is how many requests were received.
func (f *Fake) Count() int { return f.log.Len() }

// JWTs is how many distinct provider tokens were seen.
func (f *Fake) JWTs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.jwts)
}

// PerSecond counts requests by the Unix second they arrived in.
func (f *Fake) PerSecond() map[int64]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[int64]int, len(f.second))
	for k, v := range f.second {
		m[k] = v
	}
	return m
}

// Conns is how many connections were accepted (HTTP/2 multiplexes a
// client's requests over few).
func (f *Fake) Conns() int { return int(f.conns.Load()) }

// InFlight is how many requests it is handling now.
func (f *Fake) InFlight() int { return f.log.InFlight() }

// MaxInFlight is the most requests (streams) it was handling at once.
func (f *Fake) MaxInFlight() int { return f.log.MaxInFlight() }

// WaitCount blocks until at least n requests were received or ctx ends.
func (f *Fake) WaitCount(ctx context.Context, n int) error {
	return f.log.Wait(ctx, n, "apnsfake: requests")
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	defer f.log.Enter()()
	rec := Received{Proto: r.Proto, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()}
	rec.Body, _ = io.ReadAll(io.LimitReader(r.Body, int64(f.opts.MaxPayload)+1))
	f.mu.Lock()
	rec.At = f.now()
	f.mu.Unlock()
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		rec.ClientCert = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	fault := f.check(r, &rec)
	if fault.Status == 0 && !fault.Reset {
		fault = f.next(rec)
	}
	if fault.Status == 0 && !fault.Reset {
		fault.Status = http.StatusOK
	}
	rec.Status, rec.Reason = fault.Status, fault.Reason
	if fault.Reset {
		rec.Status, rec.Reason = 0, ""
	}
	f.record(rec)
	if !f.waitHold(r.Context()) {
		return
	}
	if d := fault.Delay + f.drawLatency(); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-f.done:
			return
		}
	}
	if fault.Reset {
		panic(http.ErrAbortHandler) // RST_STREAM, no answer
	}
	f.reply(w, rec, fault)
}

// check applies APNs's checks in its order: method, path, credentials,
// topic, headers, payload, token. A failed check is the answer.
func (f *Fake) check(r *http.Request, rec *Received) Fault {
	bad := func(status int, reason string) Fault { return Fault{Status: status, Reason: reason} }
	if r.Method != http.MethodPost {
		return bad(http.StatusMethodNotAllowed, "MethodNotAllowed")
	}
	token, ok := strings.CutPrefix(r.URL.Path, "/3/device/")
	if !ok || strings.Contains(token, "/") {
		return bad(http.StatusNotFound, "BadPath")
	}
	rec.Token = token
	if token == "" {
		return bad(http.StatusBadRequest, "MissingDeviceToken")
	}
	if reason := f.checkAuth(r, rec); reason != "" {
		return bad(http.StatusForbidden, reason)
	}
	h := r.Header
	topic := h.Get("apns-topic")
	switch {
	case topic == "":
		return bad(http.StatusBadRequest, "MissingTopic")
	case f.opts.Topic != "" && topic != f.opts.Topic:
		return bad(http.StatusBadRequest, "DeviceTokenNotForTopic")
	case len(h.Values("apns-topic")) > 1 || len(h.Values("apns-id")) > 1:
		return bad(http.StatusBadRequest, "DuplicateHeaders")
	}
	if p := h.Get("apns-priority"); p != "" && p != "10" && p != "5" && p != "1" {
		return bad(http.StatusBadRequest, "BadPriority")
	}
	if e := h.Get("apns-expiration"); e != "" {
		if v, err := strconv.ParseInt(e, 10, 64); err != nil || v < 0 {
			return bad(http.StatusBadRequest, "BadExpirationDate")
		}
	}
	if len(h.Get("apns-collapse-id")) > 64 {
		return bad(http.StatusBadRequest, "BadCollapseId")
	}
	if id := h.Get("apns-id"); id != "" {
		if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
			return bad(http.StatusBadRequest, "BadMessageId")
		}
	}
	switch h.Get("apns-push-type") {
	case "", "alert", "background", "voip", "complication", "fileprovider", "mdm", "location", "liveactivity", "pushtotalk":
	default:
		return bad(http.StatusBadRequest, "InvalidPushType")
	}
	switch {
	case len(rec.Body) == 0:
		return bad(http.StatusBadRequest, "PayloadEmpty")
	case len(rec.Body) > f.opts.MaxPayload:
		return bad(http.StatusRequestEntityTooLarge, "PayloadTooLarge")
	}
	f.mu.Lock()
	_, gone := f.gone[token]
	foreign := f.foreign[token]
	f.mu.Unlock()
	switch {
	case foreign:
		return bad(http.StatusBadRequest, "BadDeviceToken")
	case gone:
		return bad(http.StatusGone, "Unregistered")
	}
	return Fault{}
}

// checkAuth verifies the provider token, or the client certificate when
// there is none; it returns APNs's reason for refusing them, "" to accept.
func (f *Fake) checkAuth(r *http.Request, rec *Received) string {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		if rec.ClientCert != "" {
			return ""
		}
		return "MissingProviderToken"
	}
	tok, ok := strings.CutPrefix(auth, "bearer ")
	if !ok {
		return "InvalidProviderToken"
	}
	rec.JWT = tok
	f.mu.Lock()
	f.jwts[tok] = true
	now := f.now()
	f.mu.Unlock()
	var key *Key
	parsed, err := jwt.Parse(tok, func(t *jwt.Token) (any, error) {
		rec.KeyID, _ = t.Header["kid"].(string)
		f.mu.Lock()
		key = f.keys[rec.KeyID]
		f.mu.Unlock()
		if key == nil {
			return nil, errors.New("unknown kid")
		}
		return &key.Private.PublicKey, nil
	}, jwt.WithValidMethods([]string{"ES256"}), jwt.WithoutClaimsValidation())
	if err != nil {
		return "InvalidProviderToken"
	}
	claims, _ := parsed.Claims.(jwt.MapClaims)
	iss, _ := claims["iss"].(string)
	iat, ok := claims["iat"].(float64)
	switch {
	case iss != key.TeamID || !ok:
		return "InvalidProviderToken"
	case now.Sub(time.Unix(int64(iat), 0)) > time.Hour:
		return "ExpiredProviderToken"
	case time.Unix(int64(iat), 0).Sub(now) > time.Minute:
		return "InvalidProviderToken"
	}
	return ""
}

// next is the fault of a request that passed the checks.
func (f *Fake) next(rec Received) Fault {
	f.mu.Lock()
	if len(f.queue) > 0 {
		q := f.queue[0]
		f.queue = f.queue[1:]
		f.mu.Unlock()
		return q
	}
	fn := f.faults
	f.mu.Unlock()
	if fn != nil {
		return fn(rec)
	}
	return Fault{}
}

func (f *Fake) drawLatency() time.Duration {
	f.mu.Lock()
	fn := f.latency
	f.mu.Unlock()
	if fn == nil {
		return 0
	}
	return fn()
}

func (f *Fake) record(rec Received) {
	f.mu.Lock()
	f.second[rec.At.Unix()]++
	f.mu.Unlock()
	f.log.Add(rec)
}

// reply answers as APNs: 200 with apns-id, or the JSON reason (with a
// timestamp for 410).
func (f *Fake) reply(w http.ResponseWriter, rec Received, fault Fault) {
	id := rec.Header.Get("apns-id")
	if id == "" {
		id = uuid.NewString()
	}
	w.Header().Set("apns-id", id)
	if fault.RetryAfter != "" {
		w.Header().Set("Retry-After", fault.RetryAfter)
	}
	if fault.Body != nil {
		w.WriteHeader(fault.Status)
		w.Write(fault.Body)
		return
	}
	if fault.Status == http.StatusOK {
		w.WriteHeader(http.StatusOK)
		return
	}
	body := map[string]any{"reason": fault.Reason}
	if fault.Status == http.StatusGone {
		f.mu.Lock()
		at, ok := f.gone[rec.Token]
		f.mu.Unlock()
		if !ok {
			at = rec.At
		}
		body["timestamp"] = at.UnixMilli()
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(fault.Status)
	w.Write(b)
}
