package vapid

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/errno"
)

// RFC 8292 §2.4 (token) and §3.2 (key), verbatim.
const (
	rfcToken = "eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9.eyJhdWQiOiJodHRwczovL3B1c2guZXhhbXBsZS5uZXQiLCJleHAiOjE0NTM1MjM3NjgsInN1YiI6Im1haWx0bzpwdXNoQGV4YW1wbGUuY29tIn0.i3CYb7t4xfxCDquptFOepC9GAu_HLGkMlMuCGSK2rpiUfnK9ojFwDXb1JrErtmysazNjjvW2L9OkSSHzvoD1oA"
	rfcKey   = "BA1Hxzyi1RUM1b5wjxsn7nGxAszw2u61m164i3MrAIxHF6YK5h4SDYic-dRuU_RCPCfA5aq9ojSwk5Y2EmClBPs"
	rfcExp   = 1453523768
	rfcAud   = "https://push.example.net"
)

// testNow is the fixed clock of the matrix tests.
const testNow = 1_700_000_000

func clockAt(unix int64) func() time.Time {
	return func() time.Time { return time.Unix(unix, 0) }
}

type testSigner struct {
	priv *ecdsa.PrivateKey
	key  string // base64url, unpadded
	raw  []byte
}

func newTestSigner(t testing.TB) *testSigner {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := priv.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return &testSigner{priv: priv, key: base64.RawURLEncoding.EncodeToString(raw), raw: raw}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// sign makes an ES256 JWS over header and claims (JSON text as given).
func (s *testSigner) sign(t testing.TB, header, claims string) string {
	t.Helper()
	input := b64(header) + "." + b64(claims)
	h := sha256.Sum256([]byte(input))
	r, ss, err := ecdsa.Sign(rand.Reader, s.priv, h[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	ss.FillBytes(sig[32:])
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// token signs the usual header and the claims built from kv ("aud", "exp"
// and "sub" default to valid values; a nil value drops the claim).
func (s *testSigner) token(t testing.TB, kv map[string]any) string {
	t.Helper()
	claims := map[string]any{
		"aud": rfcAud,
		"exp": testNow + 3600,
		"sub": "mailto:ops@example.com",
	}
	for k, v := range kv {
		if v == nil {
			delete(claims, k)
		} else {
			claims[k] = v
		}
	}
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return s.sign(t, `{"typ":"JWT","alg":"ES256"}`, string(b))
}

func ruleOf(err error) string {
	if err == nil {
		return ""
	}
	var ve *Error
	if !errors.As(err, &ve) {
		return "not a *vapid.Error: " + err.Error()
	}
	return ve.Rule
}

func TestVAPIDRFC8292Example(t *testing.T) {
	auth := "vapid t=" + rfcToken + ", k=" + rfcKey
	v := &Verifier{Now: clockAt(rfcExp - 1)}
	res, err := v.Verify(auth, "", rfcAud)
	if err != nil {
		t.Fatalf("just before exp: %v", err)
	}
	want := Claims{Aud: rfcAud, Exp: rfcExp, Sub: "mailto:push@example.com"}
	if res.Claims != want || res.Scheme != "vapid" {
		t.Fatalf("result %+v", res)
	}
	raw, _ := DecodeKey(rfcKey)
	if string(res.PublicKey[:]) != string(raw) {
		t.Fatal("public key")
	}
	// The same token in the drafts' form.
	if _, err := (&Verifier{Now: clockAt(rfcExp - 1)}).Verify("WebPush "+rfcToken, "p256ecdsa="+rfcKey, rfcAud); err != nil {
		t.Fatalf("WebPush form: %v", err)
	}

	for _, tc := range []struct {
		now  int64
		skew time.Duration
		rule string
	}{
		{rfcExp - 1, -1, ""},
		{rfcExp, -1, RuleExpPast},
		{rfcExp + 59, 0, ""}, // within the default 60 s skew
		{rfcExp + 60, 0, RuleExpPast},
		{rfcExp + 3600, 0, RuleExpPast},
		{rfcExp - 24*3600 - 60, 0, ""},
		{rfcExp - 24*3600 - 61, 0, RuleExpFar},
		{rfcExp - 24*3600, -1, ""},
		{rfcExp - 24*3600 - 1, -1, RuleExpFar},
	} {
		v := &Verifier{Now: clockAt(tc.now), MaxSkew: tc.skew}
		if _, err := v.Verify(auth, "", rfcAud); ruleOf(err) != tc.rule {
			t.Errorf("now exp%+d skew %v: got %v, want rule %q", tc.now-rfcExp, tc.skew, err, tc.rule)
		}
	}
	// The cached token expires too.
	now := int64(rfcExp - 1)
	v = &Verifier{Now: func() time.Time { return time.Unix(now, 0) }}
	if _, err := v.Verify(auth, "", rfcAud); err != nil {
		t.Fatal(err)
	}
	now = rfcExp + 61
	if _, err := v.Verify(auth, "", rfcAud); ruleOf(err) != RuleExpPast {
		t.Fatalf("cached, after exp: %v", err)
	}
	if v.sigChecks.Load() != 1 || v.cacheLen() != 0 {
		t.Fatalf("sig checks %d, cache %d", v.sigChecks.Load(), v.cacheLen())
	}
}

func (v *Verifier) cacheLen() int {
	n := 0
	for i := range v.shards {
		v.shards[i].mu.Lock()
		n += len(v.shards[i].m)
		v.shards[i].mu.Unlock()
	}
	return n
}

func TestVAPIDMatrix(t *testing.T) {
	s := newTestSigner(t)
	other := newTestSigner(t)
	dh := newTestSigner(t).key // any point will do for dh=
	tok := s.token(t, nil)
	K := s.key
	h := strings.Split(tok, ".")

	std := strings.NewReplacer("-", "+", "_", "/").Replace(K)
	offCurve := base64.RawURLEncoding.EncodeToString(append([]byte{4}, make([]byte, 64)...))
	hs256 := func() string {
		in := b64(`{"alg":"HS256","typ":"JWT"}`) + "." + h[1]
		m := hmac.New(sha256.New, []byte(K))
		m.Write([]byte(in))
		return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}()
	claims := func(c string) string { return s.sign(t, `{"typ":"JWT","alg":"ES256"}`, c) }
	vt := func(token string) string { return "vapid t=" + token + ", k=" + K }

	for _, tc := range []struct {
		name      string
		auth, ck  string
		audience  string // "" = rfcAud
		anySub    bool
		rule      string
		wantSub   string
		wantExp   int64
		wantShape string // Scheme
	}{
		// Header forms.
		{name: "vapid", auth: vt(tok), wantShape: "vapid"},
		{name: "vapid k first", auth: "vapid k=" + K + ", t=" + tok},
		{name: "vapid no spaces", auth: "vapid t=" + tok + ",k=" + K},
		{name: "vapid loose spaces", auth: "  vapid \t t = " + tok + " ,  k = " + K + " "},
		{name: "vapid upper", auth: "VAPID T=" + tok + ", K=" + K},
		{name: "vapid quoted", auth: `vapid t="` + tok + `", k="` + K + `"`},
		{name: "vapid padded key", auth: "vapid t=" + tok + ", k=" + K + "="},
		{name: "vapid standard alphabet key", auth: "vapid t=" + tok + ", k=" + std + "="},
		{name: "vapid unknown param", auth: "vapid t=" + tok + ", x=1, k=" + K},
		{name: "WebPush", auth: "WebPush " + tok, ck: "p256ecdsa=" + K, wantShape: "webpush"},
		{name: "Bearer dh;p256ecdsa", auth: "Bearer " + tok, ck: "dh=" + dh + ";p256ecdsa=" + K, wantShape: "bearer"},
		{name: "webpush quoted, comma", auth: "webpush " + tok, ck: `keyid="p256dh";dh="` + dh + `", p256ecdsa="` + K + `="`},
		{name: "vapid ignores Crypto-Key", auth: vt(tok), ck: "p256ecdsa=" + other.key},

		{name: "no header", auth: "", rule: RuleHeader},
		{name: "blank header", auth: " \t", rule: RuleHeader},
		{name: "scheme only", auth: "vapid", rule: RuleHeader},
		{name: "WebPush only", auth: "WebPush ", ck: "p256ecdsa=" + K, rule: RuleHeader},
		{name: "Basic", auth: "Basic dXNlcjpwYXNz", rule: RuleScheme},
		{name: "vapid= glued", auth: "vapidt=" + tok, rule: RuleScheme},
		{name: "no t", auth: "vapid k=" + K, rule: RuleHeader},
		{name: "empty t", auth: "vapid t=, k=" + K, rule: RuleHeader},
		{name: "t twice", auth: "vapid t=" + tok + ", t=" + tok + ", k=" + K, rule: RuleHeader},
		{name: "k twice", auth: vt(tok) + ", k=" + K, rule: RuleHeader},
		{name: "no k", auth: "vapid t=" + tok, rule: RuleKey},
		{name: "WebPush, no Crypto-Key", auth: "WebPush " + tok, rule: RuleKey},
		{name: "WebPush, Crypto-Key without p256ecdsa", auth: "WebPush " + tok, ck: "dh=" + dh, rule: RuleKey},
		{name: "key not base64", auth: "vapid t=" + tok + ", k=" + K[:80] + "!!!!!!!", rule: RuleKey},
		{name: "key short", auth: "vapid t=" + tok + ", k=" + K[:80], rule: RuleKey},
		{name: "key off the curve", auth: "vapid t=" + tok + ", k=" + offCurve, rule: RuleKey},

		// The JWS.
		{name: "wrong key", auth: "vapid t=" + tok + ", k=" + other.key, rule: RuleSignature},
		{name: "wrong key, draft form", auth: "WebPush " + tok, ck: "p256ecdsa=" + other.key, rule: RuleSignature},
		{name: "tampered claims", auth: vt(h[0] + "." + b64(`{"aud":"https://push.example.net","exp":1700003600,"sub":"mailto:x@example.com"}`) + "." + h[2]), rule: RuleSignature},
		{name: "tampered signature", auth: vt(h[0] + "." + h[1] + "." + flipB64(h[2])), rule: RuleSignature},
		{name: "signature 66 bytes", auth: vt(h[0] + "." + h[1] + "." + h[2] + "AA"), rule: RuleSignature},
		{name: "signature zero", auth: vt(h[0] + "." + h[1] + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 64))), rule: RuleSignature},
		{name: "padded signature", auth: vt(h[0] + "." + h[1] + "." + h[2] + "==")},
		{name: "alg none", auth: vt(b64(`{"alg":"none"}`) + "." + h[1] + "."), rule: RuleAlg},
		{name: "alg HS256", auth: vt(hs256), rule: RuleAlg},
		{name: "alg ES384", auth: vt(s.sign(t, `{"alg":"ES384"}`, `{"aud":"https://push.example.net","exp":1700003600}`)), rule: RuleAlg},
		{name: "alg missing", auth: vt(s.sign(t, `{"typ":"JWT"}`, `{"aud":"https://push.example.net","exp":1700003600}`)), rule: RuleAlg},
		{name: "alg lower-case", auth: vt(s.sign(t, `{"alg":"es256"}`, `{"aud":"https://push.example.net","exp":1700003600}`)), rule: RuleAlg},
		{name: "no typ", auth: vt(s.sign(t, `{"alg":"ES256"}`, `{"aud":"https://push.example.net","exp":1700003600}`))},
		{name: "typ jwt", auth: vt(s.sign(t, `{"alg":"ES256","typ":"jwt"}`, `{"aud":"https://push.example.net","exp":1700003600}`))},
		{name: "two parts", auth: vt(h[0] + "." + h[1]), rule: RuleJWT},
		{name: "four parts", auth: vt(tok + ".x"), rule: RuleJWT},
		{name: "header not base64", auth: vt("!!." + h[1] + "." + h[2]), rule: RuleJWT},
		{name: "header not JSON", auth: vt(b64("nope") + "." + h[1] + "." + h[2]), rule: RuleJWT},
		{name: "header null", auth: vt(b64("null") + "." + h[1] + "." + h[2]), rule: RuleJWT},
		{name: "claims not base64", auth: vt(h[0] + ".!!." + h[2]), rule: RuleJWT},
		{name: "claims an array", auth: vt(claims(`[1]`)), rule: RuleJWT},
		{name: "claims null", auth: vt(claims(`null`)), rule: RuleJWT},
		{name: "claims broken JSON", auth: vt(claims(`{"aud":`)), rule: RuleJWT},
		{name: "token too long", auth: vt(s.token(t, map[string]any{"x": strings.Repeat("a", 4000)})), rule: RuleJWT},

		// aud.
		{name: "aud trailing slash", auth: vt(s.token(t, map[string]any{"aud": "https://push.example.net/"}))},
		{name: "aud upper case", auth: vt(s.token(t, map[string]any{"aud": "HTTPS://Push.Example.NET"}))},
		{name: "aud default port", auth: vt(s.token(t, map[string]any{"aud": "https://push.example.net:443"}))},
		{name: "aud a path", auth: vt(s.token(t, map[string]any{"aud": "https://push.example.net/wpush/v1/abc"})), rule: RuleAud},
		{name: "aud a query", auth: vt(s.token(t, map[string]any{"aud": "https://push.example.net?x"})), rule: RuleAud},
		{name: "aud other host", auth: vt(s.token(t, map[string]any{"aud": "https://push.example.com"})), rule: RuleAud},
		{name: "aud sub-domain", auth: vt(s.token(t, map[string]any{"aud": "https://a.push.example.net"})), rule: RuleAud},
		{name: "aud http", auth: vt(s.token(t, map[string]any{"aud": "http://push.example.net"})), rule: RuleAud},
		{name: "aud other port", auth: vt(s.token(t, map[string]any{"aud": "https://push.example.net:8443"})), rule: RuleAud},
		{name: "aud http default port", auth: vt(s.token(t, map[string]any{"aud": "https://push.example.net:80"})), rule: RuleAud},
		{name: "aud userinfo", auth: vt(s.token(t, map[string]any{"aud": "https://u@push.example.net"})), rule: RuleAud},
		{name: "aud host only", auth: vt(s.token(t, map[string]any{"aud": "push.example.net"})), rule: RuleAud},
		{name: "aud empty", auth: vt(s.token(t, map[string]any{"aud": ""})), rule: RuleAud},
		{name: "aud missing", auth: vt(s.token(t, map[string]any{"aud": nil})), rule: RuleAud},
		{name: "aud a number", auth: vt(s.token(t, map[string]any{"aud": 5})), rule: RuleAud},
		{name: "aud an array", auth: vt(s.token(t, map[string]any{"aud": []string{rfcAud}})), rule: RuleAud},
		{name: "aud null", auth: vt(claims(`{"aud":null,"exp":1700003600}`)), rule: RuleAud},
		{name: "audience with port", audience: "https://push.example.net:8443", auth: vt(s.token(t, map[string]any{"aud": "https://PUSH.example.net:8443"}))},
		{name: "audience with path and default port", audience: "https://Push.Example.Net:443/wpush/", auth: vt(tok)},
		{name: "audience http localhost", audience: "http://localhost:8082/", auth: vt(s.token(t, map[string]any{"aud": "http://localhost:8082"}))},
		{name: "audience IPv6", audience: "http://[::1]:8082", auth: vt(s.token(t, map[string]any{"aud": "http://[::1]:08082/"}))},
		{name: "audience not a URL", audience: "push.example.net", auth: vt(tok), rule: RuleAud},

		// exp.
		{name: "exp missing", auth: vt(s.token(t, map[string]any{"exp": nil})), rule: RuleExpMissing},
		{name: "exp null", auth: vt(claims(`{"aud":"https://push.example.net","exp":null}`)), rule: RuleExpMissing},
		{name: "exp a string", auth: vt(s.token(t, map[string]any{"exp": strconv.Itoa(testNow + 3600)})), rule: RuleExpMissing},
		{name: "exp true", auth: vt(s.token(t, map[string]any{"exp": true})), rule: RuleExpMissing},
		{name: "exp a fraction", auth: vt(s.token(t, map[string]any{"exp": testNow + 100.7})), wantExp: testNow + 100},
		{name: "exp an exponent", auth: vt(claims(`{"aud":"https://push.example.net","exp":1.7000036e9}`)), wantExp: 1_700_003_600},
		{name: "exp past", auth: vt(s.token(t, map[string]any{"exp": testNow - 3600})), rule: RuleExpPast},
		{name: "exp past, in skew", auth: vt(s.token(t, map[string]any{"exp": testNow - 59}))},
		{name: "exp past, skew edge", auth: vt(s.token(t, map[string]any{"exp": testNow - 60})), rule: RuleExpPast},
		{name: "exp zero", auth: vt(s.token(t, map[string]any{"exp": 0})), rule: RuleExpPast},
		{name: "exp negative huge", auth: vt(claims(`{"aud":"https://push.example.net","exp":-1e300}`)), rule: RuleExpPast},
		{name: "exp 24h", auth: vt(s.token(t, map[string]any{"exp": testNow + 86400}))},
		{name: "exp 24h + skew", auth: vt(s.token(t, map[string]any{"exp": testNow + 86400 + 60}))},
		{name: "exp 24h + skew + 1", auth: vt(s.token(t, map[string]any{"exp": testNow + 86400 + 61})), rule: RuleExpFar},
		{name: "exp far", auth: vt(s.token(t, map[string]any{"exp": testNow + 7*86400})), rule: RuleExpFar},
		{name: "exp huge", auth: vt(claims(`{"aud":"https://push.example.net","exp":1e300}`)), rule: RuleExpFar},
		{name: "exp overflows float", auth: vt(claims(`{"aud":"https://push.example.net","exp":1e999}`)), rule: RuleExpMissing},

		// sub.
		{name: "sub mailto", auth: vt(tok), wantSub: "mailto:ops@example.com"},
		{name: "sub https", auth: vt(s.token(t, map[string]any{"sub": "https://example.com/contact"})), wantSub: "https://example.com/contact"},
		{name: "sub http (web-push allows any URL)", auth: vt(s.token(t, map[string]any{"sub": "http://example.com"}))},
		{name: "sub webpush-go mailto:mailto:", auth: vt(s.token(t, map[string]any{"sub": "mailto:mailto:ops@example.com"}))},
		{name: "sub MAILTO", auth: vt(s.token(t, map[string]any{"sub": "MAILTO:ops@example.com"}))},
		{name: "sub missing", auth: vt(s.token(t, map[string]any{"sub": nil})), wantSub: ""},
		{name: "sub bare address", auth: vt(s.token(t, map[string]any{"sub": "ops@example.com"})), rule: RuleSub},
		{name: "sub other scheme", auth: vt(s.token(t, map[string]any{"sub": "tel:+15555550100"})), rule: RuleSub},
		{name: "sub empty", auth: vt(s.token(t, map[string]any{"sub": ""})), rule: RuleSub},
		{name: "sub a number", auth: vt(s.token(t, map[string]any{"sub": 5})), rule: RuleSub},
		{name: "sub null", auth: vt(claims(`{"aud":"https://push.example.net","exp":1700003600,"sub":null}`)), rule: RuleSub},
		{name: "sub bare address, AnySub", anySub: true, auth: vt(s.token(t, map[string]any{"sub": "ops@example.com"})), wantSub: "ops@example.com"},
		{name: "sub a number, AnySub", anySub: true, auth: vt(s.token(t, map[string]any{"sub": 5})), rule: RuleSub},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aud := tc.audience
			if aud == "" {
				aud = rfcAud
			}
			v := &Verifier{Now: clockAt(testNow), AnySub: tc.anySub}
			for round := 0; round < 2; round++ { // the second from the cache
				res, err := v.Verify(tc.auth, tc.ck, aud)
				if got := ruleOf(err); got != tc.rule {
					t.Fatalf("round %d: got %v, want rule %q", round, err, tc.rule)
				}
				if err != nil {
					he := err.(*Error).HTTPError()
					if he.Status != 401 || he.Errno != errno.InvalidAuth || !strings.Contains(he.Message, "("+tc.rule+")") {
						t.Fatalf("HTTPError %+v", he)
					}
					continue
				}
				if tc.wantShape != "" && res.Scheme != tc.wantShape {
					t.Errorf("scheme %q", res.Scheme)
				}
				if tc.wantSub != "" && res.Claims.Sub != tc.wantSub {
					t.Errorf("sub %q", res.Claims.Sub)
				}
				if tc.name == "sub missing" && res.Claims.Sub != "" {
					t.Errorf("sub %q", res.Claims.Sub)
				}
				if tc.wantExp != 0 && res.Claims.Exp != tc.wantExp {
					t.Errorf("exp %d", res.Claims.Exp)
				}
				if want, _ := normalizeOrigin(aud, true); res.Claims.Aud != want {
					t.Errorf("aud %q, want %q", res.Claims.Aud, want)
				}
				if string(res.PublicKey[:]) != string(s.raw) {
					t.Errorf("public key")
				}
			}
			if tc.rule == "" && v.sigChecks.Load() != 1 {
				t.Errorf("%d signature checks for two verifies", v.sigChecks.Load())
			}
		})
	}
}

func flipB64(s string) string {
	b, _ := base64.RawURLEncoding.DecodeString(s)
	b[10] ^= 1
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestVAPIDCache(t *testing.T) {
	s := newTestSigner(t)
	other := newTestSigner(t)
	now := int64(testNow)
	v := &Verifier{Now: func() time.Time { return time.Unix(now, 0) }}
	tok := s.token(t, map[string]any{"exp": testNow + 600})
	auth := "vapid t=" + tok + ", k=" + s.key

	for i := 0; i < 5; i++ {
		if _, err := v.Verify(auth, "", rfcAud); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.sigChecks.Load(); n != 1 {
		t.Fatalf("%d signature checks for one token", n)
	}
	// The same token under another key is not served from the cache.
	if _, err := v.Verify("vapid t="+tok+", k="+other.key, "", rfcAud); ruleOf(err) != RuleSignature {
		t.Fatalf("other key: %v", err)
	}
	if _, err := v.Verify("WebPush "+tok, "p256ecdsa="+other.key, rfcAud); ruleOf(err) != RuleSignature {
		t.Fatalf("other key, draft form: %v", err)
	}
	// The same key written differently is a new entry, still accepted.
	if _, err := v.Verify("vapid t="+tok+", k="+s.key+"=", "", rfcAud); err != nil {
		t.Fatal(err)
	}
	if n := v.sigChecks.Load(); n != 4 {
		t.Fatalf("%d signature checks", n)
	}
	// A cached token is still checked against the audience and the clock.
	if _, err := v.Verify(auth, "", "https://other.example"); ruleOf(err) != RuleAud {
		t.Fatalf("cached, other audience: %v", err)
	}
	now += 659
	if _, err := v.Verify(auth, "", rfcAud); err != nil {
		t.Fatalf("cached, in skew: %v", err)
	}
	now++
	if _, err := v.Verify(auth, "", rfcAud); ruleOf(err) != RuleExpPast {
		t.Fatalf("cached, expired: %v", err)
	}
	if n := v.sigChecks.Load(); n != 4 {
		t.Fatalf("%d signature checks: cache missed", n)
	}
	// A clock that goes back far enough makes exp too far again.
	now = testNow - 86400
	if _, err := v.Verify("vapid t="+tok+", k="+s.key+"=", "", rfcAud); ruleOf(err) != RuleExpFar {
		t.Fatalf("cached, clock back: %v", err)
	}

	// Cache off: every call checks the signature.
	off := &Verifier{Now: clockAt(testNow), CacheSize: -1}
	for i := 0; i < 3; i++ {
		if _, err := off.Verify(auth, "", rfcAud); err != nil {
			t.Fatal(err)
		}
	}
	if n := off.sigChecks.Load(); n != 3 {
		t.Fatalf("cache off: %d signature checks", n)
	}

	// Bounded: a small cache holds at most its size.
	small := &Verifier{Now: clockAt(testNow), CacheSize: 32}
	for i := 0; i < 300; i++ {
		tok := s.token(t, map[string]any{"jti": i})
		if _, err := small.Verify("vapid t="+tok+", k="+s.key, "", rfcAud); err != nil {
			t.Fatal(err)
		}
		if n := small.cacheLen(); n > 32 {
			t.Fatalf("cache holds %d", n)
		}
	}
	// A full shard drops its expired entries before live ones.
	clock := int64(testNow)
	two := &Verifier{Now: func() time.Time { return time.Unix(clock, 0) }, CacheSize: 2 * shardCount}
	vt := func(tok string) string { return "vapid t=" + tok + ", k=" + s.key }
	shardOf := func(tok string) byte { id := cacheID(tok, s.key); return id[0] % shardCount }
	live := s.token(t, map[string]any{"exp": clock + 3600})
	// sameShard signs tokens until one lands in live's shard.
	sameShard := func(exp int64) string {
		for i := 0; ; i++ {
			if tok := s.token(t, map[string]any{"exp": exp, "jti": i}); shardOf(tok) == shardOf(live) {
				return tok
			}
		}
	}
	dying := sameShard(clock + 10)
	for _, tok := range []string{live, dying} {
		if _, err := two.Verify(vt(tok), "", rfcAud); err != nil {
			t.Fatal(err)
		}
	}
	clock += 100
	newer := sameShard(clock + 3600)
	if _, err := two.Verify(vt(newer), "", rfcAud); err != nil {
		t.Fatal(err)
	}
	before := two.sigChecks.Load()
	for _, tok := range []string{live, newer} {
		if _, err := two.Verify(vt(tok), "", rfcAud); err != nil {
			t.Fatal(err)
		}
	}
	if two.sigChecks.Load() != before {
		t.Fatal("a live entry was evicted while an expired one was there")
	}
}

func TestVAPIDConcurrent(t *testing.T) {
	signers := []*testSigner{newTestSigner(t), newTestSigner(t)}
	type job struct {
		auth string
		ok   bool
	}
	var jobs []job
	for i := 0; i < 24; i++ {
		s := signers[i%2]
		tok := s.token(t, map[string]any{"jti": i})
		jobs = append(jobs, job{"vapid t=" + tok + ", k=" + s.key, true})
		jobs = append(jobs, job{"vapid t=" + tok + ", k=" + signers[(i+1)%2].key, false})
	}
	v := &Verifier{Now: clockAt(testNow), CacheSize: 16}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				j := jobs[(i*7+g*5)%len(jobs)]
				_, err := v.Verify(j.auth, "", rfcAud)
				if (err == nil) != j.ok {
					errs <- fmt.Errorf("job %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestVAPIDOrigin(t *testing.T) {
	for _, tc := range []struct {
		in       string
		withPath bool
		want     string
	}{
		{"https://push.example.net", false, "https://push.example.net"},
		{"https://push.example.net/", false, "https://push.example.net"},
		{"HTTPS://PUSH.example.NET:443", false, "https://push.example.net"},
		{"http://push.example.net:80/", false, "http://push.example.net"},
		{"http://push.example.net:443", false, "http://push.example.net:443"},
		{"https://push.example.net:0443", false, "https://push.example.net"},
		{"https://push.example.net:", false, "https://push.example.net"},
		{"http://[::1]:8080", false, "http://[::1]:8080"},
		{"http://[::1]", false, "http://[::1]"},
		{"https://push.example.net/wpush/", true, "https://push.example.net"},
		{"https://push.example.net?q#f", true, "https://push.example.net"},
		{"https://push.example.net/wpush/", false, ""},
		{"https://push.example.net//", false, ""},
		{"https://push.example.net#", false, ""},
		{"ftp://push.example.net", false, ""},
		{"https://", false, ""},
		{"https://:443", false, ""},
		{"https://a:b:c", false, ""},
		{"https://[::1", false, ""},
		{"https://[::1]x", false, ""},
		{"https://[]", false, ""},
		{"https://host:99999", false, ""},
		{"https://host:+1", false, ""},
		{"https://u:p@host", false, ""},
		{"https://ho st", false, ""},
		{"push.example.net", false, ""},
		{"", false, ""},
	} {
		got, ok := normalizeOrigin(tc.in, tc.withPath)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("normalizeOrigin(%q, %v) = %q, %v; want %q", tc.in, tc.withPath, got, ok, tc.want)
		}
	}
}

// FuzzParseVAPIDAuthorization: no input panics the parser or the verifier;
// what parses has a token and a key; origins normalise idempotently.
func FuzzParseVAPIDAuthorization(f *testing.F) {
	f.Add("vapid t="+rfcToken+", k="+rfcKey, "", rfcAud)
	f.Add("WebPush "+rfcToken, "dh=abc;p256ecdsa="+rfcKey, "https://push.example.net:443/")
	f.Add(`vapid k="`+rfcKey+`",t="a.b.c"`, `p256ecdsa="x",`, "http://[::1]:80")
	f.Add("Bearer a.b.c", ";;,=,p256ecdsa", "https://x/")
	f.Add("vapid t=, k=, t=", "", "")
	v := &Verifier{Now: clockAt(rfcExp - 1), CacheSize: 64}
	f.Fuzz(func(t *testing.T, authorization, cryptoKey, audience string) {
		a, err := parseAuthorization(authorization, cryptoKey)
		if err == nil && (a.token == "" || a.key == "" || a.scheme == "") {
			t.Fatalf("parsed %+v", a)
		}
		res, verr := v.Verify(authorization, cryptoKey, audience)
		if verr != nil {
			var ve *Error
			if !errors.As(verr, &ve) || ve.Rule == "" {
				t.Fatalf("error %v", verr)
			}
		} else if res.Claims.Aud == "" {
			t.Fatal("accepted without aud")
		}
		for _, withPath := range []bool{false, true} {
			if o, ok := normalizeOrigin(audience, withPath); ok {
				if o2, ok2 := normalizeOrigin(o, false); !ok2 || o2 != o {
					t.Fatalf("normalizeOrigin(%q) = %q, then %q", audience, o, o2)
				}
			}
		}
	})
}

func BenchmarkVAPIDVerifyUncached(b *testing.B) {
	s := newTestSigner(b)
	auth := "vapid t=" + s.token(b, nil) + ", k=" + s.key
	v := &Verifier{Now: clockAt(testNow), CacheSize: -1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(auth, "", rfcAud); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVAPIDVerifyCached(b *testing.B) {
	s := newTestSigner(b)
	auth := "vapid t=" + s.token(b, nil) + ", k=" + s.key
	v := &Verifier{Now: clockAt(testNow)}
	if _, err := v.Verify(auth, "", rfcAud); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(auth, "", rfcAud); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVAPIDVerifyCachedParallel(b *testing.B) {
	s := newTestSigner(b)
	auth := "vapid t=" + s.token(b, nil) + ", k=" + s.key
	v := &Verifier{Now: clockAt(testNow)}
	if _, err := v.Verify(auth, "", rfcAud); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Verify(auth, "", rfcAud); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
