package bridgeauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"
)

// secretLen is the length of a secret: hex of a SHA-256 MAC.
const secretLen = 2 * sha256.Size

// Secret returns the registration secret of uaid under key.
func Secret(key string, uaid uuid.UUID) string {
	var b [secretLen]byte
	mac := sum(key, uaid)
	hex.Encode(b[:], mac[:])
	return string(b[:])
}

func sum(key string, uaid uuid.UUID) [sha256.Size]byte {
	var simple [32]byte
	hex.Encode(simple[:], uaid[:])
	m := hmac.New(sha256.New, []byte(key))
	m.Write(simple[:])
	var out [sha256.Size]byte
	m.Sum(out[:0])
	return out
}

// Verify reports whether secret is uaid's secret under any of keys. Every
// key is tried whatever the outcome, and each comparison is constant
// time, so the answer's timing tells nothing of which key matched or how
// much of the secret did. No keys: false.
func Verify(keys []string, uaid uuid.UUID, secret string) bool {
	got := []byte(secret)
	if len(got) != secretLen {
		// The length is public (the format is); the keys are not.
		got = make([]byte, secretLen)
	}
	match := 0
	for _, k := range keys {
		want := Secret(k, uaid)
		match |= subtle.ConstantTimeCompare(got, []byte(want))
	}
	return match == 1 && len(secret) == secretLen
}

// FromAuthorization returns the secret of an Authorization header:
// "Bearer <secret>", or "WebPush <secret>" (a scheme some Android
// clients send, which the reference accepts too); schemes compare
// without case. ok is false for any other header, or an empty secret.
func FromAuthorization(header string) (secret string, ok bool) {
	scheme, secret, found := strings.Cut(header, " ")
	if !found || secret == "" {
		return "", false
	}
	if !strings.EqualFold(scheme, "bearer") && !strings.EqualFold(scheme, "webpush") {
		return "", false
	}
	return secret, true
}
