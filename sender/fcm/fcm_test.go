package fcm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
)

const (
	project = "fenix-test-1"
	appID   = "fenix"
	sendURL = "/v1/projects/" + project + "/messages:send"
	chid    = "deadbeef-0000-4000-8000-000000000001"
)

type env struct {
	c    *Client
	fake *fcmfake.Fake
	acct *fcmfake.Account
}

// appsJSON is fcm-apps with one app.
func appsJSON(t *testing.T, id, proj, creds string) string {
	t.Helper()
	b, err := json.Marshal(map[string]map[string]string{id: {"project_id": proj, "credentials": creds}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// start runs a fake FCM and a client of app "fenix" whose service account
// is a file the fake knows; tune adjusts the config.
func start(t *testing.T, tune func(*Config)) *env {
	t.Helper()
	fake, err := fcmfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	acct, err := fake.NewAccount(project)
	if err != nil {
		t.Fatal(err)
	}
	path, err := acct.WriteFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.URL = fake.URL()
	cfg.Apps = appsJSON(t, appID, project, path)
	if tune != nil {
		tune(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{c: c, fake: fake, acct: acct}
}

func push(token string, data map[string]string) *provider.Notification {
	return &provider.Notification{ID: "m1", AppID: appID, Token: token, Priority: provider.High, TTL: time.Hour, Data: data}
}

func (e *env) send(t *testing.T, n *provider.Notification) provider.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.c.Send(ctx, n)
}

func (e *env) last(t *testing.T) fcmfake.Received {
	t.Helper()
	log := e.fake.Log()
	if len(log) == 0 {
		t.Fatal("the fake received no send")
	}
	return log[len(log)-1]
}

func bearer(r fcmfake.Received) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// TestSendWire: each kind of WebPush notification reaches FCM as
// autopush-rs's message, byte for byte, with the bearer token and JSON
// content type.
func TestSendWire(t *testing.T) {
	e := start(t, nil)
	for _, tc := range []struct {
		name string
		data map[string]string
		want string
	}{
		{"aes128gcm", map[string]string{"chid": chid, "body": "AAECAwQ-_w", "con": "aes128gcm"},
			`{"message":{"android":{"data":{"body":"AAECAwQ-_w","chid":"` + chid + `","con":"aes128gcm"},"priority":"HIGH","ttl":"3600s"},"token":"reg-1"}}`},
		{"aesgcm", map[string]string{"chid": chid, "body": "BBB", "con": "aesgcm", "enc": "salt=c2FsdA", "cryptokey": "dh=a2V5"},
			`{"message":{"android":{"data":{"body":"BBB","chid":"` + chid + `","con":"aesgcm","cryptokey":"dh=a2V5","enc":"salt=c2FsdA"},"priority":"HIGH","ttl":"3600s"},"token":"reg-1"}}`},
		{"empty", map[string]string{"chid": chid},
			`{"message":{"android":{"data":{"chid":"` + chid + `"},"priority":"HIGH","ttl":"3600s"},"token":"reg-1"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.send(t, push("reg-1", tc.data))
			if r.Verdict != provider.Sent || r.Status != 200 {
				t.Fatalf("result %+v, want sent 200", r)
			}
			got := e.last(t)
			if got.Method != http.MethodPost || got.Path != sendURL {
				t.Fatalf("%s %s, want POST %s", got.Method, got.Path, sendURL)
			}
			if string(got.Body) != tc.want {
				t.Fatalf("body\n%s\nwant\n%s", got.Body, tc.want)
			}
			if ct := got.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if !strings.HasPrefix(bearer(got), "ya29.fake-") {
				t.Fatalf("Authorization %q is not a token the fake issued", got.Header.Get("Authorization"))
			}
		})
	}
}

// TestTTLPriorityCollapse: TTL is clamped to [fcm-min-ttl, 28 days] in
// whole seconds; Urgency's priority and the collapse key are sent; a
// notification without urgency carries no priority (autopush-rs sends
// none), not HIGH.
func TestTTLPriorityCollapse(t *testing.T) {
	e := start(t, nil)
	for _, tc := range []struct {
		ttl      time.Duration
		prio     provider.Priority
		collapse string
		want     string
	}{
		{0, provider.High, "", `"priority":"HIGH","ttl":"60s"`},
		{0, provider.Default, "", `{"message":{"android":{"data":{"chid":"c"},"ttl":"60s"},"token":"reg-2"}}`},
		{30 * 24 * time.Hour, provider.Normal, "", `"priority":"NORMAL","ttl":"2419200s"`},
		{90*time.Second + 900*time.Millisecond, provider.Normal, "topic-a", `{"collapse_key":"topic-a","data":{"chid":"c"},"priority":"NORMAL","ttl":"90s"}`},
	} {
		n := push("reg-2", map[string]string{"chid": "c"})
		n.TTL, n.Priority, n.CollapseKey = tc.ttl, tc.prio, tc.collapse
		if r := e.send(t, n); r.Verdict != provider.Sent {
			t.Fatalf("ttl %s: %+v", tc.ttl, r)
		}
		if b := string(e.last(t).Body); !strings.Contains(b, tc.want) {
			t.Fatalf("ttl %s: body %s lacks %s", tc.ttl, b, tc.want)
		}
	}
}

func TestClampTTL(t *testing.T) {
	c := DefaultConfig()
	for in, want := range map[time.Duration]time.Duration{
		-time.Second: 60 * time.Second, 0: 60 * time.Second, 59 * time.Second: 60 * time.Second,
		61*time.Second + 999*time.Millisecond: 61 * time.Second, 28 * 24 * time.Hour: 2419200 * time.Second,
		30 * 24 * time.Hour: 2419200 * time.Second,
	} {
		if got := c.ClampTTL(in); got != want {
			t.Errorf("ClampTTL(%s) = %s, want %s", in, got, want)
		}
	}
	c.MinTTL = 0
	if got := c.ClampTTL(0); got != 0 {
		t.Errorf("min 0: ClampTTL(0) = %s", got)
	}
}

// clock moves the client's idea of now for app's token cache.
func clock(e *env) *atomic.Int64 {
	var off atomic.Int64
	e.c.apps[appID].tokens.now = func() time.Time { return time.Now().Add(time.Duration(off.Load())) }
	return &off
}

// TestTokenReuseAndExpiry: one token serves many sends; it is renewed a
// minute before it expires, not earlier.
func TestTokenReuseAndExpiry(t *testing.T) {
	e := start(t, nil)
	off := clock(e)
	for range 3 {
		if r := e.send(t, push("reg", nil)); r.Verdict != provider.Sent {
			t.Fatalf("%+v", r)
		}
	}
	if n := e.fake.TokenRequests(); n != 1 {
		t.Fatalf("%d token requests for 3 sends, want 1", n)
	}
	first := bearer(e.last(t))
	off.Store(int64(58 * time.Minute))
	e.send(t, push("reg", nil))
	if n, b := e.fake.TokenRequests(), bearer(e.last(t)); n != 1 || b != first {
		t.Fatalf("at 58 min: %d token requests, same token %v; want the cached one", n, b == first)
	}
	off.Store(int64(59*time.Minute + 30*time.Second))
	if r := e.send(t, push("reg", nil)); r.Verdict != provider.Sent {
		t.Fatalf("%+v", r)
	}
	if n, b := e.fake.TokenRequests(), bearer(e.last(t)); n != 2 || b == first {
		t.Fatalf("30 s before expiry: %d token requests, same token %v; want a new one", n, b == first)
	}
}

// TestShortLivedToken: a token living 4 s is renewed at three quarters
// of its life.
func TestShortLivedToken(t *testing.T) {
	e := start(t, nil)
	e.fake.SetTokenLifetime(4 * time.Second)
	off := clock(e)
	e.send(t, push("reg", nil))
	first := bearer(e.last(t))
	off.Store(int64(3500 * time.Millisecond))
	if r := e.send(t, push("reg", nil)); r.Verdict != provider.Sent {
		t.Fatalf("%+v", r)
	}
	if n, b := e.fake.TokenRequests(), bearer(e.last(t)); n != 2 || b == first {
		t.Fatalf("%d token requests, same token %v; want a renewal", n, b == first)
	}
}

// TestUnauthenticated: when FCM refuses the access token (revoked,
// expired on its side), the send is retried with the reason visible, and
// the next send fetches a new token.
func TestUnauthenticated(t *testing.T) {
	e := start(t, nil)
	e.send(t, push("reg", nil))
	e.fake.ExpireTokens()
	r := e.send(t, push("reg", nil))
	if r.Verdict != provider.Retry || r.Status != 401 || r.Reason != "UNAUTHENTICATED" || r.Message == "" || !r.Auth {
		t.Fatalf("%+v, want retry 401 UNAUTHENTICATED", r)
	}
	if r := e.send(t, push("reg", nil)); r.Verdict != provider.Sent {
		t.Fatalf("after a 401: %+v", r)
	}
	if n := e.fake.TokenRequests(); n != 2 {
		t.Fatalf("%d token requests, want 2 (the refused token dropped)", n)
	}
}

// TestPermissionDenied: a project the account may not send to is a
// visible auth failure, retried with a fresh token.
func TestPermissionDenied(t *testing.T) {
	e := start(t, nil)
	creds := string(e.acct.JSON())
	cfg := e.c.Config()
	cfg.Apps = appsJSON(t, appID, "other-project", creds)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 1; i <= 2; i++ {
		r := c.Send(ctx, push("reg", nil))
		if r.Verdict != provider.Retry || r.Status != 403 || r.Reason != "PERMISSION_DENIED" || !r.Auth {
			t.Fatalf("%+v, want retry 403 PERMISSION_DENIED", r)
		}
		if n := e.fake.TokenRequests(); n != i {
			t.Fatalf("send %d: %d token requests, want %d", i, n, i)
		}
	}
}

// TestAnswers: FCM's answers map to verdicts, reasons and waits.
func TestAnswers(t *testing.T) {
	e := start(t, nil)
	date := time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat)
	quota := fcmfake.Error(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", "QUOTA_EXCEEDED")
	quota.Header.Set("Retry-After", "7")
	quotaDate := fcmfake.Error(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", "QUOTA_EXCEEDED")
	quotaDate.Header.Set("Retry-After", date)
	for _, tc := range []struct {
		name    string
		answer  fcmfake.Answer
		verdict provider.Verdict
		reason  string
		wait    func(time.Duration) bool
	}{
		{"429 seconds", quota, provider.Retry, "RESOURCE_EXHAUSTED/QUOTA_EXCEEDED", func(d time.Duration) bool { return d == 7*time.Second }},
		{"429 date", quotaDate, provider.Retry, "RESOURCE_EXHAUSTED/QUOTA_EXCEEDED", func(d time.Duration) bool { return d > 100*time.Second && d <= 2*time.Minute }},
		{"500", fcmfake.Error(500, "INTERNAL", "Internal error.", "INTERNAL"), provider.Retry, "INTERNAL", nil},
		{"503", fcmfake.Error(503, "UNAVAILABLE", "The service is currently unavailable.", "UNAVAILABLE"), provider.Retry, "UNAVAILABLE", nil},
		{"502 html", fcmfake.Answer{Status: 502, Body: []byte("<html>Bad Gateway</html>")}, provider.Retry, "", nil},
		{"400", fcmfake.Error(400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token", "INVALID_ARGUMENT"), provider.Fail, "INVALID_ARGUMENT", nil},
		{"403 sender mismatch", fcmfake.Error(403, "PERMISSION_DENIED", "SenderId mismatch", "SENDER_ID_MISMATCH"), provider.Fail, "PERMISSION_DENIED/SENDER_ID_MISMATCH", nil},
		{"404 unregistered", fcmfake.Unregistered(), provider.DeviceGone, "NOT_FOUND/UNREGISTERED", nil},
		{"404 bare", fcmfake.Answer{Status: 404}, provider.Fail, "", nil},
		{"404 not FCM's", fcmfake.Answer{Status: 404, Body: []byte("<html>Not Found</html>")}, provider.Fail, "", nil},
		{"404 NOT_FOUND without UNREGISTERED", fcmfake.Error(404, "NOT_FOUND", "Requested entity was not found.", ""), provider.Fail, "NOT_FOUND", nil},
		{"401 queued", fcmfake.Unauthenticated(), provider.Retry, "UNAUTHENTICATED", nil},
		{"401 bare", fcmfake.Answer{Status: 401}, provider.Retry, "auth", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.fake.Queue(tc.answer)
			r := e.send(t, push("reg", map[string]string{"chid": chid}))
			if r.Verdict != tc.verdict || r.Status != tc.answer.Status || r.Reason != tc.reason {
				t.Fatalf("%+v, want %v %d reason %q", r, tc.verdict, tc.answer.Status, tc.reason)
			}
			if r.Message == "" {
				t.Fatal("no message recorded")
			}
			if tc.wait != nil && !tc.wait(r.RetryAfter) || tc.wait == nil && r.RetryAfter != 0 {
				t.Fatalf("wait %s", r.RetryAfter)
			}
		})
	}
}

// TestAnswerQuotingTheToken: an answer that quotes the registration
// token (Google's validation errors quote the value they refuse; a
// proxy's page may quote the request) gives it to no text of the result.
func TestAnswerQuotingTheToken(t *testing.T) {
	e := start(t, nil)
	token := "reg-" + strings.Repeat("q7", 40)
	e.fake.Queue(fcmfake.Error(400, "INVALID_ARGUMENT", `Invalid value at 'message.token' (TYPE_STRING), "`+token+`"`, ""))
	r := e.send(t, push(token, nil))
	if r.Verdict != provider.Fail || r.Status != 400 || !strings.Contains(r.Message, "Invalid value at 'message.token'") {
		t.Fatalf("%+v, want a failure saying why", r)
	}
	if strings.Contains(r.Reason+r.Message, token) || !strings.Contains(r.Message, provider.RedactedToken) {
		t.Errorf("the result holds the token: %+v", r)
	}
}

// TestRefusedByFake: the fake's own checks (a gone token, a message
// without recipient, a wrong URL) reach the verdicts too; only the gone
// token is device gone.
func TestRefusedByFake(t *testing.T) {
	e := start(t, nil)
	wrong := start(t, func(c *Config) { c.URL += "/fcm/send" })
	if r := wrong.send(t, push("reg-ok", nil)); r.Verdict != provider.Fail || r.Status != 404 {
		t.Fatalf("a wrong fcm-url: %+v, want a failure, not device gone", r)
	}
	e.fake.SetGone("reg-gone")
	if r := e.send(t, push("reg-gone", nil)); r.Verdict != provider.DeviceGone || r.Reason != "NOT_FOUND/UNREGISTERED" {
		t.Fatalf("gone token: %+v", r)
	}
	if r := e.send(t, push("", nil)); r.Verdict != provider.Fail || r.Status != 400 || !strings.Contains(r.Message, "Recipient") {
		t.Fatalf("no token: %+v", r)
	}
}

// TestSlowAnswer: an answer later than the send's deadline is a retry
// without status, returned by the deadline.
func TestSlowAnswer(t *testing.T) {
	e := start(t, nil)
	e.send(t, push("reg", nil)) // the token, so the deadline is FCM's
	e.fake.Queue(fcmfake.Answer{Delay: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	r := e.c.Send(ctx, push("reg", nil))
	if r.Verdict != provider.Retry || r.Status != 0 || r.Err == nil || r.Message != "timeout" {
		t.Fatalf("%+v, want retry without status, timeout", r)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("returned after %s", d)
	}
}

// TestConfigTimeout: fcm-timeout bounds a send even when the caller's
// context has none.
func TestConfigTimeout(t *testing.T) {
	e := start(t, func(c *Config) { c.Timeout = 300 * time.Millisecond })
	e.send(t, push("reg", nil))
	e.fake.Queue(fcmfake.Answer{Delay: time.Minute})
	if r := e.c.Send(context.Background(), push("reg", nil)); r.Verdict != provider.Retry || r.Status != 0 || r.Err == nil {
		t.Fatalf("%+v", r)
	}
}

// TestTokenEndpointFailure: a token endpoint failure is a retry with
// reason oauth; the failure is not cached.
func TestTokenEndpointFailure(t *testing.T) {
	e := start(t, nil)
	e.fake.QueueToken(fcmfake.Answer{Status: 500, Body: []byte(`{"error":"internal_failure"}`)})
	r := e.send(t, push("reg", nil))
	// A token endpoint's 500 is an outage, not refused credentials.
	if r.Verdict != provider.Retry || r.Reason != "oauth" || r.Err == nil || r.Status != 0 || !strings.Contains(r.Message, "500") || r.Auth {
		t.Fatalf("%+v, want retry oauth", r)
	}
	if e.fake.Sends() != 0 {
		t.Fatal("sent without a token")
	}
	if r := e.send(t, push("reg", nil)); r.Verdict != provider.Sent {
		t.Fatalf("after the endpoint recovered: %+v", r)
	}
}

// TestUnknownKey: an account the token endpoint does not know (its
// assertion's signature does not verify) cannot send.
func TestUnknownKey(t *testing.T) {
	e := start(t, nil)
	stranger, err := fcmfake.NewServiceAccount(project, e.fake.TokenURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.c.Config()
	cfg.Apps = appsJSON(t, appID, project, string(stranger.JSON()))
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Send(context.Background(), push("reg", nil))
	if r.Verdict != provider.Retry || r.Reason != "oauth" || !strings.Contains(r.Message, "invalid_grant") || !r.Auth {
		t.Fatalf("%+v, want retry oauth invalid_grant", r)
	}
}

// TestTokenSingleFlight: sends that find no token wait for one fetch.
func TestTokenSingleFlight(t *testing.T) {
	e := start(t, nil)
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			if r := e.send(t, push("reg", nil)); r.Verdict != provider.Sent {
				t.Errorf("%+v", r)
			}
		})
	}
	wg.Wait()
	if n := e.fake.TokenRequests(); n != 1 {
		t.Fatalf("%d token requests for 40 concurrent sends, want 1", n)
	}
}

// TestMisconfigured: an unknown app id is Broken (never a silent drop),
// too much data fails; neither reaches FCM.
func TestMisconfigured(t *testing.T) {
	e := start(t, nil)
	n := push("reg", nil)
	n.AppID = "focus"
	r := e.send(t, n)
	if r.Verdict != provider.Broken || r.Err == nil || !strings.Contains(r.Message, `"focus"`) {
		t.Fatalf("unknown app: %+v", r)
	}
	r = e.send(t, push("reg", map[string]string{"chid": chid, "body": strings.Repeat("A", 4096)}))
	if r.Verdict != provider.Fail || r.Reason != "too_much_data" {
		t.Fatalf("too much data: %+v", r)
	}
	if e.fake.Sends() != 0 {
		t.Fatalf("%d sends reached FCM", e.fake.Sends())
	}
}

func TestDataSize(t *testing.T) {
	for _, tc := range []struct {
		data map[string]string
		want string
	}{
		{nil, `{}`},
		{map[string]string{"chid": "c", "body": "<&>"}, `{"body":"<&>","chid":"c"}`},
		{map[string]string{"é": "\"\n"}, `{"é":"\"\n"}`},
	} {
		if got := DataSize(tc.data); got != len(tc.want) {
			t.Errorf("DataSize(%v) = %d, want %d (%s)", tc.data, got, len(tc.want), tc.want)
		}
	}
	c := DefaultConfig()
	c.MaxData = 20
	if err := c.CheckData(map[string]string{"chid": "123456789"}); err != nil { // 20 bytes
		t.Fatalf("at the limit: %v", err)
	}
	if err := c.CheckData(map[string]string{"chid": "1234567890"}); !errors.Is(err, ErrTooMuchData) || !strings.Contains(err.Error(), "1 over") {
		t.Fatalf("one over: %v", err)
	}
}

// TestCredentialErrors: every unusable credential stops New with the app
// id named and the secret never shown.
func TestCredentialErrors(t *testing.T) {
	fake, err := fcmfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	acct, err := fcmfake.NewServiceAccount(project, fake.TokenURL())
	if err != nil {
		t.Fatal(err)
	}
	var good map[string]string
	json.Unmarshal(acct.JSON(), &good)
	with := func(k, v string) string {
		m := map[string]string{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	dir := t.TempDir()
	unreadable := filepath.Join(dir, "garbage.json")
	os.WriteFile(unreadable, []byte("-----BEGIN PRIVATE KEY----- not json"), 0o600)
	keyBody := good["private_key"][40:80]
	for _, tc := range []struct {
		name, creds, want string
	}{
		{"missing file", filepath.Join(dir, "nope.json"), "neither JSON"},
		{"legacy server key", "AIzaSyB0ecSrqnEDXQ7yjLXqVc0CUGOeSlq9BsM", "neither JSON"},
		{"not json", unreadable, "not JSON"},
		{"truncated json", string(acct.JSON()[:200]), "not JSON"},
		{"wrong type", with("type", "authorized_user"), `type "authorized_user"`},
		{"no email", with("client_email", ""), "no client_email"},
		{"no key", with("private_key", ""), "no private_key"},
		{"bad key", with("private_key", "-----BEGIN PRIVATE KEY-----\n"+keyBody+"\n-----END PRIVATE KEY-----\n"), "private_key"},
		{"bad token uri", with("token_uri", "ftp://x"), "token_uri"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.URL = fake.URL()
			cfg.Apps = appsJSON(t, "fenix-beta", project, tc.creds)
			_, err := New(cfg)
			if err == nil {
				t.Fatal("New accepted it")
			}
			msg := err.Error()
			if !strings.Contains(msg, `app "fenix-beta"`) || !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q lacks the app id or %q", msg, tc.want)
			}
			if strings.Contains(msg, keyBody) || strings.Contains(msg, "AIzaSy") || strings.Contains(msg, "BEGIN PRIVATE") {
				t.Fatalf("error %q shows the secret", msg)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		tune func(*Config)
		want string
	}{
		{"url", func(c *Config) { c.URL = "fcm.googleapis.com" }, "fcm-url"},
		{"rate", func(c *Config) { c.Rate = 0 }, "rate"},
		{"latency", func(c *Config) { c.AverageLatency = 0 }, "latency"},
		{"timeout", func(c *Config) { c.Timeout = -1 }, "timeout"},
		{"max data", func(c *Config) { c.MaxData = 0 }, "fcm-max-data"},
		{"min ttl", func(c *Config) { c.MinTTL = 29 * 24 * time.Hour }, "fcm-min-ttl"},
		{"apps json", func(c *Config) { c.Apps = `{"fenix":` }, "fcm-apps"},
		{"apps project", func(c *Config) { c.Apps = `{"fenix":{"project_id":"a/b","credentials":"{}"}}` }, `app "fenix": project_id`},
		{"apps creds", func(c *Config) { c.Apps = `{"fenix":{"project_id":"p"}}` }, `app "fenix": no credentials`},
		{"apps field", func(c *Config) { c.Apps = `{"fenix":{"project_id":"p","credentials":"x","key":1}}` }, "unknown field"},
	} {
		cfg := DefaultConfig()
		tc.tune(&cfg)
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "fcm: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one about %q", tc.name, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if ids := cfg.AppIDs(); len(ids) != 0 {
		t.Fatalf("no apps configured, AppIDs %v", ids)
	}
	cfg.Apps = `{"b":{"project_id":"p","credential":"x"},"a":{"project_id":"q","server_access_token":"{}"}}`
	if ids := cfg.AppIDs(); strings.Join(ids, ",") != "a,b" {
		t.Fatalf("AppIDs %v", ids)
	}
	def := DefaultConfig()
	l := def.Limits()
	if l.Rate != 500 || l.AverageLatency != 200*time.Millisecond || l.Timeout != 10*time.Second || l.Dedup {
		t.Fatalf("limits %+v", l)
	}
}

// TestInlineCredentials: the service-account JSON itself works as well
// as its path.
func TestInlineCredentials(t *testing.T) {
	e := start(t, nil)
	cfg := e.c.Config()
	cfg.Apps = appsJSON(t, appID, project, " "+string(e.acct.JSON()))
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Send(context.Background(), push("reg", nil)); r.Verdict != provider.Sent {
		t.Fatalf("%+v", r)
	}
	if got := c.AppIDs(); len(got) != 1 || got[0] != appID {
		t.Fatalf("AppIDs %v", got)
	}
}

// TestSlowTokenEndpoint: a send waiting for a token gives up at its
// deadline, as a retry with reason oauth.
func TestSlowTokenEndpoint(t *testing.T) {
	e := start(t, nil)
	e.fake.QueueToken(fcmfake.Answer{Delay: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	r := e.c.Send(ctx, push("reg", nil))
	if r.Verdict != provider.Retry || r.Reason != "oauth" || r.Status != 0 || !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Fatalf("%+v, want retry oauth by the deadline", r)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("returned after %s", d)
	}
}
