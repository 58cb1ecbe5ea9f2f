package webpush

import (
	"crypto/ecdh"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
)

// Push endpoint URLs, as the reference (autopush_common::endpoint::
// make_endpoint, autoendpoint's Subscription extractor) makes and reads them:
//
//	{endpoint_url joined with "wpush/"}{v1|v2}/{token}
//
// token is a Fernet token (CRYPTO_KEY's first key) over the raw bytes
//
//	v1: uaid (16) ‖ chid (16)
//	v2: uaid (16) ‖ chid (16) ‖ sha256(raw VAPID public key) (32)
//
// in url-safe base64 with the '=' padding stripped. v2 endpoints are made
// for subscriptions with an applicationServerKey; a push to one must carry
// a VAPID header with that key. The reference also serves /wpush/{token}
// (no version) as v1.
const (
	// A Fernet token over 32 and 64 bytes of plaintext (PKCS7 adds a block).
	endpointRawLenV1 = fernetOverhead + 48
	endpointRawLenV2 = fernetOverhead + 80
	// Longest token text: v2, padded.
	endpointMaxTokenLen = (endpointRawLenV2 + 2) / 3 * 4
	// VAPIDKeyLen is the length of a raw VAPID public key: an uncompressed
	// P-256 point (0x04 ‖ X ‖ Y).
	VAPIDKeyLen = 65
)

// Endpoint is what a push endpoint token carries.
type Endpoint struct {
	UAID, CHID [16]byte
	// KeyHash is sha256 of the subscription's raw VAPID public key (v2);
	// nil for v1.
	KeyHash []byte
	// Version is 1 or 2.
	Version int
}

// MatchesVAPIDKey reports, in constant time, whether raw (a VAPID public
// key from a push's Authorization header) is the key the v2 endpoint was
// made for. Always false for v1. A mismatch is errno 109 in the reference.
func (e *Endpoint) MatchesVAPIDKey(raw []byte) bool {
	if len(e.KeyHash) != sha256.Size {
		return false
	}
	h := sha256.Sum256(raw)
	return subtle.ConstantTimeCompare(h[:], e.KeyHash) == 1
}

// TokenError is why a push endpoint token was refused. Every kind gets the
// reference's answer, 404 errno 102; the kinds are for logs and metrics.
type TokenError struct{ reason string }

func (e *TokenError) Error() string { return "webpush: invalid endpoint token: " + e.reason }

// HTTPError is the response the reference gives for the error.
func (e *TokenError) HTTPError() *HTTPError {
	if e == ErrTokenAPIVersion {
		return ErrnoInvalidEndpoint.HTTPError("Invalid API version")
	}
	return ErrnoInvalidEndpoint.HTTPError("Invalid token")
}

// The token errors. Compare with ==  or errors.Is.
var (
	// ErrTokenAPIVersion: the path's version is neither v1 nor v2.
	ErrTokenAPIVersion = &TokenError{"unknown API version"}
	// ErrTokenEncoding: the token is not url-safe base64.
	ErrTokenEncoding = &TokenError{"not url-safe base64"}
	// ErrTokenLength: the token is not the size of any endpoint token.
	ErrTokenLength = &TokenError{"wrong length"}
	// ErrTokenDecrypt: no CRYPTO_KEY key opens it (another service's key,
	// tampered, or stamped in the future).
	ErrTokenDecrypt = &TokenError{"does not decrypt"}
	// ErrTokenMismatch: an authentic token under the other version's path
	// (a v1 token under /wpush/v2/ or the reverse).
	ErrTokenMismatch = &TokenError{"token version does not match the path"}
)

// MakeEndpoint returns the push endpoint URL for a subscription. vapidKey is
// the raw VAPID public key (see DecodeVAPIDKey) for a v2 endpoint, nil for
// v1. baseURL is the endpoint tier's public URL; "wpush/" is resolved
// against it as a relative reference, as the reference does (so a path
// prefix needs its trailing slash).
func (k *Keys) MakeEndpoint(baseURL string, uaid, chid [16]byte, vapidKey []byte) (string, error) {
	root, err := endpointRoot(baseURL)
	if err != nil {
		return "", err
	}
	var plain [64]byte
	copy(plain[:16], uaid[:])
	copy(plain[16:32], chid[:])
	n, version := 32, "v1/"
	if vapidKey != nil {
		if err := endpointCheckVAPIDKey(vapidKey); err != nil {
			return "", err
		}
		h := sha256.Sum256(vapidKey)
		copy(plain[32:], h[:])
		n, version = 64, "v2/"
	}
	sc := fernetScratchPool.Get().(*fernetScratch)
	defer fernetScratchPool.Put(sc)
	raw, err := k.sealRaw(sc.raw[:0], plain[:n])
	if err != nil {
		return "", err
	}
	tok := sc.plain[:base64.RawURLEncoding.EncodedLen(len(raw))]
	base64.RawURLEncoding.Encode(tok, raw)
	var b strings.Builder
	b.Grow(len(root) + len(version) + len(tok))
	b.WriteString(root)
	b.WriteString(version)
	b.Write(tok)
	return b.String(), nil
}

// ParseToken decrypts the token of a push endpoint URL. version is the path
// segment before it: "v1", "v2", or "" for the version-less /wpush/{token}
// route, which the reference treats as v1. A v2 result still needs its
// VAPID key checked (Endpoint.MatchesVAPIDKey). Errors are *TokenError.
func (k *Keys) ParseToken(version, token string) (Endpoint, error) {
	var want int
	switch version {
	case "", "v1":
		want = 1
	case "v2":
		want = 2
	default:
		return Endpoint{}, ErrTokenAPIVersion
	}
	if len(token) > endpointMaxTokenLen {
		return Endpoint{}, ErrTokenLength
	}
	sc := fernetScratchPool.Get().(*fernetScratch)
	defer fernetScratchPool.Put(sc)
	raw, ok := fernetDecode(sc.raw[:0], token)
	if !ok {
		return Endpoint{}, ErrTokenEncoding
	}
	if len(raw) != endpointRawLenV1 && len(raw) != endpointRawLenV2 {
		return Endpoint{}, ErrTokenLength
	}
	plain, err := k.openRaw(sc.plain[:0], raw, 0, &sc.sum)
	if err != nil {
		return Endpoint{}, ErrTokenDecrypt
	}
	var e Endpoint
	switch len(plain) {
	case 32:
		e.Version = 1
	case 64:
		e.Version = 2
		e.KeyHash = append([]byte(nil), plain[32:64]...)
	default:
		// Authentic but not an endpoint token (some other use of the key).
		return Endpoint{}, ErrTokenLength
	}
	if e.Version != want {
		return Endpoint{}, ErrTokenMismatch
	}
	copy(e.UAID[:], plain[:16])
	copy(e.CHID[:], plain[16:32])
	return e, nil
}

// VAPID key errors.
var (
	// ErrVAPIDKeyEncoding: not base64 (either alphabet) of 65 bytes.
	ErrVAPIDKeyEncoding = errors.New("webpush: VAPID key is not base64 of a 65-byte uncompressed P-256 point")
	// ErrVAPIDKeyPoint: 65 bytes that are not an uncompressed point on P-256.
	ErrVAPIDKeyPoint = errors.New("webpush: VAPID key is not an uncompressed P-256 point")
)

// DecodeVAPIDKey decodes an application server (VAPID) public key as sent
// in a subscription or a VAPID header, and checks it is an uncompressed
// P-256 point. It takes url-safe or standard base64, padded or not:
// Firefox pads its applicationServerKey, and some senders use the standard
// alphabet (the reference accepts both when checking a push).
func DecodeVAPIDKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if len(s) != base64.RawURLEncoding.EncodedLen(VAPIDKeyLen) {
		return nil, ErrVAPIDKeyEncoding
	}
	enc := base64.RawURLEncoding
	if strings.ContainsAny(s, "+/") {
		enc = base64.RawStdEncoding
	}
	raw, err := enc.Strict().DecodeString(s)
	if err != nil {
		return nil, ErrVAPIDKeyEncoding
	}
	if err := endpointCheckVAPIDKey(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// HashVAPIDKey is the hash a v2 endpoint carries: sha256 of the raw key.
func HashVAPIDKey(raw []byte) [32]byte { return sha256.Sum256(raw) }

func endpointCheckVAPIDKey(raw []byte) error {
	if len(raw) != VAPIDKeyLen || raw[0] != 4 {
		return ErrVAPIDKeyPoint
	}
	// NewPublicKey checks the point is on the curve (and not infinity).
	if _, err := ecdh.P256().NewPublicKey(raw); err != nil {
		return ErrVAPIDKeyPoint
	}
	return nil
}

// endpointRootCache remembers the last base URL's resolved root: the tiers
// pass the same configured URL on every call.
type endpointRootCache struct{ base, root string }

var endpointLastRoot atomic.Pointer[endpointRootCache]

// endpointRoot resolves "wpush/" against baseURL, normalised as the
// reference's URL library does (lower-case scheme and host, no default
// port), so both make the same URL from the same setting.
func endpointRoot(baseURL string) (string, error) {
	if c := endpointLastRoot.Load(); c != nil && c.base == baseURL {
		return c.root, nil
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", errors.New("webpush: the endpoint URL must be an absolute http(s) URL without credentials")
	}
	u = u.ResolveReference(&url.URL{Path: "wpush/"})
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	u.Host = host
	root := u.String()
	endpointLastRoot.Store(&endpointRootCache{base: baseURL, root: root})
	return root, nil
}
