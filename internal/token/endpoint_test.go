package token

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/google/uuid"
)

// Interop vectors. They were made with Python's cryptography.fernet (the
// library the original Python autopush used, and the spec's reference),
// following autopush-rs's make_endpoint step by step:
// fernet.encrypt(uaid.bytes + chid.bytes [+ sha256(raw key)]).strip("="),
// with the clock and IV fixed (Fernet._encrypt_from_parts(data,
// 1700000000, bytes(range(16)))). No token minted by autopush-rs itself
// with a published key was found: its tests generate keys at run time.
const (
	testKey    = "hkclU1V37Dnp-0DMF9HLe_40Nnr8kDTYVbo2yxuylzk=" // the docs' example CRYPTO_KEY
	testOldKey = specSecret
	testUAID   = "deadbeef-0000-4000-8000-0123456789ab"
	testCHID   = "01234567-89ab-4cde-8f01-23456789abcd"
	// The VAPID public key of autopush-rs's own VAPID tests.
	testVAPIDKey  = "BM3bVjW_wuZC54alIbqjTbaBNtthriVtdZlchOyOSdbVYeYQu2i5inJdft7jUWIAy4O9xHBbY196Gf-1odb8hds"
	testVAPIDHash = "2bf07386516db938d44226beabceb379255656522d8cd2e9ee77d7aac82ca034"
	testV1        = "gAAAAABlU_EAAAECAwQFBgcICQoLDA0ODydWq5R33-kqAavCs1pvHUSDVq2A5Bu7SiOJkfIZ2PEP7-RfU2GpUrr9W5NbuavW6nI5613NKzsfdjuuSBgBc7EGcoZaD1NVdUHQJj3pnMa7"
	testV2        = "gAAAAABlU_EAAAECAwQFBgcICQoLDA0ODydWq5R33-kqAavCs1pvHUSDVq2A5Bu7SiOJkfIZ2PEPNzRUasjnbBZa2-mcJGeCV988-nRBEmUGkxJCSByGXgpylYVLsUc2ej9HwB9Ab7hGyojCqhoNVkGhaG4aWZ7vSC7D1Lptr3bq7-dRUehZOPo"
	testV1OldKey  = "gAAAAABlU_EAAAECAwQFBgcICQoLDA0OD-P-ozpM-_BA-7nx-dxd3bz2tQmUqPDeuHWwQpemqRx6UlkLubtp9kGJRQExg6h01ISJZWiB2ZYnf708hceQmgMgmfFH_egfVjCMRWHDQqH4"
	testMintTime  = 1700000000
)

// testKeys returns keys with the clock just after the vectors were
// minted and, when fixedIV, the vectors' IV.
func testKeys(t testing.TB, cryptoKey string, fixedIV bool) *Keys {
	t.Helper()
	k, err := ParseKeys(cryptoKey)
	if err != nil {
		t.Fatal(err)
	}
	k.now = func() time.Time { return time.Unix(testMintTime, 0) }
	if fixedIV {
		k.iv = zeroToF{}
	}
	return k
}

// zeroToF yields the IV 00 01 .. 0f, forever.
type zeroToF struct{}

func (zeroToF) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i % 16)
	}
	return len(p), nil
}

func testIDs() (uaid, chid [16]byte) {
	return uuid.MustParse(testUAID), uuid.MustParse(testCHID)
}

func TestParseTokenInterop(t *testing.T) {
	k := testKeys(t, testKey, false)
	uaid, chid := testIDs()

	e, err := k.ParseToken("v1", testV1)
	if err != nil || e.Version != 1 || e.UAID != uaid || e.CHID != chid || e.KeyHash != nil {
		t.Fatalf("v1: %+v, %v", e, err)
	}
	e, err = k.ParseToken("", testV1) // /wpush/{token}
	if err != nil || e.Version != 1 {
		t.Fatalf("versionless: %+v, %v", e, err)
	}
	e, err = k.ParseToken("v2", testV2)
	if err != nil || e.Version != 2 || e.UAID != uaid || e.CHID != chid || hex.EncodeToString(e.KeyHash) != testVAPIDHash {
		t.Fatalf("v2: %+v, %v", e, err)
	}
	raw, err := vapid.DecodeKey(testVAPIDKey)
	if err != nil || !e.MatchesVAPIDKey(raw) {
		t.Fatalf("v2 key: %v", err)
	}
	other := newVAPIDKey(t)
	if e.MatchesVAPIDKey(other) {
		t.Fatal("another key matches")
	}
	// Padded tokens (a client that kept the padding) decode as the
	// reference's re-padding does.
	if _, err := k.ParseToken("v2", testV2+"="); err != nil {
		t.Fatal("padded v2:", err)
	}
}

// MakeEndpoint, with the vectors' clock and IV, reproduces them exactly:
// same plaintext layout, same encryption, same encoding.
func TestMakeEndpointInterop(t *testing.T) {
	k := testKeys(t, testKey, true)
	uaid, chid := testIDs()
	got, err := k.MakeEndpoint("https://updates.push.example.com", uaid, chid, nil)
	if want := "https://updates.push.example.com/wpush/v1/" + testV1; err != nil || got != want {
		t.Fatalf("v1\n got %s\nwant %s (%v)", got, want, err)
	}
	raw, _ := vapid.DecodeKey(testVAPIDKey)
	got, err = k.MakeEndpoint("https://updates.push.example.com", uaid, chid, raw)
	if want := "https://updates.push.example.com/wpush/v2/" + testV2; err != nil || got != want {
		t.Fatalf("v2\n got %s\nwant %s (%v)", got, want, err)
	}
}

// Production endpoints of Mozilla's service, published in public code, all
// have these shapes (checked while writing this; the tokens themselves are
// live capability URLs, so they are not copied here): 140 characters for v1
// and 183 for v2, unpadded, raw version byte 0x80.
func TestEndpointTokenShape(t *testing.T) {
	k := testKeys(t, GenerateKey(), false)
	uaid, chid := testIDs()
	for _, c := range []struct {
		key  []byte
		path string
		n    int
	}{{nil, "/wpush/v1/", 140}, {newVAPIDKey(t), "/wpush/v2/", 183}} {
		u, err := k.MakeEndpoint("https://push.example.com/", uaid, chid, c.key)
		if err != nil {
			t.Fatal(err)
		}
		tok := u[strings.LastIndexByte(u, '/')+1:]
		if !strings.Contains(u, c.path) || len(tok) != c.n || !strings.HasPrefix(tok, "gAAAAA") || strings.Contains(tok, "=") {
			t.Errorf("%s: %d chars", u, len(tok))
		}
	}
}

func TestEndpointRoundTrip(t *testing.T) {
	k, _ := ParseKeys(GenerateKey())
	for range 50 {
		var uaid, chid [16]byte
		rand.Read(uaid[:])
		rand.Read(chid[:])
		u, err := k.MakeEndpoint("http://localhost:8082", uaid, chid, nil)
		if err != nil {
			t.Fatal(err)
		}
		ver, tok := splitEndpoint(t, u)
		e, err := k.ParseToken(ver, tok)
		if err != nil || e.UAID != uaid || e.CHID != chid || e.Version != 1 {
			t.Fatalf("v1 %s: %+v %v", u, e, err)
		}
		key := newVAPIDKey(t)
		u, err = k.MakeEndpoint("http://localhost:8082", uaid, chid, key)
		if err != nil {
			t.Fatal(err)
		}
		ver, tok = splitEndpoint(t, u)
		e, err = k.ParseToken(ver, tok)
		h := vapid.HashKey(key)
		if err != nil || e.UAID != uaid || e.CHID != chid || e.Version != 2 || !bytes.Equal(e.KeyHash, h[:]) || !e.MatchesVAPIDKey(key) {
			t.Fatalf("v2 %s: %+v %v", u, e, err)
		}
	}
}

func splitEndpoint(t *testing.T, u string) (version, token string) {
	t.Helper()
	i := strings.Index(u, "/wpush/")
	if i < 0 {
		t.Fatalf("no /wpush/ in %s", u)
	}
	version, token, _ = strings.Cut(u[i+len("/wpush/"):], "/")
	return version, token
}

func newVAPIDKey(t testing.TB) []byte {
	t.Helper()
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv.PublicKey().Bytes()
}

func TestParseTokenErrors(t *testing.T) {
	k := testKeys(t, testKey, false)
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	for _, c := range []struct {
		name, version, token string
		want                 *EndpointError
	}{
		{"api version", "v3", testV1, ErrAPIVersion},
		{"v1 token under v2", "v2", testV1, ErrEndpointMismatch},
		{"v2 token under v1", "v1", testV2, ErrEndpointMismatch},
		{"v2 token, no version", "", testV2, ErrEndpointMismatch},
		{"standard alphabet", "v1", strings.ReplaceAll(strings.ReplaceAll(testV1, "_", "/"), "-", "+"), ErrEndpointEncoding},
		{"bad character", "v1", testV1[:70] + "!" + testV1[71:], ErrEndpointEncoding},
		{"empty", "v1", "", ErrEndpointLength},
		{"truncated", "v1", testV1[:136], ErrEndpointLength},
		{"too long", "v1", testV1 + testV1, ErrEndpointLength},
		{"tampered ciphertext", "v1", flip(testV1, 60), ErrEndpointDecrypt},
		{"tampered mac", "v1", flip(testV1, 130), ErrEndpointDecrypt},
		{"tampered timestamp", "v1", flip(testV1, 8), ErrEndpointDecrypt},
		{"unknown key", "v1", testV1OldKey, ErrEndpointDecrypt},
	} {
		e, err := k.ParseToken(c.version, c.token)
		if err != c.want {
			t.Errorf("%s: %+v, %v; want %v", c.name, e, err, c.want)
		}
	}
	// Every kind answers as the reference does: 404 errno 102.
	for _, err := range []*EndpointError{ErrAPIVersion, ErrEndpointEncoding, ErrEndpointLength, ErrEndpointDecrypt, ErrEndpointMismatch} {
		if h := err.HTTPError(); h.Status != 404 || h.Errno != errno.InvalidEndpoint {
			t.Errorf("%v: %+v", err, h)
		}
		if !errors.Is(err, err) {
			t.Error("errors.Is")
		}
	}
	if ErrAPIVersion.HTTPError().Message != "Invalid API version" || ErrEndpointDecrypt.HTTPError().Message != "Invalid token" {
		t.Error("messages")
	}
}

// A token from the future (a node whose clock runs ahead) is refused, as
// the reference's fernet crate refuses it.
func TestParseTokenClockSkew(t *testing.T) {
	k := testKeys(t, testKey, false)
	k.now = func() time.Time { return time.Unix(testMintTime-61, 0) }
	if _, err := k.ParseToken("v1", testV1); err != ErrEndpointDecrypt {
		t.Fatal(err)
	}
	k.now = func() time.Time { return time.Unix(testMintTime+10*365*86400, 0) }
	if _, err := k.ParseToken("v1", testV1); err != nil {
		t.Fatal("endpoints do not expire:", err)
	}
}

// Key rotation: a token made with the old key still parses once the old
// key is second; a key not in CRYPTO_KEY fails.
func TestParseTokenRotation(t *testing.T) {
	uaid, chid := testIDs()
	rotated := testKeys(t, testKey+","+testOldKey, false)
	e, err := rotated.ParseToken("v1", testV1OldKey)
	if err != nil || e.UAID != uaid || e.CHID != chid {
		t.Fatalf("old key second: %+v %v", e, err)
	}
	if _, err := rotated.ParseToken("v1", testV1); err != nil {
		t.Fatal("new key first:", err)
	}
	// New endpoints use the first key only.
	u, _ := rotated.MakeEndpoint("http://x", uaid, chid, nil)
	_, tok := splitEndpoint(t, u)
	oldOnly := testKeys(t, testOldKey, false)
	if _, err := oldOnly.ParseToken("v1", tok); err != ErrEndpointDecrypt {
		t.Fatal("made with the second key:", err)
	}
}

func TestMakeEndpointBaseURL(t *testing.T) {
	k, _ := ParseKeys(GenerateKey())
	uaid, chid := testIDs()
	// Url::join("wpush/") semantics, host normalised as the reference's url crate does.
	for base, want := range map[string]string{
		"http://localhost:8082":            "http://localhost:8082/wpush/v1/",
		"https://Push.Example.COM/":        "https://push.example.com/wpush/v1/",
		"https://push.example.com:443":     "https://push.example.com/wpush/v1/",
		"http://push.example.com:80/":      "http://push.example.com/wpush/v1/",
		"https://push.example.com/prefix/": "https://push.example.com/prefix/wpush/v1/",
		"https://push.example.com/prefix":  "https://push.example.com/wpush/v1/",
		"https://[::1]:8443/":              "https://[::1]:8443/wpush/v1/",
	} {
		u, err := k.MakeEndpoint(base, uaid, chid, nil)
		if err != nil || !strings.HasPrefix(u, want) || strings.Count(u, "/") != strings.Count(want, "/") {
			t.Errorf("%s: %s, %v; want prefix %s", base, u, err, want)
		}
	}
	for _, base := range []string{"", "push.example.com", "/wpush", "ftp://x/", "https://user:pw@x/", "http://"} {
		if u, err := k.MakeEndpoint(base, uaid, chid, nil); err == nil {
			t.Errorf("%q: %s", base, u)
		}
	}
}

func TestMakeEndpointBadVAPIDKey(t *testing.T) {
	k, _ := ParseKeys(GenerateKey())
	uaid, chid := testIDs()
	good := newVAPIDKey(t)
	offCurve := append([]byte(nil), good...)
	offCurve[64] ^= 1
	for name, key := range map[string][]byte{
		"empty":      {},
		"compressed": append([]byte{2}, good[1:33]...),
		"off curve":  offCurve,
		"no prefix":  append([]byte{5}, good[1:]...),
	} {
		if u, err := k.MakeEndpoint("http://x", uaid, chid, key); err == nil {
			t.Errorf("%s: %s", name, u)
		}
	}
}

// The key binding of v2 endpoints, checked against a verified VAPID
// authorization.
func TestVAPIDCheckEndpoint(t *testing.T) {
	const aud = "https://push.example.net"
	now := time.Unix(1_700_000_000, 0)
	s, err := pushcrypto.NewVAPIDSigner("mailto:ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pushcrypto.NewVAPIDSigner("")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Token(aud, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v := &vapid.Verifier{Now: func() time.Time { return now }}
	res, err := v.Verify(s.Authorization(tok), "", aud)
	if err != nil {
		t.Fatal(err)
	}
	h := vapid.HashKey(s.PublicKey())
	ho := vapid.HashKey(other.PublicKey())
	if err := (&Endpoint{Version: 1}).CheckVAPID(&res); err != nil {
		t.Errorf("v1: %v", err)
	}
	if err := (&Endpoint{Version: 2, KeyHash: h[:]}).CheckVAPID(&res); err != nil {
		t.Errorf("v2, its key: %v", err)
	}
	err = (&Endpoint{Version: 2, KeyHash: ho[:]}).CheckVAPID(&res)
	var ve *vapid.Error
	if !errors.As(err, &ve) || ve.Rule != vapid.RuleKeyMismatch {
		t.Fatalf("v2, other key: %v", err)
	}
	if he := ve.HTTPError(); he.Status != 401 || he.Errno != 109 {
		t.Errorf("%+v", he)
	}
}

func FuzzParseToken(f *testing.F) {
	f.Add("v1", testV1)
	f.Add("v2", testV2)
	f.Add("", testV1OldKey)
	f.Add("v2", testV2+"=")
	f.Add("v1", "gAAAAA")
	f.Add("v3", "")
	k := testKeys(f, testKey+","+testOldKey, false)
	f.Fuzz(func(t *testing.T, version, token string) {
		e, err := k.ParseToken(version, token)
		if err != nil {
			if _, ok := err.(*EndpointError); !ok {
				t.Fatalf("error type %T", err)
			}
			return
		}
		// Accepted: it re-encodes and parses back to the same thing.
		if e.Version == 2 {
			// Only the hash is known; re-seal the same plaintext directly.
			plain := append(append(append([]byte(nil), e.UAID[:]...), e.CHID[:]...), e.KeyHash...)
			tok, err := k.Encrypt(plain)
			if err != nil {
				t.Fatal(err)
			}
			e2, err := k.ParseToken("v2", strings.TrimRight(tok, "="))
			if err != nil || e2.UAID != e.UAID || e2.CHID != e.CHID || !bytes.Equal(e2.KeyHash, e.KeyHash) {
				t.Fatalf("v2 round trip: %+v %v", e2, err)
			}
			return
		}
		u, err := k.MakeEndpoint("http://x/", e.UAID, e.CHID, nil)
		if err != nil {
			t.Fatal(err)
		}
		ver, tok := splitEndpoint(t, u)
		e2, err := k.ParseToken(ver, tok)
		if err != nil || e2.UAID != e.UAID || e2.CHID != e.CHID || e2.Version != 1 {
			t.Fatalf("v1 round trip: %+v %v", e2, err)
		}
	})
}

func BenchmarkParseToken(b *testing.B) {
	for _, c := range []struct{ version, token string }{{"v1", testV1}, {"v2", testV2}} {
		b.Run(c.version, func(b *testing.B) {
			k := testKeys(b, testKey, false)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := k.ParseToken(c.version, c.token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The old key second: every token made with it costs one more MAC.
	b.Run("v1-second-key", func(b *testing.B) {
		k := testKeys(b, testKey+","+testOldKey, false)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := k.ParseToken("v1", testV1OldKey); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMakeEndpoint(b *testing.B) {
	uaid, chid := testIDs()
	key, _ := vapid.DecodeKey(testVAPIDKey)
	for _, c := range []struct {
		name string
		key  []byte
	}{{"v1", nil}, {"v2", key}} {
		b.Run(c.name, func(b *testing.B) {
			k, _ := ParseKeys(testKey)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := k.MakeEndpoint("https://push.example.com/", uaid, chid, c.key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
