package vapid

import (
	"crypto/ecdh"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// KeyLen is the length of a raw VAPID public key: an uncompressed P-256
// point (0x04 ‖ X ‖ Y).
const KeyLen = 65

// VAPID key errors.
var (
	// ErrKeyEncoding: not base64 (either alphabet) of 65 bytes.
	ErrKeyEncoding = errors.New("vapid: VAPID key is not base64 of a 65-byte uncompressed P-256 point")
	// ErrKeyPoint: 65 bytes that are not an uncompressed point on P-256.
	ErrKeyPoint = errors.New("vapid: VAPID key is not an uncompressed P-256 point")
)

// DecodeKey decodes an application server (VAPID) public key as sent in a
// subscription or a VAPID header, and checks it is an uncompressed P-256
// point. It takes url-safe or standard base64, padded or not: Firefox pads
// its applicationServerKey, and some senders use the standard alphabet
// (the reference accepts both when checking a push).
func DecodeKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if len(s) != base64.RawURLEncoding.EncodedLen(KeyLen) {
		return nil, ErrKeyEncoding
	}
	enc := base64.RawURLEncoding
	if strings.ContainsAny(s, "+/") {
		enc = base64.RawStdEncoding
	}
	raw, err := enc.Strict().DecodeString(s)
	if err != nil {
		return nil, ErrKeyEncoding
	}
	if err := CheckKey(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// HashKey is the hash a v2 endpoint carries: sha256 of the raw key.
func HashKey(raw []byte) [32]byte { return sha256.Sum256(raw) }

// CheckKey checks that raw is a raw VAPID public key (KeyLen bytes, an
// uncompressed point on P-256); the error is ErrKeyPoint.
func CheckKey(raw []byte) error {
	if len(raw) != KeyLen || raw[0] != 4 {
		return ErrKeyPoint
	}
	// NewPublicKey checks the point is on the curve (and not infinity).
	if _, err := ecdh.P256().NewPublicKey(raw); err != nil {
		return ErrKeyPoint
	}
	return nil
}
