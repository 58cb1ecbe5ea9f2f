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
	d1, d2, verr := splitJWS(token)
	if verr != nil {
		return parsedClaims{}, verr
	}
	payload, verr := v.checkSignature(token, d1, d2, key)
	if verr != nil {
		return parsedClaims{}, verr
	}
	return readClaims(payload)
}

// splitJWS finds the two dots of a compact JWS: token[:d1] is the
// header, token[d1+1:d2] the payload, token[d2+1:] the signature.
func splitJWS(token string) (d1, d2 int, verr *Error) {
	if len(token) > maxTokenLen {
		return 0, 0, errLong
	}
	d1 = strings.IndexByte(token, '.')
	if d1 < 0 {
		return 0, 0, errShape
	}
	d2 = d1 + 1 + strings.IndexByte(token[d1+1:], '.')
	if d2 == d1 || strings.IndexByte(token[d2+1:], '.') >= 0 {
		return 0, 0, errShape
	}
	return d1, d2, nil
}

// checkSignature checks the header's alg and the signature over
// token[:d2] with key, and returns the decoded payload.
func (v *Verifier) checkSignature(token string, d1, d2 int, key []byte) ([]byte, *Error) {
	// Before the signature is decoded: "none" tokens have an empty one.
	if verr := checkAlg(token[:d1]); verr != nil {
		return nil, verr
	}
	payload, ok1 := decodePart(token[d1+1 : d2])
	sig, ok2 := decodePart(token[d2+1:])
	if !ok1 || !ok2 {
		return nil, errShape
	}
	if len(sig) != 64 {
		return nil, errSigLen
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), key)
	if err != nil {
		return nil, errBadKey
	}
	v.sigChecks.Add(1)
	digest := sha256.Sum256([]byte(token[:d2]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(pub, digest[:], r, s) {
		return nil, errSig
	}
	return payload, nil
}

// checkAlg checks the JOSE header part: a JSON object whose alg is ES256.
func checkAlg(part string) *Error {
	header, ok := decodePart(part)
	if !ok {
		return errShape
	}
	var hdr struct {
		Alg json.RawMessage `json:"alg"`
	}
	if !isObject(header) || json.Unmarshal(header, &hdr) != nil {
		return errHeaderJSON
	}
	var alg string
	if json.Unmarshal(hdr.Alg, &alg) != nil || alg != "ES256" {
		return errAlg
	}
	return nil
}

// readClaims reads a verified token's claims set: exp, aud and sub.
func readClaims(payload []byte) (parsedClaims, *Error) {
	var c parsedClaims
	var cl struct {
		Aud json.RawMessage `json:"aud"`
		Exp json.RawMessage `json:"exp"`
		Sub json.RawMessage `json:"sub"`
	}
	if !isObject(payload) || json.Unmarshal(payload, &cl) != nil {
		return c, errClaimsJSON
	}
	var verr *Error
	if c.Exp, verr = readExp(cl.Exp); verr != nil {
		return c, verr
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

// readExp reads the exp claim, in whole seconds, clamped to ±2^62.
func readExp(raw json.RawMessage) (int64, *Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, errNoExp
	}
	// A NumericDate may have a fraction (RFC 7519 §2).
	var exp float64
	if json.Unmarshal(raw, &exp) != nil {
		return 0, errExpNaN
	}
	switch {
	case exp > 1<<62:
		return 1 << 62, nil
	case exp < -(1 << 62):
		return -(1 << 62), nil
	}
	return int64(math.Floor(exp)), nil
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
