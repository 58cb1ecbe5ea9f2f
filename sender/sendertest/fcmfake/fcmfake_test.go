package fcmfake

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func startFake(t *testing.T) (*Fake, *Account) {
	t.Helper()
	f, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	a, err := f.NewAccount("proj-1")
	if err != nil {
		t.Fatal(err)
	}
	return f, a
}

type claims struct {
	jwt.RegisteredClaims
	Scope string `json:"scope"`
}

func validClaims(f *Fake, a *Account) claims {
	now := time.Now()
	return claims{RegisteredClaims: jwt.RegisteredClaims{
		Issuer: a.ClientEmail, Audience: jwt.ClaimStrings{f.TokenURL()},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
	}, Scope: Scope}
}

func sign(t *testing.T, c claims, key *rsa.PrivateKey) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func grant(t *testing.T, f *Fake, grantType, assertion string) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(f.TokenURL(), url.Values{"grant_type": {grantType}, "assertion": {assertion}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

const bearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// TestTokenEndpoint: only an RS256 assertion signed by a known account's
// key, for this endpoint, asking FCM's scope and short-lived, gets a
// token.
func TestTokenEndpoint(t *testing.T) {
	f, a := startFake(t)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims(f, a)).SignedString([]byte("k"))
	for _, tc := range []struct {
		name      string
		grantType string
		assertion func() string
	}{
		{"other key", bearerGrant, func() string { return sign(t, validClaims(f, a), other) }},
		{"unknown issuer", bearerGrant, func() string {
			c := validClaims(f, a)
			c.Issuer = "who@x.iam.gserviceaccount.com"
			return sign(t, c, a.Key)
		}},
		{"audience", bearerGrant, func() string {
			c := validClaims(f, a)
			c.Audience = jwt.ClaimStrings{"https://oauth2.googleapis.com/token"}
			return sign(t, c, a.Key)
		}},
		{"scope", bearerGrant, func() string {
			c := validClaims(f, a)
			c.Scope = "https://www.googleapis.com/auth/cloud-platform"
			return sign(t, c, a.Key)
		}},
		{"expired", bearerGrant, func() string {
			c := validClaims(f, a)
			c.IssuedAt = jwt.NewNumericDate(time.Now().Add(-2 * time.Hour))
			c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour))
			return sign(t, c, a.Key)
		}},
		{"long-lived", bearerGrant, func() string {
			c := validClaims(f, a)
			c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(3 * time.Hour))
			return sign(t, c, a.Key)
		}},
		{"hs256", bearerGrant, func() string { return hs }},
		{"garbage", bearerGrant, func() string { return "a.b.c" }},
		{"grant type", "client_credentials", func() string { return sign(t, validClaims(f, a), a.Key) }},
	} {
		status, m := grant(t, f, tc.grantType, tc.assertion())
		if status != 400 || m["error"] == nil || m["access_token"] != nil {
			t.Errorf("%s: %d %v, want 400 with an OAuth error", tc.name, status, m)
		}
	}
	if f.TokensIssued() != 0 {
		t.Fatalf("%d tokens issued to bad assertions", f.TokensIssued())
	}
	f.SetTokenLifetime(90 * time.Second)
	status, m := grant(t, f, bearerGrant, sign(t, validClaims(f, a), a.Key))
	if status != 200 || m["token_type"] != "Bearer" || m["expires_in"] != float64(90) || !strings.HasPrefix(m["access_token"].(string), "ya29.") {
		t.Fatalf("valid assertion: %d %v", status, m)
	}
	if f.TokensIssued() != 1 || f.TokenRequests() != 10 {
		t.Fatalf("issued %d of %d requests", f.TokensIssued(), f.TokenRequests())
	}
}

func post(t *testing.T, f *Fake, path, bearer, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.URL()+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSendEndpoint: a send needs a live token of the path's project and a
// well-formed message; queued answers come after those checks; every
// send is logged with its exact body.
func TestSendEndpoint(t *testing.T) {
	f, a := startFake(t)
	_, m := grant(t, f, bearerGrant, sign(t, validClaims(f, a), a.Key))
	tok := m["access_token"].(string)
	const path = "/v1/projects/proj-1/messages:send"
	ok := `{"message":{"android":{"data":{"chid":"c"},"priority":"HIGH","ttl":"60s"},"token":"r"}}`
	for _, tc := range []struct {
		name, path, bearer, body string
		want                     int
	}{
		{"ok", path, tok, ok, 200},
		{"no token", path, "", ok, 401},
		{"unknown token", path, "ya29.nope", ok, 401},
		{"other project", "/v1/projects/proj-2/messages:send", tok, ok, 403},
		{"unknown field", path, tok, `{"message":{"token":"r","apns":{}}}`, 400},
		{"no recipient", path, tok, `{"message":{"android":{}}}`, 400},
		{"bad ttl", path, tok, `{"message":{"token":"r","android":{"ttl":"60"}}}`, 400},
		{"bad priority", path, tok, `{"message":{"token":"r","android":{"priority":"URGENT"}}}`, 400},
		{"too big", path, tok, `{"message":{"token":"r","android":{"data":{"b":"` + strings.Repeat("x", 4096) + `"}}}}`, 400},
	} {
		if got := post(t, f, tc.path, tc.bearer, tc.body); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	f.Queue(Answer{Status: 503, Header: http.Header{"Retry-After": {"3"}}})
	if got := post(t, f, path, "", ok); got != 401 {
		t.Fatalf("a queued answer was given before auth: %d", got)
	}
	if got := post(t, f, path, tok, ok); got != 503 {
		t.Fatalf("queued: %d", got)
	}
	f.SetGone("r")
	if got := post(t, f, path, tok, ok); got != 404 {
		t.Fatalf("gone: %d", got)
	}
	f.ExpireTokens()
	if got := post(t, f, path, tok, `{"message":{"token":"x"}}`); got != 401 {
		t.Fatalf("expired token: %d", got)
	}
	log := f.Log()
	if len(log) != 13 || f.Sends() != 13 {
		t.Fatalf("%d logged, %d counted, want 13", len(log), f.Sends())
	}
	if r := log[0]; string(r.Body) != ok || r.Status != 200 || r.Path != path || r.Header.Get("Authorization") != "Bearer "+tok {
		t.Fatalf("first send logged as %+v", r)
	}
}

func TestMaxInWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		var ts []time.Time
		for _, m := range ms {
			ts = append(ts, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return ts
	}
	for _, tc := range []struct {
		ts   []time.Time
		want int
	}{
		{nil, 0},
		{at(0), 1},
		{at(0, 999), 2},
		{at(0, 1000), 1},
		{at(0, 100, 900, 1050, 1200, 1899, 2950), 4},
	} {
		if got := MaxInWindow(tc.ts, time.Second); got != tc.want {
			t.Errorf("%v: %d, want %d", tc.ts, got, tc.want)
		}
	}
}

// FuzzCheckMessage: the fake's message check never panics, and what it
// accepts has a recipient.
func FuzzCheckMessage(f *testing.F) {
	for _, s := range []string{
		`{"message":{"android":{"data":{"chid":"c"},"priority":"HIGH","ttl":"60s"},"token":"r"}}`,
		`{"message":{"token":"r","android":{"ttl":"1.5s","collapse_key":"k"}}}`,
		`{"message":{"android":{}}}`, `{"message":null}`, `{}`, `[]`, `{"message":{"token":"r","x":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		token, problem := checkMessage(b)
		if problem == "" && token == "" {
			t.Fatalf("accepted %q without a recipient", b)
		}
		if problem != "" && token != "" {
			t.Fatalf("refused %q but returned token %q", b, token)
		}
	})
}
