package vapid

import "github.com/autopush-go/autopush/internal/errno"

// The rules an Error names: which check failed.
const (
	RuleHeader      = "header"       // no Authorization header, or no token in it
	RuleScheme      = "scheme"       // not vapid, WebPush or Bearer
	RuleKey         = "key"          // public key missing or not a P-256 point
	RuleJWT         = "jwt"          // not a compact JWS with JSON header and claims
	RuleAlg         = "alg"          // header alg is not ES256
	RuleSignature   = "signature"    // not 64 bytes, or does not verify
	RuleAud         = "aud"          // aud missing or not this service's origin
	RuleExpMissing  = "exp-missing"  // exp missing or not a number
	RuleExpPast     = "exp-past"     // expired
	RuleExpFar      = "exp-far"      // more than 24 h ahead
	RuleSub         = "sub"          // sub present but not a mailto: or http(s) URL
	RuleKeyMismatch = "key-mismatch" // a v2 endpoint made for another key
)

// Error is why a push's VAPID authorization was refused. Every rule
// gets the reference's answer, 401 errno 109; the message names the rule
// so a sender can tell what to fix.
type Error struct {
	Rule string
	Msg  string
}

func (e *Error) Error() string { return "vapid: " + e.Rule + ": " + e.Msg }

// HTTPError is the response for the error: 401, errno 109.
func (e *Error) HTTPError() *errno.HTTPError {
	return errno.InvalidAuth.HTTPError("Invalid VAPID authorization (" + e.Rule + "): " + e.Msg)
}

// The fixed-text errors are shared: a rejection costs no allocation.
var (
	errNoHeader    = &Error{RuleHeader, "no Authorization header"}
	errNoToken     = &Error{RuleHeader, "no token after the scheme"}
	errNoT         = &Error{RuleHeader, "no t= parameter"}
	errDupParam    = &Error{RuleHeader, "t= or k= given twice"}
	errScheme      = &Error{RuleScheme, "the scheme must be vapid, WebPush or Bearer"}
	errNoK         = &Error{RuleKey, "no k= parameter"}
	errNoCryptoKey = &Error{RuleKey, "no p256ecdsa= key in the Crypto-Key header"}
	errBadKey      = &Error{RuleKey, "the key is not base64url of a 65-byte uncompressed P-256 point"}
	errLong        = &Error{RuleJWT, "token longer than 4096 bytes"}
	errShape       = &Error{RuleJWT, "token is not three base64url parts"}
	errHeaderJSON  = &Error{RuleJWT, "JWT header is not a JSON object"}
	errClaimsJSON  = &Error{RuleJWT, "JWT claims are not a JSON object"}
	errAlg         = &Error{RuleAlg, "JWT alg must be ES256"}
	errSigLen      = &Error{RuleSignature, "signature is not 64 bytes (JOSE r||s)"}
	errSig         = &Error{RuleSignature, "signature does not verify with the key"}
	errNoAud       = &Error{RuleAud, "no aud claim (a string)"}
	errOwnAud      = &Error{RuleAud, "this service's audience is not an http(s) origin"}
	errNoExp       = &Error{RuleExpMissing, "no exp claim"}
	errExpNaN      = &Error{RuleExpMissing, "exp is not a number"}
	errExpPast     = &Error{RuleExpPast, "the token has expired"}
	errExpFar      = &Error{RuleExpFar, "exp is more than 24 hours ahead"}
	errSubType     = &Error{RuleSub, "sub is not a string"}
	errSub         = &Error{RuleSub, "sub must be a mailto: or https: URL"}
)
