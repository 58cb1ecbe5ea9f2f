package apitier

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/vapid"
)

// TestVAPID covers what this tier decides (the verifier's own rules are
// tested in internal/vapid): when VAPID is checked, v2 key binding,
// the audience, the clock, and the answers.
func TestVAPID(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	now := time.Now()
	s.vapid.Now = func() time.Time { return now }
	key, other := newVAPIDKey(t), newVAPIDKey(t)
	v1 := subscribe(t, s, "", nil)
	v2 := subscribe(t, s, "", key.pub)
	if !strings.HasPrefix(v2.path, "/wpush/v2/") {
		t.Fatalf("v2 endpoint %s", v2.path)
	}
	aud := testEndpointURL
	token := func(k vapidKey, claims map[string]any) string { return k.jwt(t, claims) }
	valid := map[string]any{"aud": aud, "exp": now.Add(time.Hour).Unix(), "sub": "mailto:ops@example.com"}

	ok := func(r response) { t.Helper(); wantCreated(t, s, r, "60") }
	refused := func(r response, rule string) {
		t.Helper()
		m := wantError(t, r, http.StatusUnauthorized, errno.InvalidAuth)
		if !strings.Contains(m["message"].(string), "("+rule+")") {
			t.Fatalf("message %q does not name rule %q", m["message"], rule)
		}
		if r.header.Get("WWW-Authenticate") == "" {
			t.Fatalf("401 without WWW-Authenticate")
		}
	}
	post := func(path string, kv ...string) response {
		return perform(s, "POST", path, nil, hdr(append([]string{"TTL", "60"}, kv...)...)...)
	}

	// v1: VAPID optional, but checked when sent.
	ok(post(v1.path))
	ok(post(v1.path, "Authorization", "vapid t="+token(key, valid)+",k="+key.b64))
	refused(post(v1.path, "Authorization", "vapid t="+token(key, valid)+",k="+other.b64), vapid.RuleSignature)
	refused(post(v1.path, "Authorization", "Basic dXNlcjpwYXNz"), vapid.RuleScheme)

	// v2: VAPID required, with the subscription's key.
	refused(post(v2.path), vapid.RuleHeader)
	ok(post(v2.path, "Authorization", "vapid t="+token(key, valid)+", k="+key.b64))
	refused(post(v2.path, "Authorization", "vapid t="+token(other, valid)+", k="+other.b64), vapid.RuleKeyMismatch)
	// The drafts' form: WebPush <jwt> with the key in Crypto-Key.
	ok(post(v2.path, "Authorization", "WebPush "+token(key, valid), "Crypto-Key", "p256ecdsa="+key.b64))
	refused(post(v2.path, "Authorization", "WebPush "+token(other, valid), "Crypto-Key", "p256ecdsa="+other.b64), vapid.RuleKeyMismatch)

	// aud is this service's origin; exp within 24 hours, not past.
	claims := func(k string, v any) map[string]any {
		c := map[string]any{}
		for k, v := range valid {
			c[k] = v
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	refused(post(v2.path, "Authorization", "vapid t="+token(key, claims("aud", "https://push.example.com"))+",k="+key.b64), vapid.RuleAud)
	ok(post(v2.path, "Authorization", "vapid t="+token(key, claims("aud", aud+"/"))+",k="+key.b64))
	refused(post(v2.path, "Authorization", "vapid t="+token(key, claims("exp", nil))+",k="+key.b64), vapid.RuleExpMissing)
	refused(post(v2.path, "Authorization", "vapid t="+token(key, claims("exp", now.Add(-time.Hour).Unix()))+",k="+key.b64), vapid.RuleExpPast)
	refused(post(v2.path, "Authorization", "vapid t="+token(key, claims("exp", now.Add(25*time.Hour).Unix()))+",k="+key.b64), vapid.RuleExpFar)

	// A token accepted now is refused once the clock passes its exp (the
	// cache does not keep it alive).
	tok := token(key, claims("exp", now.Add(10*time.Minute).Unix()))
	ok(post(v2.path, "Authorization", "vapid t="+tok+",k="+key.b64))
	now = now.Add(time.Hour)
	refused(post(v2.path, "Authorization", "vapid t="+tok+",k="+key.b64), vapid.RuleExpPast)

	// Nothing refused was stored.
	if n := len(stored(t, s, v2.uaid)); n != 4 {
		t.Fatalf("v2 subscription has %d stored messages, want the 4 accepted", n)
	}
}

// TestVAPIDBeforeStorage: a v2 push without valid VAPID is refused
// before any storage read, even for a user that no longer exists.
func TestVAPIDBeforeStorage(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	key := newVAPIDKey(t)
	v2 := subscribe(t, s, "", key.pub)
	if err := s.store.DropUser(t.Context(), v2.uaid); err != nil {
		t.Fatal(err)
	}
	wantError(t, perform(s, "POST", v2.path, nil, hdr("TTL", "60")...), 401, errno.InvalidAuth)
	wantError(t, perform(s, "POST", v2.path, nil, hdr("TTL", "60", "Authorization", key.auth(t, testEndpointURL))...), 410, errno.InvalidSubscription)
}

// TestVAPIDFormerAud: after endpoint-url moved, a token signed for an
// origin vapid-former-aud names is accepted (and counted), one for any
// other origin is still refused (aud), and without the setting the
// former origin is refused too; the key binding holds either way.
func TestVAPIDFormerAud(t *testing.T) {
	const moved = "https://push.example.com"
	key, other := newVAPIDKey(t), newVAPIDKey(t)
	post := func(s *Server, path, aud string, k vapidKey) response {
		return perform(s, "POST", path, nil, hdr("TTL", "60", "Authorization", k.auth(t, aud))...)
	}
	s := newServer(t, newStore(t), func(c *Config) {
		c.EndpointURL, c.VAPIDFormerAud = moved, []string{testEndpointURL + "/", "https://old.example.com:8443"}
	})
	v2 := subscribe(t, s, "", key.pub)
	wantCreated(t, s, post(s, v2.path, moved, key), "60")
	wantCreated(t, s, post(s, v2.path, testEndpointURL, key), "60")
	wantCreated(t, s, post(s, v2.path, "https://OLD.example.com:8443", key), "60")
	if got := s.metrics.vapidFormerAud.Get(); got != 2 {
		t.Fatalf("former-aud counter %d, want 2", got)
	}
	for aud, rule := range map[string]string{"https://elsewhere.example.com": vapid.RuleAud, "http://push.example.com": vapid.RuleAud} {
		m := wantError(t, post(s, v2.path, aud, key), http.StatusUnauthorized, errno.InvalidAuth)
		if !strings.Contains(m["message"].(string), "("+rule+")") {
			t.Fatalf("aud %s: %q, want rule %s", aud, m["message"], rule)
		}
	}
	wantError(t, post(s, v2.path, testEndpointURL, other), http.StatusUnauthorized, errno.InvalidAuth)

	plain := newServer(t, newStore(t), func(c *Config) { c.EndpointURL = moved })
	v2 = subscribe(t, plain, "", key.pub)
	wantError(t, post(plain, v2.path, testEndpointURL, key), http.StatusUnauthorized, errno.InvalidAuth)

	bad := testConfig()
	bad.VAPIDFormerAud = []string{"ftp://old.example.com"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "vapid-former-aud") {
		t.Fatalf("a former aud that is not an http(s) URL: %v", err)
	}
}
