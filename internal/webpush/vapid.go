package webpush

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// VAPID (RFC 8292): an application server signs a short-lived JWT with its
// P-256 key and sends it in the Authorization header of a push, either as
//
//	Authorization: vapid t=<jwt>, k=<public key>          (RFC 8292 §3)
//	Authorization: WebPush <jwt>  (or Bearer <jwt>)        (drafts 00-01)
//	Crypto-Key: p256ecdsa=<public key>[; or , other params]
//
// The reference (autoendpoint) accepts both forms; so does VAPIDVerifier.

const (
	// VAPIDMaxLifetime is how far ahead exp may be: RFC 8292 §2 caps it at
	// 24 hours from the request, and the reference enforces that.
	VAPIDMaxLifetime = 24 * time.Hour
	// DefaultVAPIDSkew is the clock skew allowed on both exp checks. 60 s
	// is the leeway the reference's JWT library applies to exp, and covers
	// senders (web-push once signed exp = now + 24 h exactly) whose clocks
	// run a little ahead of ours.
	DefaultVAPIDSkew = 60 * time.Second
	// DefaultVAPIDCacheSize bounds the verified-token cache.
	DefaultVAPIDCacheSize = 1 << 16
	// vapidMaxTokenLen bounds the work a hostile token can cause; real
	// tokens are 250-400 bytes.
	vapidMaxTokenLen = 4096
	vapidShards      = 16
)

// The rules a VAPIDError names: which check failed.
const (
	VAPIDRuleHeader      = "header"       // no Authorization header, or no token in it
	VAPIDRuleScheme      = "scheme"       // not vapid, WebPush or Bearer
	VAPIDRuleKey         = "key"          // public key missing or not a P-256 point
	VAPIDRuleJWT         = "jwt"          // not a compact JWS with JSON header and claims
	VAPIDRuleAlg         = "alg"          // header alg is not ES256
	VAPIDRuleSignature   = "signature"    // not 64 bytes, or does not verify
	VAPIDRuleAud         = "aud"          // aud missing or not this service's origin
	VAPIDRuleExpMissing  = "exp-missing"  // exp missing or not a number
	VAPIDRuleExpPast     = "exp-past"     // expired
	VAPIDRuleExpFar      = "exp-far"      // more than 24 h ahead
	VAPIDRuleSub         = "sub"          // sub present but not a mailto: or http(s) URL
	VAPIDRuleKeyMismatch = "key-mismatch" // a v2 endpoint made for another key
)

// VAPIDError is why a push's VAPID authorization was refused. Every rule
// gets the reference's answer, 401 errno 109; the message names the rule
// so a sender can tell what to fix.
type VAPIDError struct {
	Rule string
	Msg  string
}

func (e *VAPIDError) Error() string { return "webpush: VAPID " + e.Rule + ": " + e.Msg }

// HTTPError is the response for the error: 401, errno 109.
func (e *VAPIDError) HTTPError() *HTTPError {
	return ErrnoInvalidAuth.HTTPError("Invalid VAPID authorization (" + e.Rule + "): " + e.Msg)
}

// The fixed-text errors are shared: a rejection costs no allocation.
var (
	errVAPIDNoHeader    = &VAPIDError{VAPIDRuleHeader, "no Authorization header"}
	errVAPIDNoToken     = &VAPIDError{VAPIDRuleHeader, "no token after the scheme"}
	errVAPIDNoT         = &VAPIDError{VAPIDRuleHeader, "no t= parameter"}
	errVAPIDDupParam    = &VAPIDError{VAPIDRuleHeader, "t= or k= given twice"}
	errVAPIDScheme      = &VAPIDError{VAPIDRuleScheme, "the scheme must be vapid, WebPush or Bearer"}
	errVAPIDNoK         = &VAPIDError{VAPIDRuleKey, "no k= parameter"}
	errVAPIDNoCryptoKey = &VAPIDError{VAPIDRuleKey, "no p256ecdsa= key in the Crypto-Key header"}
	errVAPIDBadKey      = &VAPIDError{VAPIDRuleKey, "the key is not base64url of a 65-byte uncompressed P-256 point"}
	errVAPIDLong        = &VAPIDError{VAPIDRuleJWT, "token longer than 4096 bytes"}
	errVAPIDShape       = &VAPIDError{VAPIDRuleJWT, "token is not three base64url parts"}
	errVAPIDHeaderJSON  = &VAPIDError{VAPIDRuleJWT, "JWT header is not a JSON object"}
	errVAPIDClaimsJSON  = &VAPIDError{VAPIDRuleJWT, "JWT claims are not a JSON object"}
	errVAPIDAlg         = &VAPIDError{VAPIDRuleAlg, "JWT alg must be ES256"}
	errVAPIDSigLen      = &VAPIDError{VAPIDRuleSignature, "signature is not 64 bytes (JOSE r||s)"}
	errVAPIDSig         = &VAPIDError{VAPIDRuleSignature, "signature does not verify with the key"}
	errVAPIDNoAud       = &VAPIDError{VAPIDRuleAud, "no aud claim (a string)"}
	errVAPIDOwnAud      = &VAPIDError{VAPIDRuleAud, "this service's audience is not an http(s) origin"}
	errVAPIDNoExp       = &VAPIDError{VAPIDRuleExpMissing, "no exp claim"}
	errVAPIDExpNaN      = &VAPIDError{VAPIDRuleExpMissing, "exp is not a number"}
	errVAPIDExpPast     = &VAPIDError{VAPIDRuleExpPast, "the token has expired"}
	errVAPIDExpFar      = &VAPIDError{VAPIDRuleExpFar, "exp is more than 24 hours ahead"}
	errVAPIDSubType     = &VAPIDError{VAPIDRuleSub, "sub is not a string"}
	errVAPIDSub         = &VAPIDError{VAPIDRuleSub, "sub must be a mailto: or https: URL"}
	errVAPIDKeyMismatch = &VAPIDError{VAPIDRuleKeyMismatch, "the key is not the one the subscription was made with"}
)

// VAPIDClaims are a verified token's claims.
type VAPIDClaims struct {
	// Aud is the audience, normalised as an origin (lower-case scheme and
	// host, no default port): it equals the verifier's audience.
	Aud string
	// Exp is the expiry, in seconds since the epoch (fractions dropped).
	Exp int64
	// Sub is the contact, "" when the token has none.
	Sub string
}

// VAPIDResult is an accepted VAPID authorization.
type VAPIDResult struct {
	// PublicKey is the raw key (0x04 ‖ X ‖ Y) the token verified with: a v2
	// endpoint's KeyHash must be its sha256 (see CheckEndpoint).
	PublicKey [VAPIDKeyLen]byte
	Claims    VAPIDClaims
	// Scheme is "vapid" (RFC 8292), or "webpush" / "bearer" (the drafts,
	// key from Crypto-Key), for metrics.
	Scheme string
}

// CheckEndpoint enforces a v2 endpoint's key binding: nil if the endpoint
// is v1 or was made for r's key, else a *VAPIDError (rule key-mismatch).
func (r *VAPIDResult) CheckEndpoint(e *Endpoint) error {
	if e.Version != 2 || e.MatchesVAPIDKey(r.PublicKey[:]) {
		return nil
	}
	return errVAPIDKeyMismatch
}

// VAPIDVerifier checks VAPID authorizations. The zero value is ready to use;
// set the fields before the first Verify and do not change them after. It
// is safe for concurrent use and must not be copied.
type VAPIDVerifier struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxSkew is the clock skew allowed on both exp checks: a token is
	// refused once now >= exp+MaxSkew, or when exp > now+24h+MaxSkew.
	// 0 means DefaultVAPIDSkew; negative allows none.
	MaxSkew time.Duration
	// CacheSize bounds the verified-token cache (entries); 0 means
	// DefaultVAPIDCacheSize, negative turns the cache off.
	CacheSize int
	// AnySub accepts any string sub, as the reference does (it only counts
	// bad ones). By default a sub must start with mailto:, https: or http:
	// (case-insensitive): what webpush-go (including its "mailto:mailto:"),
	// pywebpush and web-push (any URL with a host) send.
	AnySub bool

	once   sync.Once
	shards []vapidShard // nil: cache off
	aud    atomic.Pointer[vapidAudience]
	// sigChecks counts signature verifications (tests check cache hits).
	sigChecks atomic.Uint64
}

// vapidAudience remembers the last audience argument's normalised form:
// callers pass the same configured value on every call.
type vapidAudience struct {
	in, origin string
	ok         bool
}

// vapidShard is one lock's share of the cache. Keys are sha256(token ‖ 0 ‖
// key text): fixed-size, and an entry cannot be reached with another token
// or another key.
type vapidShard struct {
	mu  sync.Mutex
	m   map[[32]byte]vapidEntry
	max int
}

type vapidEntry struct {
	key [VAPIDKeyLen]byte
	aud string // normalised
	exp int64
	sub string
}

// Verify checks a push's VAPID authorization: authorization and cryptoKey
// are the Authorization and Crypto-Key header values ("" if absent) and
// audience is this service's origin (scheme://host[:port]; a path is
// ignored, so the endpoint base URL MakeEndpoint takes will do; one that
// is not an http(s) URL fails every token, rule aud). Errors are
// *VAPIDError.
//
// An absent Authorization header is an error (rule header): a push to a v1
// endpoint needs VAPID only if it sends the header, one to a v2 endpoint
// always does (then see VAPIDResult.CheckEndpoint).
//
// A token seen before with the same key text is answered from the cache
// without a signature check, but its exp and aud are checked again.
func (v *VAPIDVerifier) Verify(authorization, cryptoKey, audience string) (VAPIDResult, error) {
	var res VAPIDResult
	a, verr := parseVAPIDAuthorization(authorization, cryptoKey)
	if verr != nil {
		return res, verr
	}
	res.Scheme = a.scheme
	want, ok := v.audience(audience)
	if !ok {
		return res, errVAPIDOwnAud
	}
	v.once.Do(v.init)
	now := v.clock().Unix()
	skew := v.skewSeconds()

	var id [32]byte
	var sh *vapidShard
	if v.shards != nil {
		id = vapidCacheID(a.token, a.key)
		sh = &v.shards[id[0]%vapidShards]
		sh.mu.Lock()
		e, hit := sh.m[id]
		expired := hit && e.exp+skew <= now
		if expired {
			delete(sh.m, id)
		}
		sh.mu.Unlock()
		if hit {
			res.PublicKey, res.Claims = e.key, VAPIDClaims{Aud: e.aud, Exp: e.exp, Sub: e.sub}
			if expired {
				return res, errVAPIDExpPast
			}
			// Only exp-far can still fail here (a clock that went back).
			if verr := vapidCheckTime(e.exp, now, skew); verr != nil {
				return res, verr
			}
			if e.aud != want {
				return res, vapidAudMismatch(e.aud, want)
			}
			return res, nil
		}
	}

	key, err := DecodeVAPIDKey(a.key)
	if err != nil {
		return res, errVAPIDBadKey
	}
	copy(res.PublicKey[:], key)
	c, verr := v.verifyJWT(a.token, key)
	if verr != nil {
		return res, verr
	}
	if verr := vapidCheckTime(c.Exp, now, skew); verr != nil {
		return res, verr
	}
	if c.Aud != want {
		return res, vapidAudMismatch(c.Aud, want)
	}
	if c.hasSub && !v.AnySub && !vapidSubOK(c.Sub) {
		return res, errVAPIDSub
	}
	res.Claims = VAPIDClaims{Aud: c.Aud, Exp: c.Exp, Sub: c.Sub}
	if sh != nil {
		sh.put(id, vapidEntry{key: res.PublicKey, aud: c.Aud, exp: c.Exp, sub: c.Sub}, now, skew)
	}
	return res, nil
}

func (v *VAPIDVerifier) init() {
	n := v.CacheSize
	if n < 0 {
		return
	}
	if n == 0 {
		n = DefaultVAPIDCacheSize
	}
	per := max(n/vapidShards, 1)
	v.shards = make([]vapidShard, vapidShards)
	for i := range v.shards {
		v.shards[i].m = make(map[[32]byte]vapidEntry)
		v.shards[i].max = per
	}
}

func (v *VAPIDVerifier) clock() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *VAPIDVerifier) skewSeconds() int64 {
	switch {
	case v.MaxSkew == 0:
		return int64(DefaultVAPIDSkew / time.Second)
	case v.MaxSkew < 0:
		return 0
	}
	return int64(v.MaxSkew / time.Second)
}

func (v *VAPIDVerifier) audience(s string) (string, bool) {
	if c := v.aud.Load(); c != nil && c.in == s {
		return c.origin, c.ok
	}
	origin, ok := vapidOrigin(s, true)
	v.aud.Store(&vapidAudience{in: s, origin: origin, ok: ok})
	return origin, ok
}

// put adds an accepted token. A full shard first drops the expired
// entries among a few it looks at, then, if still full, an arbitrary one
// (map order): bounded work, and a flood of fresh tokens only costs their
// senders cache hits.
func (s *vapidShard) put(id [32]byte, e vapidEntry, now, skew int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; !ok && len(s.m) >= s.max {
		seen := 0
		for k, old := range s.m {
			if old.exp+skew <= now {
				delete(s.m, k)
			}
			if seen++; seen == 8 {
				break
			}
		}
		if len(s.m) >= s.max {
			for k := range s.m {
				delete(s.m, k)
				break
			}
		}
	}
	s.m[id] = e
}

func vapidCacheID(token, key string) [32]byte {
	// Real tokens and keys fit the stack buffer; longer ones just allocate.
	var buf [640]byte
	b := append(buf[:0], token...)
	b = append(b, 0)
	b = append(b, key...)
	return sha256.Sum256(b)
}

func vapidCheckTime(exp, now, skew int64) *VAPIDError {
	if exp+skew <= now {
		return errVAPIDExpPast
	}
	if exp > now+int64(VAPIDMaxLifetime/time.Second)+skew {
		return errVAPIDExpFar
	}
	return nil
}

func vapidAudMismatch(aud, want string) *VAPIDError {
	return &VAPIDError{VAPIDRuleAud, "aud " + strconv.Quote(vapidClip(aud)) + " is not this service's origin " + strconv.Quote(want)}
}

// vapidClip keeps echoed sender input short.
func vapidClip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

func vapidSubOK(sub string) bool {
	return vapidHasPrefixFold(sub, "mailto:") || vapidHasPrefixFold(sub, "https:") || vapidHasPrefixFold(sub, "http:")
}

func vapidHasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// vapidAuth is a parsed Authorization header.
type vapidAuth struct {
	scheme string // "vapid", "webpush" or "bearer"
	token  string
	key    string // base64 text, padding as sent
}

// parseVAPIDAuthorization splits the Authorization header (and, for the
// draft schemes, takes the key from Crypto-Key). It checks form only.
func parseVAPIDAuthorization(authorization, cryptoKey string) (vapidAuth, *VAPIDError) {
	var a vapidAuth
	h := vapidTrim(authorization)
	if h == "" {
		return a, errVAPIDNoHeader
	}
	scheme, rest := h, ""
	if i := strings.IndexAny(h, " \t"); i >= 0 {
		scheme, rest = h[:i], vapidTrim(h[i+1:])
	}
	switch {
	case strings.EqualFold(scheme, "vapid"):
		a.scheme = "vapid"
	case strings.EqualFold(scheme, "webpush"):
		a.scheme = "webpush"
	case strings.EqualFold(scheme, "bearer"):
		a.scheme = "bearer"
	default:
		return a, errVAPIDScheme
	}
	if rest == "" {
		return a, errVAPIDNoToken
	}
	if a.scheme != "vapid" {
		a.token = rest
		for s := cryptoKey; s != ""; {
			var name, value string
			name, value, s = vapidNextParam(s)
			if strings.EqualFold(name, "p256ecdsa") {
				a.key = value
				break
			}
		}
		if a.key == "" {
			return a, errVAPIDNoCryptoKey
		}
		return a, nil
	}
	// RFC 8292 §3: auth-params t and k, in any order; names are
	// case-insensitive (RFC 9110 §11.2), values may be quoted.
	var haveT, haveK bool
	for s := rest; s != ""; {
		var name, value string
		name, value, s = vapidNextParam(s)
		switch {
		case strings.EqualFold(name, "t"):
			if haveT {
				return a, errVAPIDDupParam
			}
			a.token, haveT = value, true
		case strings.EqualFold(name, "k"):
			if haveK {
				return a, errVAPIDDupParam
			}
			a.key, haveK = value, true
		}
	}
	if a.token == "" {
		return a, errVAPIDNoT
	}
	if a.key == "" {
		return a, errVAPIDNoK
	}
	return a, nil
}

// vapidNextParam returns the first name=value item of a parameter list
// separated by ',' or ';' (Crypto-Key uses both; neither occurs in base64
// or a JWT), with surrounding whitespace and one pair of quotes removed.
// An item without '=' has an empty value.
func vapidNextParam(s string) (name, value, rest string) {
	item := s
	if i := strings.IndexAny(s, ",;"); i >= 0 {
		item, rest = s[:i], s[i+1:]
	}
	name = item
	if i := strings.IndexByte(item, '='); i >= 0 {
		name, value = item[:i], vapidTrim(item[i+1:])
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
		}
	}
	return vapidTrim(name), value, rest
}

func vapidTrim(s string) string { return strings.Trim(s, " \t") }

// vapidParsedClaims are the claims of a token whose signature verified.
type vapidParsedClaims struct {
	Aud    string // normalised
	Exp    int64
	Sub    string
	hasSub bool
}

// verifyJWT checks the token's form, alg and signature, and reads its
// claims (aud normalised; "" if it is not an origin, which no audience
// equals).
func (v *VAPIDVerifier) verifyJWT(token string, key []byte) (vapidParsedClaims, *VAPIDError) {
	var c vapidParsedClaims
	if len(token) > vapidMaxTokenLen {
		return c, errVAPIDLong
	}
	d1 := strings.IndexByte(token, '.')
	if d1 < 0 {
		return c, errVAPIDShape
	}
	d2 := d1 + 1 + strings.IndexByte(token[d1+1:], '.')
	if d2 == d1 || strings.IndexByte(token[d2+1:], '.') >= 0 {
		return c, errVAPIDShape
	}
	header, ok := vapidB64(token[:d1])
	if !ok {
		return c, errVAPIDShape
	}
	var hdr struct {
		Alg json.RawMessage `json:"alg"`
	}
	if !vapidIsObject(header) || json.Unmarshal(header, &hdr) != nil {
		return c, errVAPIDHeaderJSON
	}
	// Before the signature is decoded: "none" tokens have an empty one.
	var alg string
	if json.Unmarshal(hdr.Alg, &alg) != nil || alg != "ES256" {
		return c, errVAPIDAlg
	}
	payload, ok1 := vapidB64(token[d1+1 : d2])
	sig, ok2 := vapidB64(token[d2+1:])
	if !ok1 || !ok2 {
		return c, errVAPIDShape
	}
	if len(sig) != 64 {
		return c, errVAPIDSigLen
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), key)
	if err != nil {
		return c, errVAPIDBadKey
	}
	v.sigChecks.Add(1)
	digest := sha256.Sum256([]byte(token[:d2]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(pub, digest[:], r, s) {
		return c, errVAPIDSig
	}

	var cl struct {
		Aud json.RawMessage `json:"aud"`
		Exp json.RawMessage `json:"exp"`
		Sub json.RawMessage `json:"sub"`
	}
	if !vapidIsObject(payload) || json.Unmarshal(payload, &cl) != nil {
		return c, errVAPIDClaimsJSON
	}
	if len(cl.Exp) == 0 || string(cl.Exp) == "null" {
		return c, errVAPIDNoExp
	}
	// A NumericDate may have a fraction (RFC 7519 §2).
	var exp float64
	if json.Unmarshal(cl.Exp, &exp) != nil {
		return c, errVAPIDExpNaN
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
		return c, errVAPIDNoAud
	}
	var isOrigin bool
	if c.Aud, isOrigin = vapidOrigin(aud, false); !isOrigin {
		// Kept (clipped) for the error message; no audience equals it,
		// since a normalised origin would have parsed.
		c.Aud = vapidClip(aud)
	}
	if len(cl.Sub) > 0 {
		c.hasSub = true
		if string(cl.Sub) == "null" || json.Unmarshal(cl.Sub, &c.Sub) != nil {
			return c, errVAPIDSubType
		}
	}
	return c, nil
}

// vapidB64 decodes one JWS part: base64url, padding tolerated.
func vapidB64(s string) ([]byte, bool) {
	s = strings.TrimRight(s, "=")
	if s == "" {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	return b, err == nil
}

// vapidIsObject: json.Unmarshal into a struct accepts "null"; a JOSE header
// or claims set must be an object.
func vapidIsObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}

// vapidOrigin normalises an http(s) origin as the reference's URL library
// compares them: scheme and host lower-cased, the default port dropped, a
// bare "/" path allowed. withPath lets any path, query or fragment follow
// (and drops it); otherwise anything after the authority but "/" fails.
func vapidOrigin(s string, withPath bool) (string, bool) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return "", false
	}
	scheme := strings.ToLower(s[:i])
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	hostport := s[i+3:]
	if j := strings.IndexAny(hostport, "/?#"); j >= 0 {
		if !withPath && hostport[j:] != "/" {
			return "", false
		}
		hostport = hostport[:j]
	}
	if hostport == "" || strings.ContainsAny(hostport, "@ \t\r\n\\") {
		return "", false
	}
	host, port := hostport, ""
	if hostport[0] == '[' {
		j := strings.IndexByte(hostport, ']')
		if j < 0 {
			return "", false
		}
		host = hostport[:j+1]
		if after := hostport[j+1:]; after != "" {
			if after[0] != ':' {
				return "", false
			}
			port = after[1:]
		}
	} else if j := strings.IndexByte(hostport, ':'); j >= 0 {
		host, port = hostport[:j], hostport[j+1:]
		if strings.IndexByte(port, ':') >= 0 {
			return "", false
		}
	}
	if host == "" || host == "[]" {
		return "", false
	}
	host = strings.ToLower(host)
	if port != "" {
		for k := 0; k < len(port); k++ {
			if port[k] < '0' || port[k] > '9' {
				return "", false
			}
		}
		n, err := strconv.Atoi(port)
		if err != nil || n > 65535 {
			return "", false
		}
		if (scheme == "https" && n == 443) || (scheme == "http" && n == 80) {
			port = ""
		} else {
			port = strconv.Itoa(n)
		}
	}
	out := scheme + "://" + host
	if port != "" {
		out += ":" + port
	}
	return out, true
}
