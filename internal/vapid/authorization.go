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
	switch {
	case strings.EqualFold(scheme, "vapid"):
		a.scheme = "vapid"
	case strings.EqualFold(scheme, "webpush"):
		a.scheme = "webpush"
	case strings.EqualFold(scheme, "bearer"):
		a.scheme = "bearer"
	default:
		return a, errScheme
	}
	if rest == "" {
		return a, errNoToken
	}
	if a.scheme != "vapid" {
		a.token = rest
		for s := cryptoKey; s != ""; {
			var name, value string
			name, value, s = NextParam(s)
			if strings.EqualFold(name, "p256ecdsa") {
				a.key = value
				break
			}
		}
		if a.key == "" {
			return a, errNoCryptoKey
		}
		return a, nil
	}
	// RFC 8292 §3: auth-params t and k, in any order; names are
	// case-insensitive (RFC 9110 §11.2), values may be quoted.
	var haveT, haveK bool
	for s := rest; s != ""; {
		var name, value string
		name, value, s = NextParam(s)
		switch {
		case strings.EqualFold(name, "t"):
			if haveT {
				return a, errDupParam
			}
			a.token, haveT = value, true
		case strings.EqualFold(name, "k"):
			if haveK {
				return a, errDupParam
			}
			a.key, haveK = value, true
		}
	}
	if a.token == "" {
		return a, errNoT
	}
	if a.key == "" {
		return a, errNoK
	}
	return a, nil
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
