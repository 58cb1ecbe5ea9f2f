package appserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/loadtest/agent"
	"github.com/autopush-go/autopush/loadtest/h1"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/ledger"
)

// Settings are a worker's application server.
type Settings struct {
	Run          uint32 // run id, in every payload
	Worker       int    // the worker's index, in every payload
	SourceIPs    int    // connections from 127.0.0.2 .. 127.0.0.(1+SourceIPs)
	VAPIDPrivate string
	VAPIDSubject string
	VAPIDReuse   time.Duration // 0: a new signature per push
	FreshKeys    bool          // a new application-server key pair per push (else one per subscription)
	NetHTTP      bool          // net/http's client (else package h1's)
	PayloadSize  int
	TTL          int // seconds
	Conns        int // HTTP connections to the endpoint
	MaxInFlight  int
	Timeout      time.Duration // of one POST
	// PushReceipt, when set, is the receipt subscription every push
	// names (its Push-Receipt header).
	PushReceipt string
}

// Env is what the application server shares with its worker.
type Env struct {
	Clock    hist.Clock
	Ledger   *ledger.Ledger
	Response *hist.Recorder // scheduled send to the POST's answer
	Lag      *hist.Recorder // scheduled to actual send
	Tracef   func(format string, args ...any)
}

// Server is a worker's application server: it posts pushes to the
// subscriptions of the worker's own user agents, so one ledger sees both
// ends. The schedule is open loop: each push has a time fixed in advance,
// is sent then on its own goroutine whatever happened to the ones before,
// and its latency counts from that time. Goroutine-safe; one Run at a
// time.
type Server struct {
	cfg      Settings
	env      Env
	client   *http.Client
	signer   *pushcrypto.VAPIDSigner
	inFlight atomic.Int64
	accepted atomic.Int64
	wg       sync.WaitGroup

	encs  sync.Map // *agent.Subscription -> *pushcrypto.Encrypter (not FreshKeys)
	pools sync.Map // host -> *h1.Client (not NetHTTP): read on every push, no lock
	ttl   string

	mu       sync.Mutex
	tokens   map[string]vapidToken // by audience
	errors   map[string]int64
	srcIndex atomic.Uint32
}

type vapidToken struct {
	auth  string
	until time.Time
}

// Target choices of a Schedule.
const (
	PickRoundRobin = "round-robin" // user agent seq % n (stored: every one gets the same share)
	PickRandom     = "random"
)

// Schedule is one open-loop push phase: Count pushes, the i-th due at
// Start + i×Period (nanoseconds on the worker's Clock), to subscriptions
// picked by Pick.
type Schedule struct {
	Start  int64
	Period float64
	Count  int
	Pick   string
}

// End is when the schedule's last push would be due after the last.
func (s Schedule) End() int64 { return s.Start + int64(float64(s.Count)*s.Period) }

// New makes the application server and its HTTP client.
func New(cfg Settings, env Env) (*Server, error) {
	signer, err := pushcrypto.ParseVAPIDSigner(cfg.VAPIDPrivate, cfg.VAPIDSubject)
	if err != nil {
		return nil, fmt.Errorf("loadtest: appserver: %w", err)
	}
	s := &Server{cfg: cfg, env: env, signer: signer, tokens: map[string]vapidToken{}, errors: map[string]int64{},
		ttl: strconv.Itoa(cfg.TTL)}
	tr := &http.Transport{
		// Each connection from its own 127.0.0.x, like the user agents.
		DialContext:         s.dial,
		MaxConnsPerHost:     cfg.Conns,
		MaxIdleConnsPerHost: cfg.Conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	s.client = &http.Client{Transport: tr, Timeout: cfg.Timeout}
	return s, nil
}

// VAPIDPublic is the application server's public key, which the user
// agents register their channels with.
func (s *Server) VAPIDPublic() string { return s.signer.Public }

// Run sends sched to subs and returns once every push was answered (or
// not sent: a push due while MaxInFlight are in flight is counted as an
// error, so the schedule never waits).
func (s *Server) Run(sched Schedule, subs []*agent.Subscription) {
	clock, led := s.env.Clock, s.env.Ledger
	for i := range sched.Count {
		at := sched.Start + int64(float64(i)*sched.Period)
		if wait := at - clock.Now(); wait > int64(time.Millisecond) {
			// Go's timers are about 1ms coarse: nearer pushes go out now,
			// and their lateness counts in their latency.
			time.Sleep(time.Duration(wait))
		}
		sub := subs[pick(sched.Pick, i, len(subs))]
		seq := led.Add(sub.UA)
		if s.inFlight.Load() >= int64(s.cfg.MaxInFlight) {
			led.Answered(seq, ledger.StatusNotSent, "")
			s.count("appserver: in-flight cap")
			continue
		}
		s.inFlight.Add(1)
		s.wg.Add(1)
		go s.post(sub, seq, at)
	}
	s.wg.Wait()
}

func pick(how string, i, n int) int {
	if how == PickRandom {
		return rand.IntN(n)
	}
	return i % n
}

// post sends one push: encrypt for the subscription (RFC 8291, with the
// key pair this application server keeps for the subscription, or a
// fresh one with FreshKeys; a fresh salt each time), sign or reuse a
// VAPID JWT, POST, record.
func (s *Server) post(sub *agent.Subscription, seq uint64, at int64) {
	defer s.wg.Done()
	defer s.inFlight.Add(-1)
	clock := s.env.Clock
	status, location := ledger.StatusNoAnswer, ""
	defer func() {
		s.env.Response.Record(at, clock.Now())
		s.env.Ledger.Answered(seq, status, location)
		s.env.Tracef("ua %d push seq %d at %s answered %d %s", sub.GID, seq, clock.Wall(at), status, location)
	}()
	s.env.Lag.Record(at, clock.Now())
	id := ledger.PushID{Run: s.cfg.Run, Worker: uint32(s.cfg.Worker), UA: uint32(sub.UA), Seq: seq, At: at}
	plain := ledger.AppendPayload(make([]byte, 0, s.cfg.PayloadSize), id, s.cfg.PayloadSize)
	body, err := s.encrypt(sub, plain)
	if err != nil {
		s.count("appserver: encrypt: " + err.Error())
		return
	}
	endpoint := sub.Endpoints[int(seq)%len(sub.Endpoints)]
	auth, err := s.authorization(endpoint)
	if err != nil {
		s.count("appserver: vapid: " + err.Error())
		return
	}
	r, err := s.do(endpoint, auth, body)
	if err != nil {
		s.count("transport: " + TransportReason(err))
		return
	}
	status, location = r.Status, r.Location
	switch {
	case status == http.StatusCreated:
		s.accepted.Add(1)
	case status == http.StatusServiceUnavailable && r.RetryAfter == "":
		// A 503 tells the application server to come back later: without
		// Retry-After it cannot know when.
		s.count(StatusReason(status, r.Body) + " without Retry-After")
	default:
		s.count(StatusReason(status, r.Body))
	}
}

// do POSTs a push body to endpoint: the answer's status, Location,
// Retry-After and (the start of) its body.
func (s *Server) do(endpoint, auth string, body []byte) (h1.Response, error) {
	if s.cfg.NetHTTP {
		req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return h1.Response{}, err
		}
		req.Header.Set("TTL", s.ttl)
		req.Header.Set("Content-Encoding", "aes128gcm")
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Authorization", auth)
		if s.cfg.PushReceipt != "" {
			req.Header.Set("Push-Receipt", s.cfg.PushReceipt)
		}
		resp, err := s.client.Do(req)
		if err != nil {
			return h1.Response{}, err
		}
		defer resp.Body.Close()
		reply, _ := io.ReadAll(io.LimitReader(resp.Body, h1.MaxBody))
		return h1.Response{Status: resp.StatusCode, Location: resp.Header.Get("Location"),
			RetryAfter: resp.Header.Get("Retry-After"), Body: reply}, nil
	}
	c, path, err := s.h1For(endpoint)
	if err != nil {
		return h1.Response{}, err
	}
	hdr := []h1.Header{{Name: "TTL", Value: s.ttl}, {Name: "Content-Encoding", Value: "aes128gcm"},
		{Name: "Content-Type", Value: "application/octet-stream"}, {Name: "Authorization", Value: auth}}
	if s.cfg.PushReceipt != "" {
		hdr = append(hdr, h1.Header{Name: "Push-Receipt", Value: s.cfg.PushReceipt})
	}
	return c.Do(&h1.Request{Method: http.MethodPost, Path: path, Body: body, Header: hdr})
}

// h1For is the connection pool to endpoint's server (made at its first
// push) and endpoint's path.
func (s *Server) h1For(endpoint string) (*h1.Client, string, error) {
	rest, ok := strings.CutPrefix(endpoint, "http://")
	i := strings.IndexByte(rest, '/')
	if !ok || i <= 0 {
		return nil, "", fmt.Errorf("appserver: endpoint %q is not http://host/path", endpoint)
	}
	host, path := rest[:i], rest[i:]
	if c, ok := s.pools.Load(host); ok {
		return c.(*h1.Client), path, nil
	}
	// A pool dials lazily: one made by a racing first push and dropped
	// here costs nothing.
	c, _ := s.pools.LoadOrStore(host, h1.New(h1.Config{Host: host, Conns: s.cfg.Conns, Timeout: s.cfg.Timeout,
		Dial: func(ctx context.Context) (net.Conn, error) { return s.dial(ctx, "tcp", host) }}))
	return c.(*h1.Client), path, nil
}

// dial connects from the next of the run's 127.0.0.x, like the user
// agents.
func (s *Server) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	i := s.srcIndex.Add(1)
	d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+int(i)%s.cfg.SourceIPs))}
	return d.DialContext(ctx, network, addr)
}

// encrypt is plain's aes128gcm body for sub.
func (s *Server) encrypt(sub *agent.Subscription, plain []byte) ([]byte, error) {
	if s.cfg.FreshKeys {
		return pushcrypto.EncryptAES128GCM(plain, sub.P256dh, sub.Auth)
	}
	e, ok := s.encs.Load(sub)
	if !ok {
		enc, err := pushcrypto.NewEncrypter(sub.P256dh, sub.Auth)
		if err != nil {
			return nil, err
		}
		e, _ = s.encs.LoadOrStore(sub, enc)
	}
	return e.(*pushcrypto.Encrypter).Encrypt(plain)
}

// authorization returns the VAPID header for endpoint's origin: a fresh
// signature, or one reused for VAPIDReuse.
func (s *Server) authorization(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	aud := u.Scheme + "://" + u.Host
	reuse := s.cfg.VAPIDReuse
	now := time.Now()
	if reuse > 0 {
		s.mu.Lock()
		t, ok := s.tokens[aud]
		s.mu.Unlock()
		if ok && now.Before(t.until) {
			return t.auth, nil
		}
	}
	tok, err := s.signer.Token(aud, now.Add(12*time.Hour))
	if err != nil {
		return "", err
	}
	auth := s.signer.Authorization(tok)
	if reuse > 0 {
		s.mu.Lock()
		s.tokens[aud] = vapidToken{auth: auth, until: now.Add(reuse)}
		s.mu.Unlock()
	}
	return auth, nil
}

func (s *Server) count(key string) {
	s.mu.Lock()
	s.errors[key]++
	s.mu.Unlock()
}

// Errors are the pushes not accepted so far, by cause: HTTP status and
// errno, or transport error.
func (s *Server) Errors() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int64, len(s.errors))
	for k, v := range s.errors {
		m[k] = v
	}
	return m
}

// ErrorTotal is how many pushes were not accepted so far.
func (s *Server) ErrorTotal() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, v := range s.errors {
		n += v
	}
	return n
}

// StatusReason is how a refused push is counted: status and errno.
func StatusReason(status int, body []byte) string {
	var e struct {
		Errno int `json:"errno"`
	}
	if json.Unmarshal(body, &e) == nil && e.Errno != 0 {
		return fmt.Sprintf("HTTP %d errno %d", status, e.Errno)
	}
	return fmt.Sprintf("HTTP %d", status)
}

// TransportReason names a failed request by its cause: a timeout, an
// errno, or the error without the request's URL (one key per cause, not
// per endpoint).
func TransportReason(err error) string {
	var ne net.Error
	var en unix.Errno
	var ue *url.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &en):
		return unix.ErrnoName(en)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.As(err, &ue):
		return ue.Err.Error()
	}
	return err.Error()
}

// Accepted is how many pushes were answered 201 so far.
func (s *Server) Accepted() int64 { return s.accepted.Load() }
