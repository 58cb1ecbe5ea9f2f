package apitier

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/hertz/pkg/common/ut"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// testEndpointURL is the public URL both tiers are configured with in
// tests (enginetest.Config uses the same); requests go to the real
// listener, VAPID tokens name this origin.
const testEndpointURL = "http://127.0.0.1:8082"

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.CryptoKey = et.TestKey
	cfg.NodeSecret = et.TestSecret
	cfg.EndpointURL = testEndpointURL
	cfg.VersionFile = ""
	cfg.RequestLog = false
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.MetricsListen = "127.0.0.1:0"
	return cfg
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	// Hertz's process-wide logger may write after the test that set it
	// ended; t.Log would panic then.
	defer func() { recover() }()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// newStore opens an embedded store in a temporary directory.
func newStore(t testing.TB) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newServer makes a node without starting it (for ut requests).
func newServer(t testing.TB, store storage.Store, mutate func(*Config)) *Server {
	t.Helper()
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg, store, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.nodes.CloseIdle)
	return s
}

// startServer runs a node on 127.0.0.1:0 until the test ends.
func startServer(t testing.TB, store storage.Store, mutate func(*Config)) *Server {
	t.Helper()
	s := newServer(t, store, mutate)
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}

// sub is a subscription made directly in storage.
type sub struct {
	uaid, chid uuid.UUID
	endpoint   string // full URL (on testEndpointURL)
	path       string // its path
}

// subscribe writes a router record (webpush, on node when not "") with
// one channel and returns its endpoint; vapidKey makes it v2.
func subscribe(t testing.TB, s *Server, node string, vapidKey []byte) sub {
	t.Helper()
	ctx := context.Background()
	u := sub{uaid: uuid.New(), chid: uuid.New()}
	et.Must(t, s.store.Connect(ctx, storage.User{UAID: u.uaid, RouterType: storage.RouterWebPush, NodeID: node,
		ConnectedAt: time.Now().UnixMilli()}), "connect")
	et.Must(t, s.store.AddChannel(ctx, u.uaid, u.chid), "add channel")
	ep, err := s.keys.MakeEndpoint(s.cfg.EndpointURL, u.uaid, u.chid, vapidKey)
	et.Must(t, err, "make endpoint")
	u.endpoint = ep
	pu, err := url.Parse(ep)
	et.Must(t, err, "parse endpoint")
	u.path = pu.Path
	return u
}

// hdr builds ut headers from name, value pairs.
func hdr(kv ...string) []ut.Header {
	var h []ut.Header
	for i := 0; i+1 < len(kv); i += 2 {
		h = append(h, ut.Header{Key: kv[i], Value: kv[i+1]})
	}
	return h
}

// response is what a test looks at.
type response struct {
	code   int
	header http.Header
	body   []byte
}

// answer is r as apitiertest checks it.
func (r response) answer() apitiertest.Answer {
	return apitiertest.Answer{Status: r.code, Header: r.header, Body: r.body}
}

// perform runs one request through the handlers without a network.
func perform(s *Server, method, path string, body []byte, headers ...ut.Header) response {
	h := s.newHertz()
	var b *ut.Body
	if body != nil {
		b = &ut.Body{Body: bytes.NewReader(body), Len: len(body)}
	}
	rec := ut.PerformRequest(h.Engine, method, path, b, headers...)
	res := rec.Result()
	out := response{code: res.StatusCode(), header: http.Header{}, body: append([]byte(nil), res.Body()...)}
	res.Header.VisitAll(func(k, v []byte) { out.header.Add(string(k), string(v)) })
	return out
}

// send makes a real request to a started node.
func send(t testing.TB, s *Server, method, path string, body []byte, kv ...string) response {
	t.Helper()
	a := apitiertest.Send(t, method, "http://"+s.Addr()+path, body, kv...)
	return response{code: a.Status, header: a.Header, body: a.Body}
}

// wantError checks an error answer: status, errno (0 for null) and the
// body format.
func wantError(t testing.TB, r response, code int, wantErrno errno.Code) map[string]any {
	t.Helper()
	return apitiertest.WantError(t, r.answer(), code, wantErrno)
}

// wantCreated checks a 201 and returns the message id of its Location.
func wantCreated(t testing.TB, s *Server, r response, ttl string) string {
	t.Helper()
	return apitiertest.WantCreated(t, r.answer(), s.cfg.EndpointURL, ttl)
}

// stored returns every stored message of uaid.
func stored(t testing.TB, s *Server, uaid uuid.UUID) []storage.Message {
	t.Helper()
	return apitiertest.Stored(t, s.store, uaid)
}

// vapidKey is an application server's key pair.
type vapidKey struct {
	priv *ecdsa.PrivateKey
	pub  []byte // raw 65-byte point
	b64  string // base64url, unpadded
}

func newVAPIDKey(t testing.TB) vapidKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	et.Must(t, err, "generate key")
	pub, err := priv.PublicKey.Bytes()
	et.Must(t, err, "public key")
	return vapidKey{priv: priv, pub: pub, b64: base64.RawURLEncoding.EncodeToString(pub)}
}

// jwt signs an ES256 token with claims (marshalled as JSON).
func (k vapidKey) jwt(t testing.TB, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))
	body, err := json.Marshal(claims)
	et.Must(t, err, "claims")
	signing := head + "." + enc.EncodeToString(body)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, digest[:])
	et.Must(t, err, "sign")
	var sig [64]byte
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig[:])
}

// auth is an RFC 8292 Authorization header for aud, valid for an hour.
func (k vapidKey) auth(t testing.TB, aud string) string {
	t.Helper()
	tok := k.jwt(t, map[string]any{"aud": aud, "exp": time.Now().Add(time.Hour).Unix(), "sub": "mailto:ops@example.com"})
	return "vapid t=" + tok + ", k=" + k.b64
}

// aes128gcm is a stand-in encrypted body and its header.
var aes128gcm = []string{"Content-Encoding", "aes128gcm"}

func kv(base []string, more ...string) []string {
	return append(append([]string(nil), base...), more...)
}
