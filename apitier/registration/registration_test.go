package registration_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/apitier/registration"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/bridgeauth"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// The registration API's tests run it on a real endpoint node
// (apitier.Server on 127.0.0.1:0), over real HTTP.

const (
	regKey1 = "first-bridge-auth-key-0123456789"
	regKey2 = "second-bridge-auth-key-0123456789"
	// testEndpointURL is the public URL the node mints endpoints under;
	// requests go to its real listener.
	testEndpointURL = "http://127.0.0.1:8082"
	// maxBridgeToken is the longest bridge token accepted.
	maxBridgeToken = 256
)

// mapApps is an Apps over "type/app" keys.
type mapApps map[string]bool

func (m mapApps) Known(routerType, appID string) bool { return m[routerType+"/"+appID] }

var testApps = mapApps{"fcm/fcm-app": true, "gcm/gcm-app": true, "apns/firefox": true}

var _ registration.Apps = testApps

// countingStore counts the writes a request makes and can fail Connect.
type countingStore struct {
	storage.Store
	mu          sync.Mutex
	writes      int
	failConnect error
	removed     []uuid.UUID // channels removed
}

func (c *countingStore) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.writes }

func (c *countingStore) Connect(ctx context.Context, u storage.User) error {
	c.mu.Lock()
	c.writes++
	fail := c.failConnect
	c.mu.Unlock()
	if fail != nil {
		return fail
	}
	return c.Store.Connect(ctx, u)
}

func (c *countingStore) AddChannel(ctx context.Context, uaid, chid uuid.UUID) error {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Store.AddChannel(ctx, uaid, chid)
}

func (c *countingStore) RemoveChannel(ctx context.Context, uaid, chid uuid.UUID) error {
	c.mu.Lock()
	c.writes++
	c.removed = append(c.removed, chid)
	c.mu.Unlock()
	return c.Store.RemoveChannel(ctx, uaid, chid)
}

func (c *countingStore) DropUser(ctx context.Context, uaid uuid.UUID) error {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Store.DropUser(ctx, uaid)
}

// node is an endpoint node serving the registration API, with its store
// and its keys.
type node struct {
	*apitier.Server
	t     *testing.T
	store storage.Store
	keys  *token.Keys
}

func newStore(t *testing.T) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startNode runs a node over store, configured as mutate says, until the
// test ends.
func startNode(t *testing.T, store storage.Store, mutate func(*apitier.Config)) *node {
	t.Helper()
	cfg := apitier.DefaultConfig()
	cfg.Listen, cfg.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.CryptoKey, cfg.NodeSecret, cfg.EndpointURL = et.TestKey, et.TestSecret, testEndpointURL
	cfg.VersionFile, cfg.RequestLog, cfg.ShutdownTimeout = "", false, 5*time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := apitier.New(cfg, store, quiet())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	keys, err := token.ParseKeys(et.TestKey)
	if err != nil {
		t.Fatal(err)
	}
	return &node{Server: srv, t: t, store: store, keys: keys}
}

// regServer is a node with two bridge auth keys and testApps.
func regServer(t *testing.T) (*node, *countingStore) {
	t.Helper()
	cs := &countingStore{Store: newStore(t)}
	s := startNode(t, cs, func(c *apitier.Config) { c.BridgeAuthKeys = []string{regKey1, regKey2} })
	s.SetBridgeApps(testApps)
	return s, cs
}

// response is what a test looks at.
type response struct {
	code   int
	header http.Header
	body   []byte
}

// perform makes one request to the node; kv are header name, value
// pairs.
func perform(s *node, method, path string, body []byte, kv ...string) response {
	s.t.Helper()
	a := apitiertest.Send(s.t, method, "http://"+s.Addr()+path, body, kv...)
	return response{code: a.Status, header: a.Header, body: a.Body}
}

// hdr is header name, value pairs.
func hdr(kv ...string) []string { return kv }

// wantError checks an error answer: status, errno (0 for null) and the
// body format.
func wantError(t testing.TB, r response, code int, wantErrno errno.Code) map[string]any {
	t.Helper()
	return apitiertest.WantError(t, apitiertest.Answer{Status: r.code, Header: r.header, Body: r.body}, code, wantErrno)
}

// vapidKey is an application server's key pair.
type vapidKey struct {
	pub []byte // raw 65-byte point
	b64 string // base64url, unpadded
}

func newVAPIDKey(t testing.TB) vapidKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := priv.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return vapidKey{pub: pub, b64: base64.RawURLEncoding.EncodeToString(pub)}
}

// registered is a POST registration answer.
type registered struct {
	UAID      string `json:"uaid"`
	ChannelID string `json:"channelID"`
	Endpoint  string `json:"endpoint"`
	Secret    string `json:"secret"`
}

func register(t *testing.T, s *node, typ, app, body string) registered {
	t.Helper()
	r := perform(s, http.MethodPost, "/v1/"+typ+"/"+app+"/registration", []byte(body), hdr("Content-Type", "application/json")...)
	if r.code != http.StatusOK {
		t.Fatalf("register %s/%s: %d %s", typ, app, r.code, r.body)
	}
	var reg registered
	if err := json.Unmarshal(r.body, &reg); err != nil {
		t.Fatalf("register answer %s: %v", r.body, err)
	}
	return reg
}

func bearer(secret string) []string { return []string{"Authorization", "Bearer " + secret} }

// regCall performs a call under /v1/{typ}/{app}/registration/{uaid}.
func regCall(s *node, method, typ, app, uaid, rest string, body []byte, kv ...string) response {
	return perform(s, method, "/v1/"+typ+"/"+app+"/registration/"+uaid+rest, body, kv...)
}

// endpointOf decrypts an endpoint URL made with the test key.
func endpointOf(t *testing.T, s *node, ep string) token.Endpoint {
	t.Helper()
	root := strings.TrimRight(testEndpointURL, "/") + "/wpush/"
	version, tok, ok := strings.Cut(strings.TrimPrefix(ep, root), "/")
	if !strings.HasPrefix(ep, root) || !ok {
		t.Fatalf("endpoint %q is not under %s{version}/", ep, root)
	}
	e, err := s.keys.ParseToken(version, tok)
	if err != nil {
		t.Fatalf("endpoint %q: %v", ep, err)
	}
	return e
}

func TestRegisterFCM(t *testing.T) {
	s, _ := regServer(t)
	reg := register(t, s, "fcm", "fcm-app", `{"token":"fcm-token-0123"}`)
	uaid, err := uuid.Parse(reg.UAID)
	if err != nil || reg.UAID != uaid.String() {
		t.Fatalf("uaid %q is not a dashed UUID", reg.UAID)
	}
	chid, err := uuid.Parse(reg.ChannelID)
	if err != nil || reg.ChannelID != chid.String() {
		t.Fatalf("channelID %q is not a dashed UUID", reg.ChannelID)
	}
	if want := bridgeauth.Secret(regKey1, uaid); reg.Secret != want {
		t.Errorf("secret %q, want the first key's %q", reg.Secret, want)
	}
	ep := endpointOf(t, s, reg.Endpoint)
	if ep.Version != 1 || ep.UAID != uaid || ep.CHID != chid {
		t.Errorf("endpoint carries v%d %x/%x, want v1 %s/%s", ep.Version, ep.UAID, ep.CHID, uaid, chid)
	}
	u, err := s.store.GetUser(context.Background(), uaid)
	if err != nil {
		t.Fatal(err)
	}
	if u.RouterType != "fcm" || len(u.RouterData) != 2 || u.RouterData["token"] != "fcm-token-0123" || u.RouterData["app_id"] != "fcm-app" || u.NodeID != "" {
		t.Errorf("stored %+v, want fcm {token, app_id} without a node", u)
	}
	chids, err := s.store.Channels(context.Background(), uaid)
	if err != nil || len(chids) != 1 || chids[0] != chid {
		t.Errorf("channels %v (%v), want [%s]", chids, err, chid)
	}
}

func TestRegisterTypes(t *testing.T) {
	s, _ := regServer(t)
	ctx := context.Background()
	reg := register(t, s, "gcm", "gcm-app", `{"token":"gcm-token-0123"}`)
	u, _ := s.store.GetUser(ctx, uuid.MustParse(reg.UAID))
	if u.RouterType != "gcm" || u.RouterData["token"] != "gcm-token-0123" || u.RouterData["app_id"] != "gcm-app" {
		t.Errorf("gcm stored %+v, want gcm {token, app_id}", u)
	}
	reg = register(t, s, "apns", "firefox", `{"token":"0123456789abcdef","aps":"{\"mutable-content\":1}","extra":[1,2]}`)
	u, _ = s.store.GetUser(ctx, uuid.MustParse(reg.UAID))
	if u.RouterType != "apns" || u.RouterData["token"] != "0123456789abcdef" || u.RouterData["rel_channel"] != "firefox" ||
		u.RouterData["aps"] != `{"mutable-content":1}` {
		t.Errorf("apns stored %+v, want apns {token, rel_channel, aps}", u)
	}
	// webpush takes any app id and token, and keeps no router data; it
	// needs no bridge configured.
	s.SetBridgeApps(nil)
	reg = register(t, s, "webpush", "anything", `{"token":"x"}`)
	u, _ = s.store.GetUser(ctx, uuid.MustParse(reg.UAID))
	if u.RouterType != storage.RouterWebPush || len(u.RouterData) != 0 {
		t.Errorf("webpush stored %+v, want webpush without router data", u)
	}
	// Without bridge apps no bridge app id is known.
	r := perform(s, http.MethodPost, "/v1/fcm/fcm-app/registration", []byte(`{"token":"fcm-token-0123"}`))
	wantError(t, r, 400, errno.None)
}

func TestRegisterChannelAndKey(t *testing.T) {
	s, _ := regServer(t)
	key := newVAPIDKey(t)
	chid := uuid.New()
	reg := register(t, s, "fcm", "fcm-app", `{"token":"fcm-token-0123","channelID":"`+strings.ToUpper(chid.String())+`","key":"`+key.b64+`"}`)
	if reg.ChannelID != chid.String() {
		t.Errorf("channelID %q, want %q (lower case)", reg.ChannelID, chid)
	}
	ep := endpointOf(t, s, reg.Endpoint)
	if ep.Version != 2 || !ep.MatchesVAPIDKey(key.pub) || ep.MatchesVAPIDKey(newVAPIDKey(t).pub) {
		t.Errorf("endpoint v%d is not bound to the key", ep.Version)
	}
	if uuid.UUID(ep.CHID) != chid {
		t.Errorf("endpoint channel %x, want %s", ep.CHID, chid)
	}
}

func TestRegisterRefusals(t *testing.T) {
	s, cs := regServer(t)
	long := strings.Repeat("t", maxBridgeToken+1)
	cases := []struct {
		name, path, body string
		code             int
		errno            errno.Code
	}{
		{"unknown type", "/v1/adm/fcm-app/registration", `{"token":"fcm-token-0123"}`, 400, errno.InvalidRouterType},
		{"unknown app id", "/v1/fcm/other/registration", `{"token":"fcm-token-0123"}`, 400, errno.None},
		{"another bridge's app id", "/v1/apns/fcm-app/registration", `{"token":"fcm-token-0123"}`, 400, errno.None},
		{"short token", "/v1/fcm/fcm-app/registration", `{"token":"short"}`, 400, errno.None},
		{"token with a space", "/v1/fcm/fcm-app/registration", `{"token":"fcm token 0123"}`, 400, errno.None},
		{"token with a newline", "/v1/apns/firefox/registration", `{"token":"fcm\ntoken0123"}`, 400, errno.None},
		{"non-ASCII token", "/v1/fcm/fcm-app/registration", `{"token":"tökentökentöken"}`, 400, errno.None},
		{"long token", "/v1/fcm/fcm-app/registration", `{"token":"` + long + `"}`, 400, errno.None},
		{"no token", "/v1/fcm/fcm-app/registration", `{"channelID":"` + uuid.NewString() + `"}`, 400, errno.None},
		{"token not a string", "/v1/fcm/fcm-app/registration", `{"token":12345678}`, 400, errno.None},
		{"bad JSON", "/v1/fcm/fcm-app/registration", `{"token":`, 400, errno.None},
		{"not an object", "/v1/fcm/fcm-app/registration", `["fcm-token-0123"]`, 400, errno.None},
		{"two values", "/v1/fcm/fcm-app/registration", `{"token":"fcm-token-0123"}{}`, 400, errno.None},
		{"empty body", "/v1/fcm/fcm-app/registration", ``, 400, errno.None},
		{"bad channelID", "/v1/fcm/fcm-app/registration", `{"token":"fcm-token-0123","channelID":"nope"}`, 400, errno.None},
		{"nil channelID", "/v1/fcm/fcm-app/registration", `{"token":"fcm-token-0123","channelID":"` + uuid.Nil.String() + `"}`, 400, errno.None},
		{"bad key", "/v1/fcm/fcm-app/registration", `{"token":"fcm-token-0123","key":"AAAA"}`, 400, errno.None},
		{"bad aps", "/v1/apns/firefox/registration", `{"token":"0123456789abcdef","aps":"[1]"}`, 400, errno.None},
		{"aps not JSON", "/v1/apns/firefox/registration", `{"token":"0123456789abcdef","aps":"{"}`, 400, errno.None},
		{"aps title not a string", "/v1/apns/firefox/registration", `{"token":"0123456789abcdef","aps":"{\"title\":5}"}`, 400, errno.None},
		{"aps badge negative", "/v1/apns/firefox/registration", `{"token":"0123456789abcdef","aps":"{\"badge\":-1}"}`, 400, errno.None},
		{"oversized body", "/v1/fcm/fcm-app/registration", `{"token":"fcm-token-0123","pad":"` + strings.Repeat("x", registration.MaxBody) + `"}`, 413, errno.PayloadTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := perform(s, http.MethodPost, c.path, []byte(c.body))
			m := wantError(t, r, c.code, c.errno)
			if msg, _ := m["message"].(string); msg == "" {
				t.Errorf("no message in %s", r.body)
			}
		})
	}
	if n := cs.count(); n != 0 {
		t.Errorf("refused registrations made %d storage writes", n)
	}
}

// A registration whose router record cannot be written leaves no channel.
func TestRegisterFailureCleansUp(t *testing.T) {
	s, cs := regServer(t)
	cs.failConnect = errors.Join(storage.ErrUnavailable, errors.New("down"))
	chid := uuid.New()
	r := perform(s, http.MethodPost, "/v1/fcm/fcm-app/registration", []byte(`{"token":"fcm-token-0123","channelID":"`+chid.String()+`"}`))
	wantError(t, r, http.StatusServiceUnavailable, errno.RetryBackoff)
	if len(cs.removed) != 1 || cs.removed[0] != chid {
		t.Fatalf("removed channels %v, want [%s]", cs.removed, chid)
	}
}

func TestRegistrationClosedWithoutKeys(t *testing.T) {
	s := startNode(t, newStore(t), nil)
	s.SetBridgeApps(testApps)
	r := perform(s, http.MethodPost, "/v1/fcm/fcm-app/registration", []byte(`{"token":"fcm-token-0123"}`))
	wantError(t, r, 401, errno.InvalidAuth)
	uaid := uuid.New()
	r = regCall(s, http.MethodGet, "fcm", "fcm-app", uaid.String(), "", nil, bearer(bridgeauth.Secret(regKey1, uaid))...)
	wantError(t, r, 401, errno.InvalidAuth)
	if got := metricValue(t, s, `autoendpoint_bridge_auth_failures_total{reason="closed"}`); got != "2" {
		t.Errorf("closed refusals counted %s, want 2", got)
	}
}

func TestRegistrationAuth(t *testing.T) {
	s, _ := regServer(t)
	reg := register(t, s, "fcm", "fcm-app", `{"token":"fcm-token-0123"}`)
	uaid := uuid.MustParse(reg.UAID)
	other := uuid.New()
	cases := []struct {
		name   string
		uaid   string
		header []string
		code   int
		errno  errno.Code
	}{
		{"no Authorization", reg.UAID, nil, 401, errno.InvalidAuth},
		{"another scheme", reg.UAID, []string{"Authorization", "Basic " + reg.Secret}, 401, errno.InvalidAuth},
		{"wrong secret", reg.UAID, bearer(strings.Repeat("0", 64)), 401, errno.InvalidAuth},
		{"another uaid's secret", reg.UAID, bearer(bridgeauth.Secret(regKey1, other)), 401, errno.InvalidAuth},
		{"an unknown key's secret", reg.UAID, bearer(bridgeauth.Secret("not-a-configured-key", uaid)), 401, errno.InvalidAuth},
		{"first key", reg.UAID, bearer(reg.Secret), 200, 0},
		{"second key", reg.UAID, bearer(bridgeauth.Secret(regKey2, uaid)), 200, 0},
		{"WebPush scheme", reg.UAID, []string{"Authorization", "webpush " + reg.Secret}, 200, 0},
		{"undashed uaid", strings.ReplaceAll(reg.UAID, "-", ""), bearer(reg.Secret), 200, 0},
		{"uaid not a UUID", "nope", bearer(reg.Secret), 410, errno.ExpiredEndpoint},
		{"unknown uaid", other.String(), bearer(bridgeauth.Secret(regKey1, other)), 410, errno.ExpiredEndpoint},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := regCall(s, http.MethodGet, "fcm", "fcm-app", c.uaid, "", nil, c.header...)
			if c.code == 200 {
				if r.code != 200 {
					t.Fatalf("%d %s, want 200", r.code, r.body)
				}
				return
			}
			wantError(t, r, c.code, c.errno)
			if c.code == 401 && r.header.Get("WWW-Authenticate") != `Bearer realm="registration"` {
				t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
			}
		})
	}
	if got := metricValue(t, s, `autoendpoint_bridge_auth_failures_total{reason="missing"}`); got != "2" {
		t.Errorf("missing-secret refusals counted %s, want 2", got)
	}
	if got := metricValue(t, s, `autoendpoint_bridge_auth_failures_total{reason="invalid"}`); got != "3" {
		t.Errorf("invalid-secret refusals counted %s, want 3", got)
	}
	// Every route under {uaid} checks the secret.
	for _, rc := range []struct{ method, rest string }{
		{http.MethodPut, ""}, {http.MethodGet, "/"}, {http.MethodDelete, ""},
		{http.MethodPost, "/subscription"}, {http.MethodDelete, "/subscription/" + reg.ChannelID},
	} {
		r := regCall(s, rc.method, "fcm", "fcm-app", reg.UAID, rc.rest, []byte(`{"token":"fcm-token-4567"}`), bearer(strings.Repeat("0", 64))...)
		wantError(t, r, 401, errno.InvalidAuth)
	}
	if _, err := s.store.GetUser(context.Background(), uaid); err != nil {
		t.Fatalf("refused calls touched the user: %v", err)
	}
}

func TestRegistrationTypeChecks(t *testing.T) {
	s, _ := regServer(t)
	reg := register(t, s, "fcm", "fcm-app", `{"token":"fcm-token-0123"}`)
	auth := bearer(reg.Secret)
	wantError(t, regCall(s, http.MethodGet, "adm", "fcm-app", reg.UAID, "", nil, auth...), 400, errno.InvalidRouterType)
	// The type is checked first: before the secret and the uaid.
	wantError(t, regCall(s, http.MethodGet, "adm", "fcm-app", "nope", "", nil), 400, errno.InvalidRouterType)
	// A missing secret before a bad uaid.
	wantError(t, regCall(s, http.MethodGet, "fcm", "fcm-app", "nope", "", nil), 401, errno.InvalidAuth)
	wantError(t, regCall(s, http.MethodGet, "apns", "firefox", reg.UAID, "", nil, auth...), 400, errno.InvalidRouterType)
	wantError(t, regCall(s, http.MethodDelete, "webpush", "x", reg.UAID, "", nil, auth...), 400, errno.InvalidRouterType)
	if r := regCall(s, http.MethodGet, "gcm", "gcm-app", reg.UAID, "", nil, auth...); r.code != 200 {
		t.Errorf("gcm path for an fcm record: %d %s, want 200 (one bridge)", r.code, r.body)
	}
	if _, err := s.store.GetUser(context.Background(), uuid.MustParse(reg.UAID)); err != nil {
		t.Fatalf("the record is gone after refused calls: %v", err)
	}
}

func TestRegistrationGet(t *testing.T) {
	s, _ := regServer(t)
	reg := register(t, s, "apns", "firefox", `{"token":"0123456789abcdef"}`)
	for _, rest := range []string{"", "/"} {
		r := regCall(s, http.MethodGet, "apns", "firefox", reg.UAID, rest, nil, bearer(reg.Secret)...)
		var got struct {
			UAID       string   `json:"uaid"`
			ChannelIDs []string `json:"channelIDs"`
		}
		if r.code != 200 || json.Unmarshal(r.body, &got) != nil {
			t.Fatalf("GET%s: %d %s", rest, r.code, r.body)
		}
		if got.UAID != reg.UAID || len(got.ChannelIDs) != 1 || got.ChannelIDs[0] != reg.ChannelID {
			t.Errorf("GET%s: %s, want uaid %s and [%s]", rest, r.body, reg.UAID, reg.ChannelID)
		}
	}
	// No channels: an empty list, not null.
	wantOK(t, regCall(s, http.MethodDelete, "apns", "firefox", reg.UAID, "/subscription/"+reg.ChannelID, nil, bearer(reg.Secret)...), "{}")
	r := regCall(s, http.MethodGet, "apns", "firefox", reg.UAID, "", nil, bearer(reg.Secret)...)
	if r.code != 200 || !bytes.Contains(r.body, []byte(`"channelIDs":[]`)) {
		t.Errorf("GET without channels: %d %s", r.code, r.body)
	}
}

func wantOK(t *testing.T, r response, body string) {
	t.Helper()
	if r.code != 200 || string(r.body) != body || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q (%s), want 200 %q", r.code, r.body, r.header.Get("Content-Type"), body)
	}
}

func TestRegistrationUpdate(t *testing.T) {
	s, cs := regServer(t)
	ctx := context.Background()
	reg := register(t, s, "gcm", "gcm-app", `{"token":"gcm-token-0123"}`)
	uaid := uuid.MustParse(reg.UAID)
	auth := bearer(reg.Secret)
	before := cs.count()
	wantError(t, regCall(s, http.MethodPut, "gcm", "gcm-app", reg.UAID, "", []byte(`{"token":"bad token"}`), auth...), 400, errno.None)
	wantError(t, regCall(s, http.MethodPut, "gcm", "gcm-app", reg.UAID, "", []byte(`{"token":`), auth...), 400, errno.None)
	wantError(t, regCall(s, http.MethodPut, "gcm", "other", reg.UAID, "", []byte(`{"token":"gcm-token-4567"}`), auth...), 400, errno.None)
	if n := cs.count(); n != before {
		t.Errorf("refused updates made %d writes", n-before)
	}
	u, _ := s.store.GetUser(ctx, uaid)
	if u.RouterData["token"] != "gcm-token-0123" {
		t.Fatalf("a refused update changed the token: %+v", u)
	}
	wantOK(t, regCall(s, http.MethodPut, "gcm", "gcm-app", reg.UAID, "", []byte(`{"token":"gcm-token-4567"}`), auth...), "{}")
	u, _ = s.store.GetUser(ctx, uaid)
	if u.RouterType != "gcm" || u.RouterData["token"] != "gcm-token-4567" || u.RouterData["app_id"] != "gcm-app" {
		t.Errorf("after PUT: %+v", u)
	}
	// Through the fcm path the record becomes fcm, as the reference
	// stores the path's type.
	wantOK(t, regCall(s, http.MethodPut, "fcm", "fcm-app", reg.UAID, "", []byte(`{"token":"fcm-token-89ab"}`), auth...), "{}")
	u, _ = s.store.GetUser(ctx, uaid)
	if u.RouterType != "fcm" || u.RouterData["token"] != "fcm-token-89ab" || u.RouterData["app_id"] != "fcm-app" {
		t.Errorf("after PUT through fcm: %+v", u)
	}
	if chids, _ := s.store.Channels(ctx, uaid); len(chids) != 1 {
		t.Errorf("channels after PUT: %v", chids)
	}
}

func TestRegistrationDelete(t *testing.T) {
	s, _ := regServer(t)
	ctx := context.Background()
	reg := register(t, s, "fcm", "fcm-app", `{"token":"fcm-token-0123"}`)
	uaid := uuid.MustParse(reg.UAID)
	wantOK(t, regCall(s, http.MethodDelete, "fcm", "fcm-app", reg.UAID, "", nil, bearer(reg.Secret)...), "{}")
	if _, err := s.store.GetUser(ctx, uaid); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("user after DELETE: %v, want not found", err)
	}
	if chids, _ := s.store.Channels(ctx, uaid); len(chids) != 0 {
		t.Errorf("channels after DELETE: %v", chids)
	}
	wantError(t, regCall(s, http.MethodDelete, "fcm", "fcm-app", reg.UAID, "", nil, bearer(reg.Secret)...), 410, errno.ExpiredEndpoint)
}

func TestRegistrationSubscriptions(t *testing.T) {
	s, cs := regServer(t)
	ctx := context.Background()
	reg := register(t, s, "fcm", "fcm-app", `{"token":"fcm-token-0123"}`)
	uaid := uuid.MustParse(reg.UAID)
	auth := bearer(reg.Secret)
	type subAnswer struct {
		ChannelID string `json:"channelID"`
		Endpoint  string `json:"endpoint"`
	}
	subscribeWith := func(body []byte) subAnswer {
		t.Helper()
		r := regCall(s, http.MethodPost, "fcm", "fcm-app", reg.UAID, "/subscription", body, auth...)
		var a subAnswer
		if r.code != 200 || json.Unmarshal(r.body, &a) != nil {
			t.Fatalf("subscribe %s: %d %s", body, r.code, r.body)
		}
		return a
	}
	a := subscribeWith(nil) // no body: a new channel
	ep := endpointOf(t, s, a.Endpoint)
	if ep.Version != 1 || uuid.UUID(ep.UAID) != uaid || uuid.UUID(ep.CHID).String() != a.ChannelID {
		t.Errorf("endpoint %+v for channel %s", ep, a.ChannelID)
	}
	key := newVAPIDKey(t)
	chid := uuid.New()
	b := subscribeWith([]byte(`{"channelID":"` + chid.String() + `","key":"` + key.b64 + `"}`))
	if b.ChannelID != chid.String() {
		t.Errorf("channelID %s, want %s", b.ChannelID, chid)
	}
	if ep := endpointOf(t, s, b.Endpoint); ep.Version != 2 || !ep.MatchesVAPIDKey(key.pub) {
		t.Errorf("keyed subscription: endpoint v%d, not bound to the key", ep.Version)
	}
	chids, _ := s.store.Channels(ctx, uaid)
	if len(chids) != 3 {
		t.Errorf("channels %v, want 3", chids)
	}

	before := cs.count()
	// null is not an object, though encoding/json decodes it into a
	// struct as one with no members (it was answered 200).
	for _, body := range []string{`{`, `{"channelID":"nope"}`, `{"key":"nope"}`, `[]`, `{"channelID":1}`, `null`, ` null `, `"x"`} {
		r := regCall(s, http.MethodPost, "fcm", "fcm-app", reg.UAID, "/subscription", []byte(body), auth...)
		wantError(t, r, 400, errno.None)
	}
	big := []byte(`{"x":"` + strings.Repeat("x", registration.MaxBody) + `"}`)
	wantError(t, regCall(s, http.MethodPost, "fcm", "fcm-app", reg.UAID, "/subscription", big, auth...), 413, errno.PayloadTooLarge)
	if n := cs.count(); n != before {
		t.Errorf("refused subscriptions made %d writes", n-before)
	}

	unsub := func(chid string) response {
		return regCall(s, http.MethodDelete, "fcm", "fcm-app", reg.UAID, "/subscription/"+chid, nil, auth...)
	}
	wantOK(t, unsub(chid.String()), "{}")
	if ok, _ := s.store.HasChannel(ctx, uaid, chid); ok {
		t.Error("channel still subscribed after DELETE")
	}
	wantError(t, unsub(chid.String()), 410, errno.InvalidSubscription)
	wantError(t, unsub("nope"), 410, errno.InvalidSubscription)
	wantError(t, unsub(uuid.NewString()), 410, errno.InvalidSubscription)
}

// bridge-max-channels: a subscription past the limit is 429 and writes
// nothing; re-subscribing a channel the registration has still works,
// and unsubscribing makes room again.
func TestRegistrationChannelLimit(t *testing.T) {
	cs := &countingStore{Store: newStore(t)}
	s := startNode(t, cs, func(c *apitier.Config) { c.BridgeAuthKeys = []string{regKey1}; c.BridgeMaxChannels = 3 })
	s.SetBridgeApps(testApps)
	reg := register(t, s, "fcm", "fcm-app", `{"token":"fcm-token-0123"}`) // channel 1
	auth := bearer(reg.Secret)
	subscribe := func(body string) response {
		return regCall(s, http.MethodPost, "fcm", "fcm-app", reg.UAID, "/subscription", []byte(body), auth...)
	}
	ok := func(r response) {
		t.Helper()
		if r.code != http.StatusOK {
			t.Fatalf("subscribe: %d %s", r.code, r.body)
		}
	}
	second := uuid.NewString()
	ok(subscribe(`{"channelID":"` + second + `"}`))
	ok(subscribe("")) // channel 3: at the limit
	before := cs.count()
	e := wantError(t, subscribe(""), 429, errno.None)
	if msg, _ := e["message"].(string); !strings.Contains(msg, "bridge-max-channels") {
		t.Errorf("429 message %q does not name the setting", msg)
	}
	wantError(t, subscribe(`{"channelID":"`+uuid.NewString()+`"}`), 429, errno.None)
	if n := cs.count(); n != before {
		t.Errorf("refused subscriptions made %d writes", n-before)
	}
	if chids, _ := s.store.Channels(context.Background(), uuid.MustParse(reg.UAID)); len(chids) != 3 {
		t.Errorf("%d channels after the refusals, want 3", len(chids))
	}
	ok(subscribe(`{"channelID":"` + second + `"}`)) // one it has
	wantOK(t, regCall(s, http.MethodDelete, "fcm", "fcm-app", reg.UAID, "/subscription/"+second, nil, auth...), "{}")
	ok(subscribe(""))
	if got := metricValue(t, s, `autoendpoint_errors_total{errno="none"}`); got != "2" {
		t.Errorf("errors_total{errno=none} = %s, want 2", got)
	}
}

// A registration's endpoint is a push endpoint: on a node without the
// bridges' sender its push is refused for a retry (503 errno 201), never
// 404 or 410 that would make the application server drop it.
func TestPushToBridgedUserWithoutSender(t *testing.T) {
	s, _ := regServer(t)
	reg := register(t, s, "fcm", "fcm-app", `{"token":"fcm-token-0123"}`)
	path := strings.TrimPrefix(reg.Endpoint, testEndpointURL)
	r := perform(s, http.MethodPost, path, nil, hdr("TTL", "60")...)
	wantError(t, r, 503, errno.RetryBackoff)
}

func TestRegistrationMetrics(t *testing.T) {
	s, _ := regServer(t)
	reg := register(t, s, "fcm", "fcm-app", `{"token":"fcm-token-0123"}`)
	regCall(s, http.MethodGet, "fcm", "fcm-app", reg.UAID, "/", nil, bearer(reg.Secret)...)
	regCall(s, http.MethodGet, "fcm", "fcm-app", reg.UAID, "", nil)
	perform(s, http.MethodPost, "/v1/nope/x/registration", []byte(`{}`))
	for series, want := range map[string]string{
		`autoendpoint_requests_total{route="registration_new",code="200"}`: "1",
		`autoendpoint_requests_total{route="registration_new",code="400"}`: "1",
		`autoendpoint_requests_total{route="registration_get",code="200"}`: "1",
		`autoendpoint_requests_total{route="registration_get",code="401"}`: "1",
		`autoendpoint_errors_total{errno="108"}`:                           "1",
	} {
		if got := metricValue(t, s, series); got != want {
			t.Errorf("%s = %s, want %s", series, got, want)
		}
	}
}

// metricValue is the value of one series the node's /metrics serves
// ("" if absent).
func metricValue(t *testing.T, s *node, series string) string {
	t.Helper()
	a := apitiertest.Send(t, http.MethodGet, "http://"+s.MetricsAddr()+"/metrics", nil)
	for _, line := range strings.Split(string(a.Body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}
