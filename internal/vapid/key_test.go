package vapid

import (
	"bytes"
	"crypto/ecdh"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// The VAPID public key of autopush-rs's own VAPID tests, and its sha256.
const (
	testKey     = "BM3bVjW_wuZC54alIbqjTbaBNtthriVtdZlchOyOSdbVYeYQu2i5inJdft7jUWIAy4O9xHBbY196Gf-1odb8hds"
	testKeyHash = "2bf07386516db938d44226beabceb379255656522d8cd2e9ee77d7aac82ca034"
)

func TestDecodeVAPIDKey(t *testing.T) {
	want, _ := base64.RawURLEncoding.DecodeString(testKey)
	std := strings.NewReplacer("-", "+", "_", "/").Replace(testKey)
	for _, s := range []string{
		testKey,
		testKey + "=",  // Firefox pads its applicationServerKey
		testKey + "==", // over-padded: autopush-rs's own test sends this
		std, std + "=", // standard alphabet: some senders
	} {
		got, err := DecodeKey(s)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%q: %v", s, err)
		}
	}
	if h := HashKey(want); hex.EncodeToString(h[:]) != testKeyHash {
		t.Error("hash")
	}
	good := newTestSigner(t).raw
	offCurve := append([]byte(nil), good...)
	offCurve[64] ^= 1
	pub, _ := ecdh.P256().NewPublicKey(good)
	spki, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{
		"empty":            "",
		"short":            testKey[:86],
		"long":             testKey + "AAAA",
		"mixed alphabet":   "+" + testKey[1:],
		"garbage":          strings.Repeat("!", 87),
		"off curve":        base64.RawURLEncoding.EncodeToString(offCurve),
		"not uncompressed": base64.RawURLEncoding.EncodeToString(append([]byte{6}, good[1:]...)),
		"DER SPKI":         base64.RawURLEncoding.EncodeToString(spki),
		"space":            " " + testKey[1:],
	} {
		if got, err := DecodeKey(s); err == nil {
			t.Errorf("%s: accepted %x", name, got)
		}
	}
}

func FuzzDecodeVAPIDKey(f *testing.F) {
	f.Add(testKey)
	f.Add(testKey + "=")
	f.Add(strings.NewReplacer("-", "+", "_", "/").Replace(testKey))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := DecodeKey(s)
		if err != nil {
			return
		}
		if len(raw) != KeyLen || raw[0] != 4 {
			t.Fatalf("accepted %x", raw)
		}
		for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.StdEncoding} {
			again, err := DecodeKey(enc.EncodeToString(raw))
			if err != nil || !bytes.Equal(again, raw) {
				t.Fatalf("re-encoded: %v", err)
			}
		}
	})
}
