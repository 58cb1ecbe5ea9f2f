package apns

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autopush-go/autopush/sender/bridge/aps"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/sendertest/apnsfake"
)

const (
	testTopic = "org.mozilla.ios.Firefox"
	testToken = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	testID    = "0f8c7b1e-2d3a-4b5c-8d9e-0a1b2c3d4e5f"
	testCHID  = "5c8a8d4e-6f1b-4a2c-9d3e-7f6a5b4c3d2e"
)

// env is a fake APNs with one trusted signing key, and a client whose app
// "firefox" signs with it.
type env struct {
	fake   *apnsfake.Fake
	key    *apnsfake.Key
	client *Client
	cfg    Config
}

func startFake(t *testing.T) *apnsfake.Fake {
	t.Helper()
	return startFakeWith(t, apnsfake.Options{Topic: testTopic})
}

func startFakeWith(t *testing.T, opts apnsfake.Options) *apnsfake.Fake {
	t.Helper()
	f, err := apnsfake.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func baseConfig(t *testing.T, f *apnsfake.Fake, apps map[string]map[string]any) Config {
	t.Helper()
	b, err := json.Marshal(apps)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Apps = string(b)
	cfg.Timeout = 10 * time.Second
	if cfg.CAFile, err = f.WriteCA(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newEnv(t *testing.T, change func(*Config)) *env {
	t.Helper()
	return newEnvWith(t, apnsfake.Options{Topic: testTopic}, change)
}

func newEnvWith(t *testing.T, opts apnsfake.Options, change func(*Config)) *env {
	t.Helper()
	f := startFakeWith(t, opts)
	k, err := apnsfake.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	f.AddKey(k)
	path, err := k.WriteFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, f, map[string]map[string]any{"firefox": {
		"topic": testTopic, "endpoint": f.URL(), "key": path, "key_id": k.ID, "team_id": k.TeamID}})
	if change != nil {
		change(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &env{fake: f, key: k, client: c, cfg: cfg}
}

func notification(data map[string]string) *provider.Notification {
	return &provider.Notification{ID: testID, AppID: "firefox", Token: testToken, Priority: provider.High,
		TTL: time.Hour, Data: data}
}

func (e *env) send(t *testing.T, n *provider.Notification) (provider.Result, apnsfake.Received) {
	t.Helper()
	before := e.fake.Count()
	r := e.client.Send(context.Background(), n)
	log := e.fake.Log()
	if len(log) != before+1 {
		t.Fatalf("the fake got %d requests, want %d (result %+v)", len(log), before+1, r)
	}
	return r, log[before]
}

const wantAPS = `"aps":{"alert":{"loc-key":"SentTab.NoTabArrivingNotification.body","title-loc-key":"SentTab.NoTabArrivingNotification.title"},"mutable-content":1}`

// The payload is the one Firefox for iOS reads, byte for byte, for the
// three kinds of WebPush notification; the headers are APNs's, and it
// goes over HTTP/2 with a provider token APNs accepts.
func TestSendExactBytes(t *testing.T) {
	e := newEnv(t, nil)
	body := "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
	for _, c := range []struct {
		name string
		data map[string]string
		want string
	}{
		{"aes128gcm", map[string]string{"chid": testCHID, "body": body, "con": "aes128gcm"},
			`{` + wantAPS + `,"body":"` + body + `","chid":"` + testCHID + `","con":"aes128gcm","ver":"` + testID + `"}`},
		{"aesgcm", map[string]string{"chid": testCHID, "body": body, "con": "aesgcm",
			"enc": "salt=lngarbyKfMoi9Z75xYXmkg", "cryptokey": "dh=BNoRDbb84JGm8g5Z5CFxurSqsXWJ11ItfXEWYVLE85Y7CYkDjXsIEc4aqxYaQ1G8BqkXCJ6DPpDrWtdWj_mugHU"},
			`{` + wantAPS + `,"body":"` + body + `","chid":"` + testCHID + `","con":"aesgcm","cryptokey":"dh=BNoRDbb84JGm8g5Z5CFxurSqsXWJ11ItfXEWYVLE85Y7CYkDjXsIEc4aqxYaQ1G8BqkXCJ6DPpDrWtdWj_mugHU","enc":"salt=lngarbyKfMoi9Z75xYXmkg","ver":"` + testID + `"}`},
		{"empty", map[string]string{"chid": testCHID},
			`{` + wantAPS + `,"chid":"` + testCHID + `","ver":"` + testID + `"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, rec := e.send(t, notification(c.data))
			if r.Verdict != provider.Sent || r.Status != 200 {
				t.Fatalf("result %+v, want sent 200", r)
			}
			if string(rec.Body) != c.want {
				t.Fatalf("body\n%s\nwant\n%s", rec.Body, c.want)
			}
			if PayloadSize(notification(c.data)) != len(c.want) {
				t.Fatalf("PayloadSize %d, sent %d", PayloadSize(notification(c.data)), len(c.want))
			}
			want := map[string]string{"apns-topic": testTopic, "apns-push-type": "alert", "apns-priority": "10",
				"apns-id": testID, "content-type": "application/json", "apns-collapse-id": testID}
			for h, v := range want {
				if got := rec.Header.Get(h); got != v {
					t.Errorf("%s: %q, want %q", h, got, v)
				}
			}
			if rec.Proto != "HTTP/2.0" || rec.Path != "/3/device/"+testToken || rec.Token != testToken {
				t.Errorf("%s %s (token %q)", rec.Proto, rec.Path, rec.Token)
			}
			if rec.JWT == "" || rec.KeyID != e.key.ID || rec.Header.Get("authorization") != "bearer "+rec.JWT {
				t.Errorf("authorization %q, kid %q", rec.Header.Get("authorization"), rec.KeyID)
			}
			header, _, _ := strings.Cut(rec.JWT, ".")
			if h, _ := base64.RawURLEncoding.DecodeString(header); string(h) != `{"alg":"ES256","kid":"`+e.key.ID+`"}` {
				t.Errorf("JWT header %s", h)
			}
		})
	}
}

// apns-expiration is 0 ("now or never") for TTL 0, else now+TTL in Unix
// seconds.
func TestExpiration(t *testing.T) {
	e := newEnv(t, nil)
	now := time.Now().Truncate(time.Second)
	e.client.now = func() time.Time { return now }
	for ttl, want := range map[time.Duration]string{
		0:                "0",
		time.Minute:      strconv.FormatInt(now.Unix()+60, 10),
		28 * 24 * 3600e9: strconv.FormatInt(now.Unix()+28*24*3600, 10),
	} {
		n := notification(map[string]string{"chid": testCHID})
		n.TTL = ttl
		if _, rec := e.send(t, n); rec.Header.Get("apns-expiration") != want {
			t.Errorf("TTL %s: apns-expiration %q, want %q", ttl, rec.Header.Get("apns-expiration"), want)
		}
	}
}

// High priority is 10 (wake the device now), Normal 5, and no urgency
// 10, as autopush-rs always sends.
func TestPriority(t *testing.T) {
	e := newEnv(t, nil)
	for p, want := range map[provider.Priority]string{provider.High: "10", provider.Normal: "5", provider.Default: "10"} {
		n := notification(nil)
		n.Priority = p
		if r, rec := e.send(t, n); r.Verdict != provider.Sent || rec.Header.Get("apns-priority") != want {
			t.Errorf("priority %d: %v, apns-priority %q, want %q", p, r.Verdict, rec.Header.Get("apns-priority"), want)
		}
	}
}

// A collapse key is sent as apns-collapse-id; one over Apple's 64 bytes
// (or not a header value) is sent as its SHA-256, which APNs accepts.
// Without one, the push id is the collapse id: each send of one push
// carries the same, two pushes never share it.
func TestCollapseID(t *testing.T) {
	e := newEnv(t, nil)
	var ids []string
	for _, id := range []string{testID, testID, "6a1e3c9f-0b7d-4e2a-8c5f-1d2e3f4a5b6c"} {
		n := notification(nil)
		n.ID = id
		_, rec := e.send(t, n)
		ids = append(ids, rec.Header.Get("apns-collapse-id"))
	}
	if ids[0] != testID || ids[1] != testID || ids[2] != "6a1e3c9f-0b7d-4e2a-8c5f-1d2e3f4a5b6c" {
		t.Errorf("collapse ids without a key %q, want each push's id", ids)
	}
	long := strings.Repeat("k", 65)
	sum := sha256.Sum256([]byte(long))
	ctl := sha256.Sum256([]byte("a\nb"))
	for key, want := range map[string]string{
		"new-tabs":              "new-tabs",
		strings.Repeat("x", 64): strings.Repeat("x", 64),
		long:                    hex.EncodeToString(sum[:]),
		"a\nb":                  hex.EncodeToString(ctl[:]),
	} {
		n := notification(nil)
		n.CollapseKey = key
		r, rec := e.send(t, n)
		if r.Verdict != provider.Sent || rec.Header.Get("apns-collapse-id") != want {
			t.Errorf("key %q: %+v, apns-collapse-id %q, want %q", key, r, rec.Header.Get("apns-collapse-id"), want)
		}
	}
}

// One provider token serves every send of its lifetime, even many at
// once; a new one is made after 50 minutes and when APNs answers
// ExpiredProviderToken (once, however many sends saw the answer).
func TestProviderTokenReuseAndRefresh(t *testing.T) {
	e := newEnv(t, nil)
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			if r := e.client.Send(context.Background(), notification(nil)); r.Verdict != provider.Sent {
				t.Errorf("result %+v", r)
			}
		})
	}
	wg.Wait()
	if n := e.fake.JWTs(); n != 1 {
		t.Fatalf("%d distinct JWTs for 40 sends, want 1", n)
	}
	// One HTTP/2 connection carries them all once it is up.
	conns := e.fake.Conns()
	for range 40 {
		wg.Go(func() { e.client.Send(context.Background(), notification(nil)) })
	}
	wg.Wait()
	if n := e.fake.Conns(); n != conns || n != 1 {
		t.Fatalf("%d connections, then %d after 40 more sends", conns, n)
	}

	e.fake.Queue(apnsfake.Fault{Status: 403, Reason: "ExpiredProviderToken"})
	r, first := e.send(t, notification(nil))
	if r.Verdict != provider.Retry || r.Status != 403 || r.Reason != "ExpiredProviderToken" || r.Message == "" {
		t.Fatalf("result %+v, want a retry with reason ExpiredProviderToken", r)
	}
	r, second := e.send(t, notification(nil))
	if r.Verdict != provider.Sent || second.JWT == first.JWT || e.fake.JWTs() != 2 {
		t.Fatalf("after ExpiredProviderToken: %v, %d JWTs, same token %v", r.Verdict, e.fake.JWTs(), second.JWT == first.JWT)
	}

	later := time.Now().Add(51 * time.Minute)
	e.client.now = func() time.Time { return later }
	e.fake.SetNow(func() time.Time { return later })
	if r, third := e.send(t, notification(nil)); r.Verdict != provider.Sent || third.JWT == second.JWT || e.fake.JWTs() != 3 {
		t.Fatalf("after 51 minutes: %v, %d JWTs", r.Verdict, e.fake.JWTs())
	}
	if _, fourth := e.send(t, notification(nil)); e.fake.JWTs() != 3 {
		t.Fatalf("the refreshed token was not reused: %d JWTs (%q)", e.fake.JWTs(), fourth.JWT)
	}
}

// A token whose key APNs does not know is refused with a visible reason
// and retried, never dropped silently.
func TestInvalidProviderToken(t *testing.T) {
	e := newEnv(t, nil)
	other, err := apnsfake.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, e.fake, map[string]map[string]any{"firefox": {
		"topic": testTopic, "endpoint": e.fake.URL(), "key": string(other.PEM), "key_id": other.ID, "team_id": other.TeamID}})
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := c.Send(context.Background(), notification(nil))
	if r.Verdict != provider.Retry || r.Status != 403 || r.Reason != "InvalidProviderToken" || !strings.Contains(r.Message, "key_id") {
		t.Fatalf("result %+v", r)
	}
}

// Certificate authentication: the client presents the app's certificate
// (given inline, and in autopush-rs's {"cert", "key"} spelling) and sends
// no provider token.
func TestCertificateAuth(t *testing.T) {
	f := startFake(t)
	certPEM, keyPEM, err := f.IssueClientCert("org.mozilla.ios.Firefox push")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, app := range map[string]map[string]any{
		"cert_key inline": {"topic": testTopic, "endpoint": f.URL(), "cert": certPath, "cert_key": string(keyPEM)},
		"autopush-rs key": {"topic": testTopic, "endpoint": f.URL(), "cert": string(certPEM), "key": string(keyPEM)},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := New(baseConfig(t, f, map[string]map[string]any{"firefox": app}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			before := f.Count()
			r := c.Send(context.Background(), notification(nil))
			rec := f.Log()[before]
			if r.Verdict != provider.Sent || rec.ClientCert != "org.mozilla.ios.Firefox push" || rec.JWT != "" || rec.Header.Get("authorization") != "" {
				t.Fatalf("result %+v, client cert %q, JWT %q", r, rec.ClientCert, rec.JWT)
			}
		})
	}
}

// Each APNs answer gets its verdict, reason and wait.
func TestAnswers(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		fault   apnsfake.Fault
		verdict provider.Verdict
		after   time.Duration
	}{
		{apnsfake.Fault{Status: 429, Reason: "TooManyRequests", RetryAfter: "7"}, provider.Retry, 7 * time.Second},
		{apnsfake.Fault{Status: 500, Reason: "InternalServerError"}, provider.Retry, 0},
		{apnsfake.Fault{Status: 503, Reason: "ServiceUnavailable", RetryAfter: "30"}, provider.Retry, 30 * time.Second},
		{apnsfake.Fault{Status: 503, Reason: "Shutdown"}, provider.Retry, 0},
		{apnsfake.Fault{Status: 400, Reason: "BadDeviceToken"}, provider.Fail, 0},
		{apnsfake.Fault{Status: 410, Reason: "ExpiredToken"}, provider.DeviceGone, 0},
		{apnsfake.Fault{Status: 403, Reason: "BadCertificateEnvironment"}, provider.Retry, 0},
		{apnsfake.Fault{Status: 400, Reason: "DeviceTokenNotForTopic"}, provider.Fail, 0},
		{apnsfake.Fault{Status: 413, Reason: "PayloadTooLarge"}, provider.Fail, 0},
		{apnsfake.Fault{Status: 404, Reason: "BadPath"}, provider.Fail, 0},
	} {
		e.fake.Queue(c.fault)
		r, _ := e.send(t, notification(nil))
		if r.Verdict != c.verdict || r.Status != c.fault.Status || r.Reason != c.fault.Reason || r.RetryAfter != c.after || r.Auth != (c.fault.Status == 403) ||
			!strings.Contains(r.Message, c.fault.Reason) || r.Err != nil {
			t.Errorf("%d %s: %+v, want %v after %s", c.fault.Status, c.fault.Reason, r, c.verdict, c.after)
		}
	}
}

// A token APNs no longer knows is gone (410 Unregistered, with when).
func TestUnregistered(t *testing.T) {
	e := newEnv(t, nil)
	var told []string
	e.client.OnBadDeviceToken(func(app, token string) { told = append(told, app+" "+token) })
	e.fake.Gone(testToken)
	r, _ := e.send(t, notification(nil))
	if r.Verdict != provider.DeviceGone || r.Status != 410 || r.Reason != "Unregistered" || !strings.Contains(r.Message, " since ") {
		t.Fatalf("result %+v", r)
	}
	if len(told) != 0 {
		t.Fatalf("a 410 reported as BadDeviceToken: %q", told)
	}
}

// A token APNs refuses as BadDeviceToken (here one its other environment
// issued) fails the push and is not device gone: APNs answers a sandbox
// token sent to production that way, so dropping on it would drop every
// device of a misconfigured app. OnBadDeviceToken is told of it, with
// the app and the token.
func TestBadDeviceToken(t *testing.T) {
	e := newEnv(t, nil)
	var told []string
	e.client.OnBadDeviceToken(func(app, token string) { told = append(told, app+" "+token) })
	e.fake.OtherEnvironment(testToken)
	r, rec := e.send(t, notification(nil))
	if r.Verdict != provider.Fail || r.Status != 400 || r.Reason != BadDeviceToken || rec.Reason != BadDeviceToken ||
		!strings.Contains(r.Message, "registration is kept") || !strings.Contains(r.Message, "sandbox") {
		t.Fatalf("result %+v (the fake answered %d %s)", r, rec.Status, rec.Reason)
	}
	if len(told) != 1 || told[0] != "firefox "+testToken {
		t.Fatalf("OnBadDeviceToken told %q", told)
	}
	// Another 400 is not a bad token.
	e.fake.Queue(apnsfake.Fault{Status: 400, Reason: "BadTopic"})
	n := notification(nil)
	n.Token = strings.Repeat("b", 64)
	if r, _ := e.send(t, n); r.Verdict != provider.Fail || len(told) != 1 {
		t.Fatalf("BadTopic: %+v, told %q", r, told)
	}
}

// No answer within apns-timeout, or no answer at all, is a retry with
// status 0 and the cause, well within the timeout's reach. The cause
// names the URL but not its device token.
func TestNoAnswer(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Timeout = 500 * time.Millisecond })
	// Connect first, so that the timeout is spent waiting for the answer.
	if r, _ := e.send(t, notification(nil)); r.Verdict != provider.Sent {
		t.Fatalf("first send: %+v", r)
	}
	e.fake.Queue(apnsfake.Fault{Delay: time.Minute})
	start := time.Now()
	r, _ := e.send(t, notification(nil))
	if r.Verdict != provider.Retry || r.Status != 0 || r.Err == nil || r.Message != "timeout" {
		t.Fatalf("slow answer: %+v", r)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("send took %s with a 500ms timeout", d)
	}
	wantNoToken(t, "slow answer", r)
	e.fake.Queue(apnsfake.Fault{Reset: true})
	if r, _ = e.send(t, notification(nil)); r.Verdict != provider.Retry || r.Status != 0 || r.Err == nil {
		t.Fatalf("reset stream: %+v", r)
	}
	wantNoToken(t, "reset stream", r)
	e.fake.Close()
	if r = e.client.Send(context.Background(), notification(nil)); r.Verdict != provider.Retry || r.Status != 0 || r.Err == nil ||
		!strings.Contains(r.Err.Error(), "/3/device/"+provider.RedactedToken) {
		t.Fatalf("server gone: %+v", r)
	}
	wantNoToken(t, "server gone", r)
	var ue *url.Error
	if !errors.As(r.Err, &ue) || strings.Contains(ue.URL, testToken) {
		t.Errorf("server gone: the *url.Error %v names the token, or is not there", ue)
	}
}

// An answer that quotes the device token (a proxy's page, an unknown
// reason) gives it to no text of the result.
func TestAnswerQuotingTheToken(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.Queue(apnsfake.Fault{Status: 400, Reason: testToken})
	r, _ := e.send(t, notification(nil))
	if r.Verdict != provider.Fail || r.Reason != provider.RedactedToken {
		t.Fatalf("an answer quoting the token: %+v", r)
	}
	wantNoToken(t, "an answer quoting the token", r)
}

// wantNoToken fails when any text of r holds testToken.
func wantNoToken(t *testing.T, what string, r provider.Result) {
	t.Helper()
	text := r.Reason + " " + r.Message
	if r.Err != nil {
		text += " " + r.Err.Error()
	}
	if strings.Contains(text, testToken) {
		t.Errorf("%s: the result holds the device token: %s", what, text)
	}
}

// What cannot be sent never reaches APNs: an app that is not configured
// is our misconfiguration (Broken), an oversized payload fails, a
// registration without a token is gone.
func TestRefusedBeforeSending(t *testing.T) {
	e := newEnv(t, nil)
	n := notification(nil)
	n.AppID = "focus"
	if r := e.client.Send(context.Background(), n); r.Verdict != provider.Broken || r.Err == nil ||
		!strings.Contains(r.Message, `"focus" is not configured`) || !strings.Contains(r.Message, "firefox") {
		t.Errorf("unknown app: %+v", r)
	}
	big := notification(map[string]string{"chid": testCHID, "body": strings.Repeat("A", 4000)})
	if r := e.client.Send(context.Background(), big); r.Verdict != provider.Fail || r.Reason != "PayloadTooLarge" {
		t.Errorf("oversized: %+v", r)
	}
	if err := e.cfg.CheckData(big); !errors.Is(err, ErrPayloadTooLarge) {
		t.Errorf("CheckData of %d bytes: %v", PayloadSize(big), err)
	}
	n = notification(nil)
	n.Token = ""
	if r := e.client.Send(context.Background(), n); r.Verdict != provider.DeviceGone {
		t.Errorf("no token: %+v", r)
	}
	if c := e.fake.Count(); c != 0 {
		t.Fatalf("the fake got %d requests", c)
	}
}

// CheckData accepts a payload of exactly apns-max-data bytes and refuses
// one byte more.
func TestCheckDataBoundary(t *testing.T) {
	cfg := DefaultConfig()
	n := notification(map[string]string{"chid": testCHID, "body": ""})
	n.Data["body"] = strings.Repeat("A", cfg.MaxData-PayloadSize(n))
	if PayloadSize(n) != cfg.MaxData {
		t.Fatalf("size %d", PayloadSize(n))
	}
	if err := cfg.CheckData(n); err != nil {
		t.Fatalf("%d bytes: %v", cfg.MaxData, err)
	}
	n.Data["body"] += "A"
	if err := cfg.CheckData(n); !errors.Is(err, ErrPayloadTooLarge) || !strings.Contains(err.Error(), "1 over") {
		t.Fatalf("%d bytes: %v", cfg.MaxData+1, err)
	}
}

// The provider never has more than apns-concurrency sends in flight,
// however many goroutines call Send; and the sender's pool is exactly
// that size.
func TestConcurrencyBound(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Concurrency = 3 })
	release := e.fake.Hold()
	defer release()
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			if r := e.client.Send(context.Background(), notification(nil)); r.Verdict != provider.Sent {
				t.Errorf("%+v", r)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.fake.WaitCount(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n := e.fake.InFlight(); n != 3 {
		t.Fatalf("%d in flight while held, want 3", n)
	}
	release()
	wg.Wait()
	if m := e.fake.MaxInFlight(); m != 3 {
		t.Fatalf("at most %d in flight, want 3", m)
	}
	for _, c := range []struct {
		rate float64
		conc int
	}{{500, 100}, {300, 100}, {7, 3}, {1000, 1}, {333.3, 77}} {
		cfg := DefaultConfig()
		cfg.Rate, cfg.Concurrency = c.rate, c.conc
		if p := cfg.Limits().PoolSize(); p != c.conc || cfg.Limits().Dedup {
			t.Errorf("rate %v concurrency %d: pool %d", c.rate, c.conc, p)
		}
	}
}

// When APNs allows fewer streams per connection than apns-concurrency,
// the client opens more connections rather than queueing behind one.
func TestFewStreamsPerConnection(t *testing.T) {
	e := newEnvWith(t, apnsfake.Options{Topic: testTopic, MaxConcurrentStreams: 2}, func(c *Config) { c.Concurrency = 6 })
	release := e.fake.Hold()
	defer release()
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if r := e.client.Send(context.Background(), notification(nil)); r.Verdict != provider.Sent {
				t.Errorf("%+v", r)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.fake.WaitCount(ctx, 6); err != nil {
		t.Fatalf("%v (%d connections)", err, e.fake.Conns())
	}
	release()
	wg.Wait()
	if c := e.fake.Conns(); c < 3 {
		t.Fatalf("6 streams at once over %d connections of 2 streams", c)
	}
}

// Bad keys and certificates stop New with an error naming the app, and
// never quoting the key.
func TestBadCredentials(t *testing.T) {
	f := startFake(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384DER, _ := x509.MarshalPKCS8PrivateKey(p384)
	p384PEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p384DER}))
	certPEM, _, err := f.IssueClientCert("x")
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, _ := f.IssueClientCert("y")
	for _, c := range []struct {
		name string
		app  map[string]any
		want string
	}{
		{"missing file", map[string]any{"key": filepath.Join(dir, "nope.p8")}, "nope.p8"},
		{"not PEM", map[string]any{"key": write("junk.p8", []byte("not a key"))}, "no PEM block"},
		{"RSA", map[string]any{"key": write("rsa.p8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER}))}, "P-256"},
		{"P-384 inline", map[string]any{"key": p384PEM}, "P-256"},
		{"certificate", map[string]any{"key": string(certPEM)}, `"CERTIFICATE" is not a private key`},
		{"cert with another key", map[string]any{"cert": string(certPEM), "cert_key": string(otherKey), "key_id": nil, "team_id": nil}, "cert and cert_key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := map[string]any{"topic": testTopic, "endpoint": f.URL(), "key_id": "ABCDEFGHIJ", "team_id": "KLMNOPQRST"}
			for k, v := range c.app {
				if v == nil {
					delete(app, k)
				} else {
					app[k] = v
				}
			}
			_, err := New(baseConfig(t, f, map[string]map[string]any{"firefox": app}))
			if err == nil || !strings.Contains(err.Error(), `app "firefox"`) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming the app and %q", err, c.want)
			}
			if strings.Contains(err.Error(), "BEGIN") || strings.Contains(err.Error(), p384PEM[40:80]) {
				t.Fatalf("error quotes key material: %v", err)
			}
		})
	}
	cfg := baseConfig(t, f, nil)
	cfg.CAFile = write("ca.pem", []byte("nothing"))
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "apns-ca-file") {
		t.Fatalf("CA file without certificates: %v", err)
	}
}

func TestParseApps(t *testing.T) {
	apps, err := ParseApps(`{"firefox": {"key": "/k.p8", "key_id": "K", "team_id": "T"},
		"beta": {"endpoint": "sandbox", "cert": "/c.pem", "key": "/c.key"},
		"dev": {"sandbox": true, "topic": "org.mozilla.ios.Fennec", "cert": "/c.pem", "cert_key": "/k.pem"},
		"test": {"endpoint": "https://127.0.0.1:8443/", "key": "/k.p8", "key_id": "K", "team_id": "T"}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]App{
		"firefox": {Topic: "com.mozilla.org.firefox", Endpoint: ProductionURL, Key: "/k.p8", KeyID: "K", TeamID: "T"},
		"beta":    {Topic: "com.mozilla.org.beta", Endpoint: SandboxURL, Sandbox: true, Cert: "/c.pem", CertKey: "/c.key"},
		"dev":     {Topic: "org.mozilla.ios.Fennec", Endpoint: SandboxURL, Sandbox: true, Cert: "/c.pem", CertKey: "/k.pem"},
		"test":    {Topic: "com.mozilla.org.test", Endpoint: "https://127.0.0.1:8443", Key: "/k.p8", KeyID: "K", TeamID: "T"},
	}
	for id, w := range want {
		if apps[id] != w {
			t.Errorf("%s: %+v\nwant %+v", id, apps[id], w)
		}
	}
	if len(apps) != len(want) {
		t.Errorf("%d apps", len(apps))
	}
	if s := apps["firefox"].String(); strings.Contains(s, "/k.p8") {
		t.Errorf("String shows the key: %s", s)
	}
	for _, bad := range []string{
		`[]`, `{"a": 1}`, `{"a": {}}`, `{"": {"key": "k", "key_id": "K", "team_id": "T"}}`,
		`{"a b": {"key": "k", "key_id": "K", "team_id": "T"}}`,
		`{"a": {"key": "k", "key_id": "K"}}`,
		`{"a": {"cert": "c"}}`,
		`{"a": {"cert": "c", "cert_key": "k", "team_id": "T"}}`,
		`{"a": {"endpoint": "http://x", "key": "k", "key_id": "K", "team_id": "T"}}`,
		`{"a": {"endpoint": "production", "sandbox": true, "key": "k", "key_id": "K", "team_id": "T"}}`,
		`{"a": {"topic": "a b", "key": "k", "key_id": "K", "team_id": "T"}}`,
		`{"a": {"key": "k", "key_id": "K", "team_id": "T", "colour": "red"}}`,
		`{} {}`,
	} {
		if _, err := ParseApps(bad); err == nil || !strings.HasPrefix(err.Error(), "apns-apps: ") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil || len(cfg.AppIDs()) != 0 {
		t.Fatalf("defaults: %v %v", err, cfg.AppIDs())
	}
	cfg.Apps = `{"b": {"key": "k", "key_id": "K", "team_id": "T"}, "a": {"key": "k", "key_id": "K", "team_id": "T"}}`
	if ids := cfg.AppIDs(); strings.Join(ids, ",") != "a,b" {
		t.Fatalf("AppIDs %v", ids)
	}
}

// Validate names the setting that cannot work.
func TestValidate(t *testing.T) {
	for want, change := range map[string]func(*Config){
		"apns-apps":        func(c *Config) { c.Apps = `{"a": {}}` },
		"apns-concurrency": func(c *Config) { c.Concurrency = 0 },
		"apns-max-data":    func(c *Config) { c.MaxData = 0 },
		"rate":             func(c *Config) { c.Rate = 0 },
		"timeout":          func(c *Config) { c.Timeout = 0 },
	} {
		cfg := DefaultConfig()
		change(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted it", want)
		}
	}
}

// The registration's "aps" (carried in the data under aps.DataKey) gives the
// alert as autopush-rs derives it: its title, subtitle, body,
// title_loc_key, title_loc_args, action_loc_key, loc_key, loc_args and
// launch_image replace the default alert's, mutable-content stays 1,
// other keys are ignored; the "aps" text itself is never sent. On the
// wire, byte for byte.
func TestAPSFromRegistration(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct{ name, aps, alert string }{
		{"none", "", `{"loc-key":"SentTab.NoTabArrivingNotification.body","title-loc-key":"SentTab.NoTabArrivingNotification.title"}`},
		{"every alert field",
			`{"title":"New tab","subtitle":"from your phone","body":"b","title_loc_key":"T.key","title_loc_args":["x"],` +
				`"action_loc_key":"A.key","loc_key":"L.key","loc_args":["a","b"],"launch_image":"i.png","mutable-content":0}`,
			`{"action-loc-key":"A.key","body":"b","launch-image":"i.png","loc-args":["a","b"],"loc-key":"L.key",` +
				`"subtitle":"from your phone","title":"New tab","title-loc-args":["x"],"title-loc-key":"T.key"}`},
		{"ignored keys", `{"badge":3,"sound":"ping","alert":{"title":"x"},"title-loc-key":"kebab","content-available":1}`,
			`{"loc-key":"SentTab.NoTabArrivingNotification.body","title-loc-key":"SentTab.NoTabArrivingNotification.title"}`},
		{"empty values", `{"title":"","loc_args":[]}`,
			`{"loc-args":[],"loc-key":"SentTab.NoTabArrivingNotification.body","title":"","title-loc-key":"SentTab.NoTabArrivingNotification.title"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := map[string]string{"chid": testCHID}
			if c.aps != "" {
				data[aps.DataKey] = c.aps
			}
			r, rec := e.send(t, notification(data))
			want := `{"aps":{"alert":` + c.alert + `,"mutable-content":1},"chid":"` + testCHID + `","ver":"` + testID + `"}`
			if r.Verdict != provider.Sent || string(rec.Body) != want {
				t.Fatalf("%+v, body\n%s\nwant\n%s", r, rec.Body, want)
			}
			if PayloadSize(notification(data)) != len(want) {
				t.Fatalf("PayloadSize %d, sent %d", PayloadSize(notification(data)), len(want))
			}
		})
	}
	// An "aps" no alert derives from (stored before the registration API
	// checked it) fails the push unsent, naming the field.
	before := e.fake.Count()
	for _, bad := range []string{`{"title":5}`, `{"loc_args":["a",null]}`, `{"body":null}`, `{"mutable-content":"1"}`, `{"mutable-content":1.5}`, `[1]`} {
		r := e.client.Send(context.Background(), notification(map[string]string{"chid": testCHID, aps.DataKey: bad}))
		if r.Verdict != provider.Fail || r.Reason != "InvalidApsData" || !strings.Contains(r.Message, "aps") {
			t.Errorf("aps %s: %+v", bad, r)
		}
	}
	if e.fake.Count() != before {
		t.Fatalf("pushes with an invalid aps reached APNs")
	}
}
