package token

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

// The Fernet spec's vectors (github.com/fernet/spec: generate.json,
// verify.json, invalid.json), reproduced verbatim.
const specSecret = "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4="

func specTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestFernetSpecGenerate(t *testing.T) {
	f, err := NewFernet(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	iv := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	got, err := f.Encrypt([]byte("hello"), specTime(t, "1985-10-26T01:20:00-07:00"), bytes.NewReader(iv))
	if err != nil {
		t.Fatal(err)
	}
	const want = "gAAAAAAdwJ6wAAECAwQFBgcICQoLDA0ODy021cpGVWKZ_eEwCGM4BLLF_5CV9dOPmrhuVUPgJobwOz7JcbmrR64jVmpU4IwqDA=="
	if got != want {
		t.Fatalf("token\n got %s\nwant %s", got, want)
	}
}

func TestFernetSpecVerify(t *testing.T) {
	f, _ := NewFernet(specSecret)
	const token = "gAAAAAAdwJ6wAAECAwQFBgcICQoLDA0ODy021cpGVWKZ_eEwCGM4BLLF_5CV9dOPmrhuVUPgJobwOz7JcbmrR64jVmpU4IwqDA=="
	pt, err := f.Decrypt(token, specTime(t, "1985-10-26T01:20:01-07:00"), 60*time.Second)
	if err != nil || string(pt) != "hello" {
		t.Fatalf("got %q, %v", pt, err)
	}
	// Without padding too: endpoint tokens travel without it.
	pt, err = f.Decrypt(strings.TrimRight(token, "="), specTime(t, "1985-10-26T01:20:01-07:00"), 60*time.Second)
	if err != nil || string(pt) != "hello" {
		t.Fatalf("unpadded: got %q, %v", pt, err)
	}
}

func TestFernetSpecInvalid(t *testing.T) {
	f, _ := NewFernet(specSecret)
	for _, v := range []struct{ desc, token, now string }{
		{"incorrect mac", "gAAAAAAdwJ6xAAECAwQFBgcICQoLDA0OD3HkMATM5lFqGaerZ-fWPAl1-szkFVzXTuGb4hR8AKtwcaX1YdykQUFBQUFBQUFBQQ==", "1985-10-26T01:20:01-07:00"},
		{"too short", "gAAAAAAdwJ6xAAECAwQFBgcICQoLDA0OD3HkMATM5lFqGaerZ-fWPA==", "1985-10-26T01:20:01-07:00"},
		{"invalid base64", "%%%%%%%%%%%%%AECAwQFBgcICQoLDA0OD3HkMATM5lFqGaerZ-fWPAl1-szkFVzXTuGb4hR8AKtwcaX1YdykRtfsH-p1YsUD2Q==", "1985-10-26T01:20:01-07:00"},
		{"payload size not multiple of block size", "gAAAAAAdwJ6xAAECAwQFBgcICQoLDA0OD3HkMATM5lFqGaerZ-fWPOm73QeoCk9uGib28Xe5vz6oxq5nmxbx_v7mrfyudzUm", "1985-10-26T01:20:01-07:00"},
		{"payload padding error", "gAAAAAAdwJ6xAAECAwQFBgcICQoLDA0ODz4LEpdELGQAad7aNEHbf-JkLPIpuiYRLQ3RtXatOYREu2FWke6CnJNYIbkuKNqOhw==", "1985-10-26T01:20:01-07:00"},
		{"far-future TS (unacceptable clock skew)", "gAAAAAAdwStRAAECAwQFBgcICQoLDA0OD3HkMATM5lFqGaerZ-fWPAnja1xKYyhd-Y6mSkTOyTGJmw2Xc2a6kBd-iX9b_qXQcw==", "1985-10-26T01:20:01-07:00"},
		{"expired TTL", "gAAAAAAdwJ6xAAECAwQFBgcICQoLDA0OD3HkMATM5lFqGaerZ-fWPAl1-szkFVzXTuGb4hR8AKtwcaX1YdykRtfsH-p1YsUD2Q==", "1985-10-26T01:21:31-07:00"},
		{"incorrect IV (causes padding error)", "gAAAAAAdwJ6xBQECAwQFBgcICQoLDA0OD3HkMATM5lFqGaerZ-fWPAkLhFLHpGtDBRLRTZeUfWgHSv49TF2AUEZ1TIvcZjK1zQ==", "1985-10-26T01:20:01-07:00"},
		{"trailing characters after b64 padding", "gAAAAAAdwJ6wAAECAwQFBgcICQoLDA0ODy021cpGVWKZ_eEwCGM4BLLF_5CV9dOPmrhuVUPgJobwOz7JcbmrR64jVmpU4IwqDA==trailingdata", "1985-10-26T01:20:01-07:00"},
		{"invalid characters in b64", "*gAAAAAAdwJ6wAAECAwQFBgcI!CQoLDA0ODy021?cpGVWKZ_eEwC@GM4BLLF_5CV9dOPmrhuVUPgJobwOz7JcbmrR64jVmpU4IwqDA==", "1985-10-26T01:20:01-07:00"},
		{"invalid non-urlsafe characters in b64", "gAAAAAAdwJ6wAAEC/AwQFBgcICQoLDA0ODy+021cpGVWKZ_eEwCGM4BLLF_5CV9dOPmrhuVUPgJobwOz7JcbmrR64jVmpU4IwqDA==", "1985-10-26T01:20:01-07:00"},
	} {
		if pt, err := f.Decrypt(v.token, specTime(t, v.now), 60*time.Second); !errors.Is(err, ErrFernet) {
			t.Errorf("%s: got %q, %v; want ErrFernet", v.desc, pt, err)
		}
	}
}

// The "expired TTL" vector's token is valid before its TTL runs out, so the
// refusal above is the TTL's doing.
func TestFernetTTLBoundary(t *testing.T) {
	f, _ := NewFernet(specSecret)
	tok, _ := f.Encrypt([]byte("x"), time.Unix(1000, 0), nil)
	if _, err := f.Decrypt(tok, time.Unix(1060, 0), 60*time.Second); err != nil {
		t.Fatal("at ttl:", err)
	}
	if _, err := f.Decrypt(tok, time.Unix(1061, 0), 60*time.Second); err == nil {
		t.Fatal("past ttl: accepted")
	}
	// No TTL: any age, but never more than the skew into the future.
	if _, err := f.Decrypt(tok, time.Unix(1e9, 0), 0); err != nil {
		t.Fatal("old, no ttl:", err)
	}
	if _, err := f.Decrypt(tok, time.Unix(940, 0), 0); err != nil {
		t.Fatal("60s ahead:", err)
	}
	if _, err := f.Decrypt(tok, time.Unix(939, 0), 0); err == nil {
		t.Fatal("61s ahead: accepted")
	}
}

func TestFernetRoundTripSizes(t *testing.T) {
	f, _ := NewFernet(GenerateKey())
	now := time.Now()
	for n := range 70 {
		pt := bytes.Repeat([]byte{byte(n)}, n)
		tok, err := f.Encrypt(pt, now, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Decrypt(tok, now, 0)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("len %d: got %x, %v", n, got, err)
		}
	}
}

func TestNewFernetKeyForms(t *testing.T) {
	for _, k := range []string{specSecret, strings.TrimRight(specSecret, "=")} {
		if _, err := NewFernet(k); err != nil {
			t.Errorf("%q: %v", k, err)
		}
	}
	for _, k := range []string{
		"", "axxx",
		base64.URLEncoding.EncodeToString(make([]byte, 31)),
		base64.URLEncoding.EncodeToString(make([]byte, 33)),
		strings.ReplaceAll(base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 16)), "_", "/"), // standard alphabet
	} {
		if _, err := NewFernet(k); err == nil {
			t.Errorf("%q: accepted", k)
		}
	}
	_, err := NewFernet("not-a-key-but-a-secret-that-must-not-leak")
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("error %v", err)
	}
}

func TestGenerateKey(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		k := GenerateKey()
		if len(k) != 44 || !strings.HasSuffix(k, "=") || seen[k] {
			t.Fatalf("key %q", k)
		}
		seen[k] = true
		if _, err := ParseKeys(k); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseKeysForms(t *testing.T) {
	a, b := GenerateKey(), GenerateKey()
	for _, s := range []string{
		a + "," + b,
		" " + a + " , " + b + " ",
		"[" + a + "," + b + "]",
		`["` + a + `", "` + b + `"]`,
	} {
		k, err := ParseKeys(s)
		if err != nil || k.Len() != 2 {
			t.Fatalf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "[]", a + ",", a + ",,", "[" + a, a + ",nope"} {
		if _, err := ParseKeys(s); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
	_, err := ParseKeys(a + ",bogus")
	if err == nil || !strings.Contains(err.Error(), "key 2 of 2") {
		t.Errorf("error %v", err)
	}
}

// MultiFernet: the first key encrypts, every key decrypts.
func TestKeysRotation(t *testing.T) {
	oldKey, newKey, other := GenerateKey(), GenerateKey(), GenerateKey()
	before, _ := ParseKeys(oldKey)
	after, _ := ParseKeys(newKey + "," + oldKey)
	stranger, _ := ParseKeys(other)

	tok, err := before.Encrypt([]byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := after.Decrypt(tok, 0); err != nil || string(pt) != "payload" {
		t.Fatalf("old token after rotation: %q, %v", pt, err)
	}
	if _, err := stranger.Decrypt(tok, 0); err == nil {
		t.Fatal("unknown key decrypted")
	}
	tok2, _ := after.Encrypt([]byte("p2"))
	if _, err := before.Decrypt(tok2, 0); err == nil {
		t.Fatal("new tokens must use the first key")
	}
	newOnly, _ := ParseKeys(newKey)
	if _, err := newOnly.Decrypt(tok2, 0); err != nil {
		t.Fatal(err)
	}
}

func TestFernetDecodePadding(t *testing.T) {
	raw := []byte{1, 2, 3, 4, 5}
	padded := base64.URLEncoding.EncodeToString(raw) // "AQIDBAU="
	for _, s := range []string{padded, strings.TrimRight(padded, "=")} {
		got, ok := decodeB64(nil, s)
		if !ok || !bytes.Equal(got, raw) {
			t.Errorf("%q: %x %v", s, got, ok)
		}
	}
	// One byte short of a quad: "AQ" may take no padding, "=" or "==", not "===".
	for s, want := range map[string]bool{"AQ": true, "AQ=": true, "AQ==": true, "AQ===": false, "AR": false, "A": false, "AQID=": false, "AQI": true, "AQI=": true, "AQI==": false, "====": false, "": true} {
		if _, ok := decodeB64(nil, s); ok != want {
			t.Errorf("%q: ok %v, want %v", s, ok, want)
		}
	}
}

// Derive gives every node with the same first key the same bytes, keys
// rotated in behind it change nothing, a new first key or another
// purpose gives other bytes, and the bytes are not the key's.
func TestDerive(t *testing.T) {
	a, b := GenerateKey(), GenerateKey()
	derive := func(cryptoKey, purpose string) string {
		t.Helper()
		ks, err := ParseKeys(cryptoKey)
		if err != nil {
			t.Fatal(err)
		}
		d, err := ks.Derive(purpose, 32)
		if err != nil || len(d) != 32 {
			t.Fatalf("Derive: %d bytes, %v", len(d), err)
		}
		return string(d)
	}
	first := derive(a, "p")
	if derive(a, "p") != first || derive(a+","+b, "p") != first {
		t.Error("the same first key derives other bytes")
	}
	if derive(b+","+a, "p") == first || derive(a, "q") == first {
		t.Error("another first key, or another purpose, derives the same bytes")
	}
	raw, _ := parseFernetKey(a)
	if first == string(raw) {
		t.Error("Derive returns the key itself")
	}
}
