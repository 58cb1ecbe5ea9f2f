package vapid

import (
	"crypto/sha256"
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
// The reference (autoendpoint) accepts both forms; so does Verifier.

const (
	// MaxLifetime is how far ahead exp may be: RFC 8292 §2 caps it at
	// 24 hours from the request, and the reference enforces that.
	MaxLifetime = 24 * time.Hour
	// DefaultSkew is the clock skew allowed on both exp checks. 60 s
	// is the leeway the reference's JWT library applies to exp, and covers
	// senders (web-push once signed exp = now + 24 h exactly) whose clocks
	// run a little ahead of ours.
	DefaultSkew = 60 * time.Second
	// DefaultCacheSize bounds the verified-token cache.
	DefaultCacheSize = 1 << 16
	// maxTokenLen bounds the work a hostile token can cause; real
	// tokens are 250-400 bytes.
	maxTokenLen = 4096
	shardCount  = 16
)

// Claims are a verified token's claims.
type Claims struct {
	// Aud is the audience, normalised as an origin (lower-case scheme and
	// host, no default port): it equals the verifier's audience.
	Aud string
	// Exp is the expiry, in seconds since the epoch (fractions dropped).
	Exp int64
	// Sub is the contact, "" when the token has none.
	Sub string
}

// Result is an accepted VAPID authorization.
type Result struct {
	// PublicKey is the raw key (0x04 ‖ X ‖ Y) the token verified with: a v2
	// endpoint's KeyHash must be its sha256 (see token.Endpoint.CheckVAPID).
	PublicKey [KeyLen]byte
	Claims    Claims
	// Scheme is "vapid" (RFC 8292), or "webpush" / "bearer" (the drafts,
	// key from Crypto-Key), for metrics.
	Scheme string
}

// Verifier checks VAPID authorizations. The zero value is ready to use;
// set the fields before the first Verify and do not change them after. It
// is safe for concurrent use and must not be copied.
type Verifier struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxSkew is the clock skew allowed on both exp checks: a token is
	// refused once now >= exp+MaxSkew, or when exp > now+24h+MaxSkew.
	// 0 means DefaultSkew; negative allows none.
	MaxSkew time.Duration
	// CacheSize bounds the verified-token cache (entries); 0 means
	// DefaultCacheSize, negative turns the cache off.
	CacheSize int
	// AnySub accepts any string sub, as the reference does (it only counts
	// bad ones). By default a sub must start with mailto:, https: or http:
	// (case-insensitive): what webpush-go (including its "mailto:mailto:"),
	// pywebpush and web-push (any URL with a host) send.
	AnySub bool

	once   sync.Once
	shards []shard // nil: cache off
	aud    atomic.Pointer[audienceCache]
	// sigChecks counts signature verifications (tests check cache hits).
	sigChecks atomic.Uint64
}

// audienceCache remembers the last audience argument's normalised form:
// callers pass the same configured value on every call.
type audienceCache struct {
	in, origin string
	ok         bool
}

// shard is one lock's share of the cache. Keys are sha256(token ‖ 0 ‖
// key text): fixed-size, and an entry cannot be reached with another token
// or another key.
type shard struct {
	mu  sync.Mutex
	m   map[[32]byte]entry
	max int
}

type entry struct {
	key [KeyLen]byte
	aud string // normalised
	exp int64
	sub string
}

// Verify checks a push's VAPID authorization: authorization and cryptoKey
// are the Authorization and Crypto-Key header values ("" if absent) and
// audience is this service's origin (scheme://host[:port]; a path is
// ignored, so the endpoint base URL that token.Keys.MakeEndpoint takes will
// do; one that is not an http(s) URL fails every token, rule aud). Errors
// are *Error.
//
// An absent Authorization header is an error (rule header): a push to a v1
// endpoint needs VAPID only if it sends the header, one to a v2 endpoint
// always does (then see token.Endpoint.CheckVAPID).
//
// A token seen before with the same key text is answered from the cache
// without a signature check, but its exp and aud are checked again.
func (v *Verifier) Verify(authorization, cryptoKey, audience string) (Result, error) {
	var res Result
	a, verr := parseAuthorization(authorization, cryptoKey)
	if verr != nil {
		return res, verr
	}
	res.Scheme = a.scheme
	want, ok := v.audience(audience)
	if !ok {
		return res, errOwnAud
	}
	v.once.Do(v.init)
	now := v.clock().Unix()
	skew := v.skewSeconds()

	var id [32]byte
	var sh *shard
	if v.shards != nil {
		id = cacheID(a.token, a.key)
		sh = &v.shards[id[0]%shardCount]
		if e, hit, expired := sh.get(id, now, skew); hit {
			res.PublicKey, res.Claims = e.key, Claims{Aud: e.aud, Exp: e.exp, Sub: e.sub}
			if verr := checkCached(&e, expired, now, skew, want); verr != nil {
				return res, verr
			}
			return res, nil
		}
	}
	if verr := v.verifyNew(&res, &a, want, now, skew); verr != nil {
		return res, verr
	}
	if sh != nil {
		c := &res.Claims
		sh.put(id, entry{key: res.PublicKey, aud: c.Aud, exp: c.Exp, sub: c.Sub}, now, skew)
	}
	return res, nil
}

// checkCached checks a cached token's exp and aud again: expired (found
// past exp+skew, and dropped, by shard.get) or not, only exp-far can
// still fail the time check (a clock that went back).
func checkCached(e *entry, expired bool, now, skew int64, want string) *Error {
	if expired {
		return errExpPast
	}
	if verr := checkTime(e.exp, now, skew); verr != nil {
		return verr
	}
	if e.aud != want {
		return audMismatch(e.aud, want)
	}
	return nil
}

// verifyNew checks a token the cache does not hold: its key, signature
// and claims; on success res holds its key and claims.
func (v *Verifier) verifyNew(res *Result, a *authHeader, want string, now, skew int64) *Error {
	key, err := DecodeKey(a.key)
	if err != nil {
		return errBadKey
	}
	copy(res.PublicKey[:], key)
	c, verr := v.verifyJWT(a.token, key)
	if verr != nil {
		return verr
	}
	if verr := checkTime(c.Exp, now, skew); verr != nil {
		return verr
	}
	if c.Aud != want {
		return audMismatch(c.Aud, want)
	}
	if c.hasSub && !v.AnySub && !subOK(c.Sub) {
		return errSub
	}
	res.Claims = Claims{Aud: c.Aud, Exp: c.Exp, Sub: c.Sub}
	return nil
}

// get looks id up; an entry found expired is dropped (and reported).
func (s *shard) get(id [32]byte, now, skew int64) (e entry, hit, expired bool) {
	s.mu.Lock()
	e, hit = s.m[id]
	expired = hit && e.exp+skew <= now
	if expired {
		delete(s.m, id)
	}
	s.mu.Unlock()
	return e, hit, expired
}

func (v *Verifier) init() {
	n := v.CacheSize
	if n < 0 {
		return
	}
	if n == 0 {
		n = DefaultCacheSize
	}
	per := max(n/shardCount, 1)
	v.shards = make([]shard, shardCount)
	for i := range v.shards {
		v.shards[i].m = make(map[[32]byte]entry)
		v.shards[i].max = per
	}
}

func (v *Verifier) clock() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Verifier) skewSeconds() int64 {
	switch {
	case v.MaxSkew == 0:
		return int64(DefaultSkew / time.Second)
	case v.MaxSkew < 0:
		return 0
	}
	return int64(v.MaxSkew / time.Second)
}

func (v *Verifier) audience(s string) (string, bool) {
	if c := v.aud.Load(); c != nil && c.in == s {
		return c.origin, c.ok
	}
	origin, ok := normalizeOrigin(s, true)
	v.aud.Store(&audienceCache{in: s, origin: origin, ok: ok})
	return origin, ok
}

// put adds an accepted token. A full shard first drops the expired
// entries among a few it looks at, then, if still full, an arbitrary one
// (map order): bounded work, and a flood of fresh tokens only costs their
// senders cache hits.
func (s *shard) put(id [32]byte, e entry, now, skew int64) {
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

func cacheID(token, key string) [32]byte {
	// Real tokens and keys fit the stack buffer; longer ones just allocate.
	var buf [640]byte
	b := append(buf[:0], token...)
	b = append(b, 0)
	b = append(b, key...)
	return sha256.Sum256(b)
}

func checkTime(exp, now, skew int64) *Error {
	if exp+skew <= now {
		return errExpPast
	}
	if exp > now+int64(MaxLifetime/time.Second)+skew {
		return errExpFar
	}
	return nil
}

func audMismatch(aud, want string) *Error {
	return &Error{RuleAud, "aud " + strconv.Quote(clip(aud)) + " is not this service's origin " + strconv.Quote(want)}
}

// clip keeps echoed sender input short.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

func subOK(sub string) bool {
	return hasPrefixFold(sub, "mailto:") || hasPrefixFold(sub, "https:") || hasPrefixFold(sub, "http:")
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
