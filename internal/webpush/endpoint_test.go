package webpush

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

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
	endpointTestKey    = "hkclU1V37Dnp-0DMF9HLe_40Nnr8kDTYVbo2yxuylzk=" // the docs' example CRYPTO_KEY
	endpointTestOldKey = fernetSpecSecret
	endpointTestUAID   = "deadbeef-0000-4000-8000-0123456789ab"
	endpointTestCHID   = "01234567-89ab-4cde-8f01-23456789abcd"
	// The VAPID public key of autopush-rs's own VAPID tests.
	endpointTestVAPID     = "BM3bVjW_wuZC54alIbqjTbaBNtthriVtdZlchOyOSdbVYeYQu2i5inJdft7jUWIAy4O9xHBbY196Gf-1odb8hds"
	endpointTestVAPIDHash = "2bf07386516db938d44226beabceb379255656522d8cd2e9ee77d7aac82ca034"
	endpointTestV1        = "gAAAAABlU_EAAAECAwQFBgcICQoLDA0ODydWq5R33-kqAavCs1pvHUSDVq2A5Bu7SiOJkfIZ2PEP7-RfU2GpUrr9W5NbuavW6nI5613NKzsfdjuuSBgBc7EGcoZaD1NVdUHQJj3pnMa7"
	endpointTestV2        = "gAAAAABlU_EAAAECAwQFBgcICQoLDA0ODydWq5R33-kqAavCs1pvHUSDVq2A5Bu7SiOJkfIZ2PEPNzRUasjnbBZa2-mcJGeCV988-nRBEmUGkxJCSByGXgpylYVLsUc2ej9HwB9Ab7hGyojCqhoNVkGhaG4aWZ7vSC7D1Lptr3bq7-dRUehZOPo"
	endpointTestV1OldKey  = "gAAAAABlU_EAAAECAwQFBgcICQoLDA0OD-P-ozpM-_BA-7nx-dxd3bz2tQmUqPDeuHWwQpemqRx6UlkLubtp9kGJRQExg6h01ISJZWiB2ZYnf708hceQmgMgmfFH_egfVjCMRWHDQqH4"
	endpointTestMintTime  = 1700000000
)

// endpointTestKeys returns keys with the clock just after the vectors were
// minted and, when fixedIV, the vectors' IV.
func endpointTestKeys(t testing.TB, cryptoKey string, fixedIV bool) *Keys {
	t.Helper()
	k, err := ParseKeys(cryptoKey)
	if err != nil {
		t.Fatal(err)
	}
	k.now = func() time.Time { return time.Unix(endpointTestMintTime, 0) }
	if fixedIV {
		k.iv = endpointZeroToF{}
	}
	return k
}

// endpointZeroToF yields the IV 00 01 .. 0f, forever.
type endpointZeroToF struct{}

func (endpointZeroToF) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i % 16)
	}
	return len(p), nil
}

func endpointTestIDs() (uaid, chid [16]byte) {
	return uuid.MustParse(endpointTestUAID), uuid.MustParse(endpointTestCHID)
}

func TestParseTokenInterop(t *testing.T) {
	k := endpointTestKeys(t, endpointTestKey, false)
	uaid, chid := endpointTestIDs()

	e, err := k.ParseToken("v1", endpointTestV1)
	if err != nil || e.Version != 1 || e.UAID != uaid || e.CHID != chid || e.KeyHash != nil {
		t.Fatalf("v1: %+v, %v", e, err)
	}
	e, err = k.ParseToken("", endpointTestV1) // /wpush/{token}
	if err != nil || e.Version != 1 {
		t.Fatalf("versionless: %+v, %v", e, err)
	}
	e, err = k.ParseToken("v2", endpointTestV2)
	if err != nil || e.Version != 2 || e.UAID != uaid || e.CHID != chid || hex.EncodeToString(e.KeyHash) != endpointTestVAPIDHash {
		t.Fatalf("v2: %+v, %v", e, err)
	}
	raw, err := DecodeVAPIDKey(endpointTestVAPID)
	if err != nil || !e.MatchesVAPIDKey(raw) {
		t.Fatalf("v2 key: %v", err)
	}
	other := endpointTestNewVAPIDKey(t)
	if e.MatchesVAPIDKey(other) {
		t.Fatal("another key matches")
	}
	// Padded tokens (a client that kept the padding) decode as the
	// reference's re-padding does.
	if _, err := k.ParseToken("v2", endpointTestV2+"="); err != nil {
		t.Fatal("padded v2:", err)
	}
}

// MakeEndpoint, with the vectors' clock and IV, reproduces them exactly:
// same plaintext layout, same encryption, same encoding.
func TestMakeEndpointInterop(t *testing.T) {
	k := endpointTestKeys(t, endpointTestKey, true)
	uaid, chid := endpointTestIDs()
	got, err := k.MakeEndpoint("https://updates.push.example.com", uaid, chid, nil)
	if want := "https://updates.push.example.com/wpush/v1/" + endpointTestV1; err != nil || got != want {
		t.Fatalf("v1\n got %s\nwant %s (%v)", got, want, err)
	}
	raw, _ := DecodeVAPIDKey(endpointTestVAPID)
	got, err = k.MakeEndpoint("https://updates.push.example.com", uaid, chid, raw)
	if want := "https://updates.push.example.com/wpush/v2/" + endpointTestV2; err != nil || got != want {
		t.Fatalf("v2\n got %s\nwant %s (%v)", got, want, err)
	}
}

// Production endpoints of Mozilla's service, published in public code, all
// have these shapes (checked while writing this; the tokens themselves are
// live capability URLs, so they are not copied here): 140 characters for v1
// and 183 for v2, unpadded, raw version byte 0x80.
func TestEndpointTokenShape(t *testing.T) {
	k := endpointTestKeys(t, GenerateKey(), false)
	uaid, chid := endpointTestIDs()
	for _, c := range []struct {
		key  []byte
		path string
		n    int
	}{{nil, "/wpush/v1/", 140}, {endpointTestNewVAPIDKey(t), "/wpush/v2/", 183}} {
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
		ver, tok := endpointSplit(t, u)
		e, err := k.ParseToken(ver, tok)
		if err != nil || e.UAID != uaid || e.CHID != chid || e.Version != 1 {
			t.Fatalf("v1 %s: %+v %v", u, e, err)
		}
		key := endpointTestNewVAPIDKey(t)
		u, err = k.MakeEndpoint("http://localhost:8082", uaid, chid, key)
		if err != nil {
			t.Fatal(err)
		}
		ver, tok = endpointSplit(t, u)
		e, err = k.ParseToken(ver, tok)
		h := HashVAPIDKey(key)
		if err != nil || e.UAID != uaid || e.CHID != chid || e.Version != 2 || !bytes.Equal(e.KeyHash, h[:]) || !e.MatchesVAPIDKey(key) {
			t.Fatalf("v2 %s: %+v %v", u, e, err)
		}
	}
}

func endpointSplit(t *testing.T, u string) (version, token string) {
	t.Helper()
	i := strings.Index(u, "/wpush/")
	if i < 0 {
		t.Fatalf("no /wpush/ in %s", u)
	}
	version, token, _ = strings.Cut(u[i+len("/wpush/"):], "/")
	return version, token
}

func endpointTestNewVAPIDKey(t testing.TB) []byte {
	t.Helper()
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv.PublicKey().Bytes()
}

func TestParseTokenErrors(t *testing.T) {
	k := endpointTestKeys(t, endpointTestKey, false)
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
		want                 *TokenError
	}{
		{"api version", "v3", endpointTestV1, ErrTokenAPIVersion},
		{"v1 token under v2", "v2", endpointTestV1, ErrTokenMismatch},
		{"v2 token under v1", "v1", endpointTestV2, ErrTokenMismatch},
		{"v2 token, no version", "", endpointTestV2, ErrTokenMismatch},
		{"standard alphabet", "v1", strings.ReplaceAll(strings.ReplaceAll(endpointTestV1, "_", "/"), "-", "+"), ErrTokenEncoding},
		{"bad character", "v1", endpointTestV1[:70] + "!" + endpointTestV1[71:], ErrTokenEncoding},
		{"empty", "v1", "", ErrTokenLength},
		{"truncated", "v1", endpointTestV1[:136], ErrTokenLength},
		{"too long", "v1", endpointTestV1 + endpointTestV1, ErrTokenLength},
		{"tampered ciphertext", "v1", flip(endpointTestV1, 60), ErrTokenDecrypt},
		{"tampered mac", "v1", flip(endpointTestV1, 130), ErrTokenDecrypt},
		{"tampered timestamp", "v1", flip(endpointTestV1, 8), ErrTokenDecrypt},
		{"unknown key", "v1", endpointTestV1OldKey, ErrTokenDecrypt},
	} {
		e, err := k.ParseToken(c.version, c.token)
		if err != c.want {
			t.Errorf("%s: %+v, %v; want %v", c.name, e, err, c.want)
		}
	}
	// Every kind answers as the reference does: 404 errno 102.
	for _, err := range []*TokenError{ErrTokenAPIVersion, ErrTokenEncoding, ErrTokenLength, ErrTokenDecrypt, ErrTokenMismatch} {
		if h := err.HTTPError(); h.Status != 404 || h.Errno != ErrnoInvalidEndpoint {
			t.Errorf("%v: %+v", err, h)
		}
		if !errors.Is(err, err) {
			t.Error("errors.Is")
		}
	}
	if ErrTokenAPIVersion.HTTPError().Message != "Invalid API version" || ErrTokenDecrypt.HTTPError().Message != "Invalid token" {
		t.Error("messages")
	}
}

// A token from the future (a node whose clock runs ahead) is refused, as
// the reference's fernet crate refuses it.
func TestParseTokenClockSkew(t *testing.T) {
	k := endpointTestKeys(t, endpointTestKey, false)
	k.now = func() time.Time { return time.Unix(endpointTestMintTime-61, 0) }
	if _, err := k.ParseToken("v1", endpointTestV1); err != ErrTokenDecrypt {
		t.Fatal(err)
	}
	k.now = func() time.Time { return time.Unix(endpointTestMintTime+10*365*86400, 0) }
	if _, err := k.ParseToken("v1", endpointTestV1); err != nil {
		t.Fatal("endpoints do not expire:", err)
	}
}

// Key rotation: a token made with the old key still parses once the old
// key is second; a key not in CRYPTO_KEY fails.
func TestParseTokenRotation(t *testing.T) {
	uaid, chid := endpointTestIDs()
	rotated := endpointTestKeys(t, endpointTestKey+","+endpointTestOldKey, false)
	e, err := rotated.ParseToken("v1", endpointTestV1OldKey)
	if err != nil || e.UAID != uaid || e.CHID != chid {
		t.Fatalf("old key second: %+v %v", e, err)
	}
	if _, err := rotated.ParseToken("v1", endpointTestV1); err != nil {
		t.Fatal("new key first:", err)
	}
	// New endpoints use the first key only.
	u, _ := rotated.MakeEndpoint("http://x", uaid, chid, nil)
	_, tok := endpointSplit(t, u)
	oldOnly := endpointTestKeys(t, endpointTestOldKey, false)
	if _, err := oldOnly.ParseToken("v1", tok); err != ErrTokenDecrypt {
		t.Fatal("made with the second key:", err)
	}
}

func TestMakeEndpointBaseURL(t *testing.T) {
	k, _ := ParseKeys(GenerateKey())
	uaid, chid := endpointTestIDs()
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
	uaid, chid := endpointTestIDs()
	good := endpointTestNewVAPIDKey(t)
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

func TestDecodeVAPIDKey(t *testing.T) {
	want, _ := base64.RawURLEncoding.DecodeString(endpointTestVAPID)
	std := strings.NewReplacer("-", "+", "_", "/").Replace(endpointTestVAPID)
	for _, s := range []string{
		endpointTestVAPID,
		endpointTestVAPID + "=",  // Firefox pads its applicationServerKey
		endpointTestVAPID + "==", // over-padded: autopush-rs's own test sends this
		std, std + "=",           // standard alphabet: some senders
	} {
		got, err := DecodeVAPIDKey(s)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%q: %v", s, err)
		}
	}
	if h := HashVAPIDKey(want); hex.EncodeToString(h[:]) != endpointTestVAPIDHash {
		t.Error("hash")
	}
	good := endpointTestNewVAPIDKey(t)
	offCurve := append([]byte(nil), good...)
	offCurve[64] ^= 1
	pub, _ := ecdh.P256().NewPublicKey(good)
	spki, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{
		"empty":            "",
		"short":            endpointTestVAPID[:86],
		"long":             endpointTestVAPID + "AAAA",
		"mixed alphabet":   "+" + endpointTestVAPID[1:],
		"garbage":          strings.Repeat("!", 87),
		"off curve":        base64.RawURLEncoding.EncodeToString(offCurve),
		"not uncompressed": base64.RawURLEncoding.EncodeToString(append([]byte{6}, good[1:]...)),
		"DER SPKI":         base64.RawURLEncoding.EncodeToString(spki),
		"space":            " " + endpointTestVAPID[1:],
	} {
		if got, err := DecodeVAPIDKey(s); err == nil {
			t.Errorf("%s: accepted %x", name, got)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	f.Add("v1", endpointTestV1)
	f.Add("v2", endpointTestV2)
	f.Add("", endpointTestV1OldKey)
	f.Add("v2", endpointTestV2+"=")
	f.Add("v1", "gAAAAA")
	f.Add("v3", "")
	k := endpointTestKeys(f, endpointTestKey+","+endpointTestOldKey, false)
	f.Fuzz(func(t *testing.T, version, token string) {
		e, err := k.ParseToken(version, token)
		if err != nil {
			if _, ok := err.(*TokenError); !ok {
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
		ver, tok := endpointSplit(t, u)
		e2, err := k.ParseToken(ver, tok)
		if err != nil || e2.UAID != e.UAID || e2.CHID != e.CHID || e2.Version != 1 {
			t.Fatalf("v1 round trip: %+v %v", e2, err)
		}
	})
}

func FuzzDecodeVAPIDKey(f *testing.F) {
	f.Add(endpointTestVAPID)
	f.Add(endpointTestVAPID + "=")
	f.Add(strings.NewReplacer("-", "+", "_", "/").Replace(endpointTestVAPID))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := DecodeVAPIDKey(s)
		if err != nil {
			return
		}
		if len(raw) != VAPIDKeyLen || raw[0] != 4 {
			t.Fatalf("accepted %x", raw)
		}
		for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.StdEncoding} {
			again, err := DecodeVAPIDKey(enc.EncodeToString(raw))
			if err != nil || !bytes.Equal(again, raw) {
				t.Fatalf("re-encoded: %v", err)
			}
		}
	})
}

func BenchmarkParseToken(b *testing.B) {
	for _, c := range []struct{ version, token string }{{"v1", endpointTestV1}, {"v2", endpointTestV2}} {
		b.Run(c.version, func(b *testing.B) {
			k := endpointTestKeys(b, endpointTestKey, false)
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
		k := endpointTestKeys(b, endpointTestKey+","+endpointTestOldKey, false)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := k.ParseToken("v1", endpointTestV1OldKey); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMakeEndpoint(b *testing.B) {
	uaid, chid := endpointTestIDs()
	key, _ := DecodeVAPIDKey(endpointTestVAPID)
	for _, c := range []struct {
		name string
		key  []byte
	}{{"v1", nil}, {"v2", key}} {
		b.Run(c.name, func(b *testing.B) {
			k, _ := ParseKeys(endpointTestKey)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := k.MakeEndpoint("https://push.example.com/", uaid, chid, c.key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
