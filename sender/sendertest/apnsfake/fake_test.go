package apnsfake

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func client(t *testing.T, f *Fake, cert *tls.Certificate) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(f.CAPEM()) {
		t.Fatal("CA PEM")
	}
	tc := &tls.Config{RootCAs: pool}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	var p http.Protocols
	p.SetHTTP2(true)
	tr := &http.Transport{TLSClientConfig: tc, Protocols: &p, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func sign(t *testing.T, k *Key, kid, iss string, iat time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": iss, "iat": iat.Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(k.Private)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type call struct {
	method, path, body string
	header             map[string]string
}

func do(t *testing.T, c *http.Client, f *Fake, x call) (int, string) {
	t.Helper()
	req, err := http.NewRequest(x.method, f.URL()+x.path, strings.NewReader(x.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range x.header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct {
		Reason string `json:"reason"`
	}
	json.Unmarshal(b, &a)
	if resp.Proto != "HTTP/2.0" {
		t.Fatalf("answered over %s", resp.Proto)
	}
	return resp.StatusCode, a.Reason
}

// The fake refuses what APNs refuses, with APNs's status and reason,
// and records every request with the answer it gave.
func TestChecks(t *testing.T) {
	f, err := Start(Options{Topic: "org.mozilla.ios.Firefox"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	f.AddKey(k)
	stranger, _ := NewKey()
	now := time.Now()
	good := sign(t, k, k.ID, k.TeamID, now)
	ok := map[string]string{"authorization": "bearer " + good, "apns-topic": "org.mozilla.ios.Firefox", "apns-push-type": "alert",
		"apns-priority": "10", "apns-expiration": "0"}
	with := func(k, v string) map[string]string {
		h := map[string]string{}
		for a, b := range ok {
			h[a] = b
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	c := client(t, f, nil)
	f.Gone("gone")
	f.OtherEnvironment("sandbox")
	for _, x := range []struct {
		call
		status int
		reason string
	}{
		{call{"POST", "/3/device/abc", "{}", ok}, 200, ""},
		{call{"GET", "/3/device/abc", "", ok}, 405, "MethodNotAllowed"},
		{call{"POST", "/2/device/abc", "{}", ok}, 404, "BadPath"},
		{call{"POST", "/3/device/", "{}", ok}, 400, "MissingDeviceToken"},
		{call{"POST", "/3/device/abc", "{}", with("authorization", "")}, 403, "MissingProviderToken"},
		{call{"POST", "/3/device/abc", "{}", with("authorization", "bearer junk")}, 403, "InvalidProviderToken"},
		{call{"POST", "/3/device/abc", "{}", with("authorization", "bearer "+sign(t, stranger, stranger.ID, stranger.TeamID, now))}, 403, "InvalidProviderToken"},
		{call{"POST", "/3/device/abc", "{}", with("authorization", "bearer "+sign(t, stranger, k.ID, k.TeamID, now))}, 403, "InvalidProviderToken"},
		{call{"POST", "/3/device/abc", "{}", with("authorization", "bearer "+sign(t, k, k.ID, "OTHERTEAM1", now))}, 403, "InvalidProviderToken"},
		{call{"POST", "/3/device/abc", "{}", with("authorization", "bearer "+sign(t, k, k.ID, k.TeamID, now.Add(-61*time.Minute)))}, 403, "ExpiredProviderToken"},
		{call{"POST", "/3/device/abc", "{}", with("apns-topic", "")}, 400, "MissingTopic"},
		{call{"POST", "/3/device/abc", "{}", with("apns-topic", "org.example")}, 400, "DeviceTokenNotForTopic"},
		{call{"POST", "/3/device/abc", "{}", with("apns-priority", "7")}, 400, "BadPriority"},
		{call{"POST", "/3/device/abc", "{}", with("apns-expiration", "soon")}, 400, "BadExpirationDate"},
		{call{"POST", "/3/device/abc", "{}", with("apns-collapse-id", strings.Repeat("c", 65))}, 400, "BadCollapseId"},
		{call{"POST", "/3/device/abc", "{}", with("apns-id", "not-a-uuid")}, 400, "BadMessageId"},
		{call{"POST", "/3/device/abc", "{}", with("apns-push-type", "shout")}, 400, "InvalidPushType"},
		{call{"POST", "/3/device/abc", "", ok}, 400, "PayloadEmpty"},
		{call{"POST", "/3/device/abc", strings.Repeat("x", 4097), ok}, 413, "PayloadTooLarge"},
		{call{"POST", "/3/device/sandbox", "{}", ok}, 400, "BadDeviceToken"},
		{call{"POST", "/3/device/gone", "{}", ok}, 410, "Unregistered"},
	} {
		status, reason := do(t, c, f, x.call)
		if status != x.status || reason != x.reason {
			t.Errorf("%s %s %v: %d %q, want %d %q", x.method, x.path, x.header, status, reason, x.status, x.reason)
		}
	}
	log := f.Log()
	if len(log) != 21 || log[0].Status != 200 || log[0].JWT != good || log[0].KeyID != k.ID || string(log[0].Body) != "{}" ||
		log[20].Status != 410 || log[20].Reason != "Unregistered" || log[20].Token != "gone" || log[19].Reason != "BadDeviceToken" {
		t.Fatalf("log %d entries: first %+v last %+v", len(log), log[0], log[len(log)-1])
	}
	total := 0
	for _, n := range f.PerSecond() {
		total += n
	}
	if total != 21 {
		t.Fatalf("per-second counts add up to %d", total)
	}
}

// Certificate auth: a client certificate issued by the fake stands in
// for a provider token; queued answers come in order, then 200.
func TestClientCertAndQueue(t *testing.T) {
	f, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cp, kp, err := f.IssueClientCert("push-cert")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(cp, kp)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, f, &cert)
	f.Queue(Fault{Status: 429, Reason: "TooManyRequests", RetryAfter: "3"}, Fault{Status: 503, Reason: "ServiceUnavailable"})
	call := call{"POST", "/3/device/abc", "{}", map[string]string{"apns-topic": "any.topic"}}
	for _, want := range []int{429, 503, 200} {
		if status, _ := do(t, c, f, call); status != want {
			t.Fatalf("status %d, want %d", status, want)
		}
	}
	if log := f.Log(); log[2].ClientCert != "push-cert" || log[2].JWT != "" {
		t.Fatalf("%+v", log[2])
	}
	if f.JWTs() != 0 {
		t.Fatalf("%d JWTs", f.JWTs())
	}
}
