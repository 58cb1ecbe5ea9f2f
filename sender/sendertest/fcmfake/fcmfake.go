package fcmfake

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/autopush-go/autopush/sender/sendertest/fakelog"
	"github.com/golang-jwt/jwt/v5"
)

// Scope is the OAuth2 scope a token must be asked for to send.
const Scope = "https://www.googleapis.com/auth/firebase.messaging"

// Answer is what the fake answers one call instead of its own verdict.
type Answer struct {
	Status int
	Body   []byte
	// Header is added to the answer (Retry-After, ...).
	Header http.Header
	// Delay waits this long before answering; a client that gives up
	// first sees a timeout.
	Delay time.Duration
}

// Error is FCM's error answer: status, the google.rpc status name
// (INVALID_ARGUMENT), its message and, when set, an FcmError errorCode
// (UNREGISTERED).
func Error(status int, rpcStatus, message, errorCode string) Answer {
	type detail struct {
		Type      string `json:"@type"`
		ErrorCode string `json:"errorCode"`
	}
	e := map[string]any{"code": status, "message": message, "status": rpcStatus}
	if errorCode != "" {
		e["details"] = []detail{{"type.googleapis.com/google.firebase.fcm.v1.FcmError", errorCode}}
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return Answer{Status: status, Body: b, Header: http.Header{"Content-Type": {"application/json; charset=UTF-8"}}}
}

// Unregistered is FCM's answer for a token no longer valid.
func Unregistered() Answer {
	return Error(http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")
}

// Unauthenticated is FCM's answer for a missing, unknown or expired
// access token.
func Unauthenticated() Answer {
	return Error(http.StatusUnauthorized, "UNAUTHENTICATED",
		"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.", "")
}

// Received is one send the fake got, in arrival order.
type Received struct {
	At     time.Time
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Status is what the fake answered (200 for a queued Status 0).
	Status int
}

type issued struct {
	project string
	expires time.Time
}

// Fake is the fake FCM. Its methods are safe for concurrent use.
type Fake struct {
	srv *http.Server
	ln  net.Listener

	mu           sync.Mutex
	accounts     map[string]*Account // by client_email
	lifetime     time.Duration
	tokens       map[string]issued
	tokenAnswers []Answer
	answers      []Answer
	gone         map[string]bool
	tokenCalls   int
	latency      func() time.Duration // delays the default answers

	log fakelog.Log[Received] // the sends
}

// Start listens on 127.0.0.1:0 and serves until Close.
func Start() (*Fake, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fcmfake: listen: %w", err)
	}
	f := &Fake{ln: ln, accounts: map[string]*Account{}, lifetime: time.Hour,
		tokens: map[string]issued{}, gone: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/token", f.serveToken)
	mux.HandleFunc("/v1/projects/", f.serveSend)
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second}
	go f.srv.Serve(ln)
	return f, nil
}

// URL is the base URL of the API (fcm-url): "http://127.0.0.1:port".
func (f *Fake) URL() string { return "http://" + f.ln.Addr().String() }

// TokenURL is the OAuth2 token endpoint (an account's token_uri).
func (f *Fake) TokenURL() string { return f.URL() + "/token" }

// Close stops the server, breaking calls in flight.
func (f *Fake) Close() error { return f.srv.Close() }

// NewAccount makes a service account of project whose tokens the fake
// mints and accepts.
func (f *Fake) NewAccount(project string) (*Account, error) {
	a, err := NewServiceAccount(project, f.TokenURL())
	if err != nil {
		return nil, err
	}
	f.AddAccount(a)
	return a, nil
}

// AddAccount makes the fake know a (its public key and project).
func (f *Fake) AddAccount(a *Account) {
	f.mu.Lock()
	f.accounts[a.ClientEmail] = a
	f.mu.Unlock()
}

// SetTokenLifetime sets the lifetime of the access tokens issued from now
// on (default an hour, as Google's; at least a second).
func (f *Fake) SetTokenLifetime(d time.Duration) {
	f.mu.Lock()
	f.lifetime = max(d, time.Second)
	f.mu.Unlock()
}

// ExpireTokens makes every access token issued so far expired.
func (f *Fake) ExpireTokens() {
	f.mu.Lock()
	now := time.Now()
	for k, t := range f.tokens {
		t.expires = now
		f.tokens[k] = t
	}
	f.mu.Unlock()
}

// Queue makes the next sends (with a valid token and message) answer
// these, in order.
func (f *Fake) Queue(answers ...Answer) {
	f.mu.Lock()
	f.answers = append(f.answers, answers...)
	f.mu.Unlock()
}

// QueueToken makes the next token requests answer these, in order,
// before any check.
func (f *Fake) QueueToken(answers ...Answer) {
	f.mu.Lock()
	f.tokenAnswers = append(f.tokenAnswers, answers...)
	f.mu.Unlock()
}

// SetLatency delays every answer the fake makes itself (not the queued
// ones) by what fn returns (load tests: FCM's answer time).
func (f *Fake) SetLatency(fn func() time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latency = fn
}

// SetGone makes sends to these registration tokens answer 404
// UNREGISTERED.
func (f *Fake) SetGone(tokens ...string) {
	f.mu.Lock()
	for _, t := range tokens {
		f.gone[t] = true
	}
	f.mu.Unlock()
}

// Log returns a copy of every send received so far.
func (f *Fake) Log() []Received { return f.log.All() }

// Sends is how many sends were received.
func (f *Fake) Sends() int { return f.log.Len() }

// TokenRequests is how many token requests were received.
func (f *Fake) TokenRequests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenCalls
}

// TokensIssued is how many access tokens were issued.
func (f *Fake) TokensIssued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tokens)
}

// SendTimes are the arrival times of the sends, in order.
func (f *Fake) SendTimes() []time.Time {
	log := f.log.All()
	ts := make([]time.Time, len(log))
	for i, r := range log {
		ts[i] = r.At
	}
	return ts
}

// MaxPerSecond is the most sends that arrived within any one second.
func (f *Fake) MaxPerSecond() int { return MaxInWindow(f.SendTimes(), time.Second) }

// MaxInWindow is the most of the ascending times ts within any window
// of length w (half-open: [t, t+w)).
func MaxInWindow(ts []time.Time, w time.Duration) int {
	best, i := 0, 0
	for j := range ts {
		for ts[j].Sub(ts[i]) >= w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// InFlight is how many sends it is handling now; MaxInflight the most at
// once.
func (f *Fake) InFlight() int    { return f.log.InFlight() }
func (f *Fake) MaxInflight() int { return f.log.MaxInFlight() }

// WaitSends blocks until at least n sends were received or ctx ends.
func (f *Fake) WaitSends(ctx context.Context, n int) error {
	return f.log.Wait(ctx, n, "fcmfake: sends")
}

// maxBody bounds what the fake reads of a request.
const maxBody = 1 << 20

func (f *Fake) serveSend(w http.ResponseWriter, r *http.Request) {
	defer f.log.Enter()()
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	rec := Received{At: time.Now(), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	a := f.decide(r, body)
	rec.Status = cmp.Or(a.Status, http.StatusOK)
	f.log.Add(rec)
	write(w, r, a)
}

var sendPath = regexp.MustCompile(`^/v1/projects/([^/]+)/messages:send$`)

// decide is FCM's verdict on one send: auth, then the message, then a
// queued answer, then a gone token, else success.
func (f *Fake) decide(r *http.Request, body []byte) Answer {
	m := sendPath.FindStringSubmatch(r.URL.Path)
	switch {
	case m == nil:
		return Error(http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.", "")
	case r.Method != http.MethodPost:
		return Error(http.StatusMethodNotAllowed, "INVALID_ARGUMENT", "Method not allowed.", "")
	}
	project := m[1]
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	tok, known := f.tokens[bearer]
	f.mu.Unlock()
	switch {
	case !ok || !known || !time.Now().Before(tok.expires):
		return Unauthenticated()
	case tok.project != project:
		return Error(http.StatusForbidden, "PERMISSION_DENIED", "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/"+project+"' (or it may not exist).", "")
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return Error(http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. Content-Type is not application/json.", "")
	}
	token, problem := checkMessage(body)
	if problem != "" {
		return Error(http.StatusBadRequest, "INVALID_ARGUMENT", problem, "INVALID_ARGUMENT")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.answers) > 0 {
		a := f.answers[0]
		f.answers = f.answers[1:]
		return a
	}
	if f.gone[token] {
		return Unregistered()
	}
	id := make([]byte, 8)
	rand.Read(id)
	b, _ := json.Marshal(map[string]string{"name": "projects/" + project + "/messages/0:" + hex.EncodeToString(id)})
	a := Answer{Status: http.StatusOK, Body: b, Header: http.Header{"Content-Type": {"application/json; charset=UTF-8"}}}
	if f.latency != nil {
		a.Delay = f.latency()
	}
	return a
}

// sendRequest is the part of FCM's v1 Message the bridge uses; anything
// else is refused, as FCM refuses unknown fields.
type sendRequest struct {
	Message *struct {
		Token   string `json:"token"`
		Android *struct {
			Data        map[string]string `json:"data"`
			TTL         string            `json:"ttl"`
			Priority    string            `json:"priority"`
			CollapseKey string            `json:"collapse_key"`
		} `json:"android"`
	} `json:"message"`
}

var duration = regexp.MustCompile(`^[0-9]{1,12}(\.[0-9]{1,9})?s$`)

// checkMessage validates a send's body as FCM does and returns its
// registration token, or FCM's description of the problem.
func checkMessage(body []byte) (token, problem string) {
	var req sendRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "", "Invalid JSON payload received. " + err.Error()
	}
	msg := req.Message
	switch {
	case msg == nil:
		return "", "Request contains an invalid argument: no message."
	case msg.Token == "":
		return "", "Recipient of the message is not set."
	case msg.Android == nil:
		return msg.Token, ""
	}
	a := msg.Android
	if a.TTL != "" && !duration.MatchString(a.TTL) {
		return "", fmt.Sprintf("Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), Field 'ttl', Illegal duration format; %q", a.TTL)
	}
	if a.Priority != "" && a.Priority != "HIGH" && a.Priority != "NORMAL" {
		return "", fmt.Sprintf("Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), %q", a.Priority)
	}
	if d, _ := json.Marshal(a.Data); len(d) > 4096 {
		return "", "Android message is too big"
	}
	return msg.Token, ""
}

func (f *Fake) serveToken(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.tokenCalls++
	var queued *Answer
	if len(f.tokenAnswers) > 0 {
		queued = &f.tokenAnswers[0]
		f.tokenAnswers = f.tokenAnswers[1:]
	}
	f.mu.Unlock()
	if queued != nil {
		write(w, r, *queued)
		return
	}
	write(w, r, f.mint(r))
}

func oauthError(code, desc string) Answer {
	b, _ := json.Marshal(map[string]string{"error": code, "error_description": desc})
	return Answer{Status: http.StatusBadRequest, Body: b, Header: http.Header{"Content-Type": {"application/json; charset=utf-8"}}}
}

// mint checks a JWT-bearer grant (RFC 7523) as Google's endpoint does and
// issues an access token.
func (f *Fake) mint(r *http.Request) Answer {
	if r.Method != http.MethodPost {
		return Answer{Status: http.StatusMethodNotAllowed}
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		return oauthError("invalid_request", "Malformed form body.")
	}
	if g := r.PostForm.Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		return oauthError("unsupported_grant_type", "Invalid grant_type: "+g)
	}
	a, problem := f.verify(r.PostForm.Get("assertion"))
	if problem != "" {
		return oauthError("invalid_grant", problem)
	}
	b := make([]byte, 24)
	rand.Read(b)
	access := "ya29.fake-" + hex.EncodeToString(b)
	f.mu.Lock()
	life := f.lifetime
	f.tokens[access] = issued{project: a.ProjectID, expires: time.Now().Add(life)}
	f.mu.Unlock()
	body, _ := json.Marshal(map[string]any{
		"access_token": access, "token_type": "Bearer",
		"expires_in": int64((life + time.Second - 1) / time.Second),
	})
	return Answer{Status: http.StatusOK, Body: body, Header: http.Header{"Content-Type": {"application/json; charset=utf-8"}}}
}

type assertion struct {
	jwt.RegisteredClaims
	Scope string `json:"scope"`
}

// verify checks the assertion's RS256 signature with the issuer's key
// and its claims: iss a known account, aud the token URL, the FCM scope,
// and an expiry at most an hour after issue. It returns the account, or
// Google's description of the problem.
func (f *Fake) verify(s string) (*Account, string) {
	var c assertion
	var acct *Account
	_, err := jwt.ParseWithClaims(s, &c, func(t *jwt.Token) (any, error) {
		iss, _ := t.Claims.GetIssuer()
		f.mu.Lock()
		acct = f.accounts[iss]
		f.mu.Unlock()
		if acct == nil {
			return nil, errors.New("unknown issuer")
		}
		if kid, _ := t.Header["kid"].(string); kid != "" && kid != acct.PrivateKeyID {
			return nil, errors.New("unknown key id")
		}
		return acct.Key.Public().(*rsa.PublicKey), nil
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithAudience(f.TokenURL()),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(30*time.Second))
	if err != nil {
		return nil, "Invalid JWT: " + err.Error()
	}
	if c.IssuedAt == nil || c.ExpiresAt.Sub(c.IssuedAt.Time) > time.Hour {
		return nil, "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe."
	}
	if !slices.Contains(strings.Fields(c.Scope), Scope) {
		return nil, "Invalid OAuth scope or ID token audience provided."
	}
	return acct, ""
}

// write answers a after its delay (nothing if the client left first).
func write(w http.ResponseWriter, r *http.Request, a Answer) {
	if a.Delay > 0 {
		t := time.NewTimer(a.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	for k, vs := range a.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(a.Body)))
	w.WriteHeader(cmp.Or(a.Status, http.StatusOK))
	w.Write(a.Body)
}
