package vapid

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/big"
	"strings"
)

// parsedClaims are the claims of a token whose signature verified.
type parsedClaims struct {
	Aud    string // normalised
	Exp    int64
	Sub    string
	hasSub bool
}

// verifyJWT checks the token's form, alg and signature, and reads its
// claims (aud normalised; "" if it is not an origin, which no audience
// equals).
func (v *Verifier) verifyJWT(token string, key []byte) (parsedClaims, *Error) {
	var c parsedClaims
	if len(token) > maxTokenLen {
		return c, errLong
	}
	d1 := strings.IndexByte(token, '.')
	if d1 < 0 {
		return c, errShape
	}
	d2 := d1 + 1 + strings.IndexByte(token[d1+1:], '.')
	if d2 == d1 || strings.IndexByte(token[d2+1:], '.') >= 0 {
		return c, errShape
	}
	header, ok := decodePart(token[:d1])
	if !ok {
		return c, errShape
	}
	var hdr struct {
		Alg json.RawMessage `json:"alg"`
	}
	if !isObject(header) || json.Unmarshal(header, &hdr) != nil {
		return c, errHeaderJSON
	}
	// Before the signature is decoded: "none" tokens have an empty one.
	var alg string
	if json.Unmarshal(hdr.Alg, &alg) != nil || alg != "ES256" {
		return c, errAlg
	}
	payload, ok1 := decodePart(token[d1+1 : d2])
	sig, ok2 := decodePart(token[d2+1:])
	if !ok1 || !ok2 {
		return c, errShape
	}
	if len(sig) != 64 {
		return c, errSigLen
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), key)
	if err != nil {
		return c, errBadKey
	}
	v.sigChecks.Add(1)
	digest := sha256.Sum256([]byte(token[:d2]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(pub, digest[:], r, s) {
		return c, errSig
	}

	var cl struct {
		Aud json.RawMessage `json:"aud"`
		Exp json.RawMessage `json:"exp"`
		Sub json.RawMessage `json:"sub"`
	}
	if !isObject(payload) || json.Unmarshal(payload, &cl) != nil {
		return c, errClaimsJSON
	}
	if len(cl.Exp) == 0 || string(cl.Exp) == "null" {
		return c, errNoExp
	}
	// A NumericDate may have a fraction (RFC 7519 §2).
	var exp float64
	if json.Unmarshal(cl.Exp, &exp) != nil {
		return c, errExpNaN
	}
	switch {
	case exp > 1<<62:
		c.Exp = 1 << 62
	case exp < -(1 << 62):
		c.Exp = -(1 << 62)
	default:
		c.Exp = int64(math.Floor(exp))
	}
	var aud string
	if json.Unmarshal(cl.Aud, &aud) != nil || string(cl.Aud) == "null" {
		return c, errNoAud
	}
	var isOrigin bool
	if c.Aud, isOrigin = normalizeOrigin(aud, false); !isOrigin {
		// Kept (clipped) for the error message; no audience equals it,
		// since a normalised origin would have parsed.
		c.Aud = clip(aud)
	}
	if len(cl.Sub) > 0 {
		c.hasSub = true
		if string(cl.Sub) == "null" || json.Unmarshal(cl.Sub, &c.Sub) != nil {
			return c, errSubType
		}
	}
	return c, nil
}

// decodePart decodes one JWS part: base64url, padding tolerated.
func decodePart(s string) ([]byte, bool) {
	s = strings.TrimRight(s, "=")
	if s == "" {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	return b, err == nil
}

// isObject: json.Unmarshal into a struct accepts "null"; a JOSE header
// or claims set must be an object.
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}
