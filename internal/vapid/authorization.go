package vapid

import "strings"

// authHeader is a parsed Authorization header.
type authHeader struct {
	scheme string // "vapid", "webpush" or "bearer"
	token  string
	key    string // base64 text, padding as sent
}

// parseAuthorization splits the Authorization header (and, for the
// draft schemes, takes the key from Crypto-Key). It checks form only.
func parseAuthorization(authorization, cryptoKey string) (authHeader, *Error) {
	var a authHeader
	h := trim(authorization)
	if h == "" {
		return a, errNoHeader
	}
	scheme, rest := h, ""
	if i := strings.IndexAny(h, " \t"); i >= 0 {
		scheme, rest = h[:i], trim(h[i+1:])
	}
	if a.scheme = schemeOf(scheme); a.scheme == "" {
		return a, errScheme
	}
	if rest == "" {
		return a, errNoToken
	}
	if a.scheme != "vapid" {
		a.token, a.key = rest, cryptoKeyP256(cryptoKey)
		if a.key == "" {
			return a, errNoCryptoKey
		}
		return a, nil
	}
	verr := vapidParams(&a, rest)
	return a, verr
}

// schemeOf is the Authorization scheme's name in lower case, "" when it
// is none of vapid, WebPush and Bearer.
func schemeOf(scheme string) string {
	switch {
	case strings.EqualFold(scheme, "vapid"):
		return "vapid"
	case strings.EqualFold(scheme, "webpush"):
		return "webpush"
	case strings.EqualFold(scheme, "bearer"):
		return "bearer"
	}
	return ""
}

// cryptoKeyP256 is the draft schemes' key: the Crypto-Key header's first
// p256ecdsa= parameter, "" when there is none.
func cryptoKeyP256(cryptoKey string) string {
	for s := cryptoKey; s != ""; {
		var name, value string
		name, value, s = NextParam(s)
		if strings.EqualFold(name, "p256ecdsa") {
			return value
		}
	}
	return ""
}

// vapidParams reads the vapid scheme's parameters into a. RFC 8292 §3:
// auth-params t and k, in any order; names are case-insensitive (RFC
// 9110 §11.2), values may be quoted.
func vapidParams(a *authHeader, rest string) *Error {
	var haveT, haveK bool
	for s := rest; s != ""; {
		var name, value string
		name, value, s = NextParam(s)
		switch {
		case strings.EqualFold(name, "t"):
			if haveT {
				return errDupParam
			}
			a.token, haveT = value, true
		case strings.EqualFold(name, "k"):
			if haveK {
				return errDupParam
			}
			a.key, haveK = value, true
		}
	}
	if a.token == "" {
		return errNoT
	}
	if a.key == "" {
		return errNoK
	}
	return nil
}

// NextParam returns the first name=value item of a parameter list
// separated by ',' or ';' (Crypto-Key uses both; neither occurs in base64
// or a JWT), with surrounding whitespace and one pair of quotes removed.
// An item without '=' has an empty value. Loop until rest is "". The
// Authorization and Crypto-Key headers are read with it here, and the
// aesgcm Encryption and Crypto-Key headers in pushcrypto.
func NextParam(s string) (name, value, rest string) {
	item := s
	if i := strings.IndexAny(s, ",;"); i >= 0 {
		item, rest = s[:i], s[i+1:]
	}
	name = item
	if i := strings.IndexByte(item, '='); i >= 0 {
		name, value = item[:i], trim(item[i+1:])
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
		}
	}
	return trim(name), value, rest
}

func trim(s string) string { return strings.Trim(s, " \t") }
