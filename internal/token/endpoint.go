package token

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/vapid"
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
	rawLenV1 = overhead + 48
	rawLenV2 = overhead + 80
	// Longest token text: v2, padded.
	maxTokenLen = (rawLenV2 + 2) / 3 * 4
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
	h := vapid.HashKey(raw)
	return subtle.ConstantTimeCompare(h[:], e.KeyHash) == 1
}

// CheckVAPID enforces a v2 endpoint's key binding once r, the push's VAPID
// authorization, has verified: nil if e is v1 or was made for r's key,
// else a *vapid.Error (rule key-mismatch).
func (e *Endpoint) CheckVAPID(r *vapid.Result) error {
	if e.Version != 2 || e.MatchesVAPIDKey(r.PublicKey[:]) {
		return nil
	}
	return errVAPIDKeyMismatch
}

// errVAPIDKeyMismatch is shared: a rejection costs no allocation.
var errVAPIDKeyMismatch = &vapid.Error{
	Rule: vapid.RuleKeyMismatch,
	Msg:  "the key is not the one the subscription was made with",
}

// EndpointError is why a push endpoint token was refused. Every kind gets
// the reference's answer, 404 errno 102; the kinds are for logs and metrics.
type EndpointError struct{ reason string }

func (e *EndpointError) Error() string { return "token: invalid endpoint token: " + e.reason }

// HTTPError is the response the reference gives for the error.
func (e *EndpointError) HTTPError() *errno.HTTPError {
	if e == ErrAPIVersion {
		return errno.InvalidEndpoint.HTTPError("Invalid API version")
	}
	return errno.InvalidEndpoint.HTTPError("Invalid token")
}

// The endpoint token errors. Compare with == or errors.Is.
var (
	// ErrAPIVersion: the path's version is neither v1 nor v2.
	ErrAPIVersion = &EndpointError{"unknown API version"}
	// ErrEndpointEncoding: the token is not url-safe base64.
	ErrEndpointEncoding = &EndpointError{"not url-safe base64"}
	// ErrEndpointLength: the token is not the size of any endpoint token.
	ErrEndpointLength = &EndpointError{"wrong length"}
	// ErrEndpointDecrypt: no CRYPTO_KEY key opens it (another service's key,
	// tampered, or stamped in the future).
	ErrEndpointDecrypt = &EndpointError{"does not decrypt"}
	// ErrEndpointMismatch: an authentic token under the other version's path
	// (a v1 token under /wpush/v2/ or the reverse).
	ErrEndpointMismatch = &EndpointError{"token version does not match the path"}
)

// MakeEndpoint returns the push endpoint URL for a subscription. vapidKey is
// the raw VAPID public key (see vapid.DecodeKey) for a v2 endpoint, nil for
// v1. baseURL is the endpoint tier's public URL; "wpush/" is resolved
// against it as a relative reference, as the reference does (so a path
// prefix needs its trailing slash).
func (k *Keys) MakeEndpoint(baseURL string, uaid, chid [16]byte, vapidKey []byte) (string, error) {
	root, err := resolveRoot(baseURL)
	if err != nil {
		return "", err
	}
	var plain [64]byte
	copy(plain[:16], uaid[:])
	copy(plain[16:32], chid[:])
	n, version := 32, "v1/"
	if vapidKey != nil {
		if err := vapid.CheckKey(vapidKey); err != nil {
			return "", err
		}
		h := vapid.HashKey(vapidKey)
		copy(plain[32:], h[:])
		n, version = 64, "v2/"
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
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
// VAPID key checked (Endpoint.MatchesVAPIDKey). Errors are *EndpointError.
func (k *Keys) ParseToken(version, token string) (Endpoint, error) {
	var want int
	switch version {
	case "", "v1":
		want = 1
	case "v2":
		want = 2
	default:
		return Endpoint{}, ErrAPIVersion
	}
	if len(token) > maxTokenLen {
		return Endpoint{}, ErrEndpointLength
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	raw, ok := decodeB64(sc.raw[:0], token)
	if !ok {
		return Endpoint{}, ErrEndpointEncoding
	}
	if len(raw) != rawLenV1 && len(raw) != rawLenV2 {
		return Endpoint{}, ErrEndpointLength
	}
	plain, err := k.openRaw(sc.plain[:0], raw, 0, &sc.sum)
	if err != nil {
		return Endpoint{}, ErrEndpointDecrypt
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
		return Endpoint{}, ErrEndpointLength
	}
	if e.Version != want {
		return Endpoint{}, ErrEndpointMismatch
	}
	copy(e.UAID[:], plain[:16])
	copy(e.CHID[:], plain[16:32])
	return e, nil
}

// rootCache remembers the last base URL's resolved root: the tiers
// pass the same configured URL on every call.
type rootCache struct{ base, root string }

var lastRoot atomic.Pointer[rootCache]

// resolveRoot resolves "wpush/" against baseURL, normalised as the
// reference's URL library does (lower-case scheme and host, no default
// port), so both make the same URL from the same setting.
func resolveRoot(baseURL string) (string, error) {
	if c := lastRoot.Load(); c != nil && c.base == baseURL {
		return c.root, nil
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", errors.New("token: the endpoint URL must be an absolute http(s) URL without credentials")
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
	lastRoot.Store(&rootCache{base: baseURL, root: root})
	return root, nil
}
