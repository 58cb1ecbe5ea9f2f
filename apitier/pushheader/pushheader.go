// Package pushheader is the headers of a WebPush push request (RFC 8030
// TTL, Topic and Urgency; RFC 8188/8291 Content-Encoding and the legacy
// aesgcm draft's Encryption and Crypto-Key), read in one pass over the
// header and checked as the reference checks them (docs/errors.md and
// docs/openapi.yaml say what each fault answers). It does no I/O: the
// endpoint node (apitier) hands it the request's header and answers
// what it returns.
//
// It must never import apitier (the node imports it).
package pushheader

import (
	"net/http"
	"strings"

	hertzproto "github.com/cloudwego/hertz/pkg/protocol"

	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// The push request headers (RFC 8030 §5, RFC 8188/8291 and the legacy
// "aesgcm" draft), checked as the reference checks them
// (autoendpoint's NotificationHeaders; autopush's WebPush schemas):
//
//   - TTL is required: missing 111; not an integer, or sent twice, 112;
//     negative 114 (autopush-rs answers 111 for an unparsable value;
//     docs/errors.md lists the difference). Values above 30
//     days are lowered to 30 days, not refused, and the effective value
//     is echoed. Digits beyond int64 count as "very large" (RFC 7234
//     delta-seconds).
//   - Topic: at most 32 characters of ^[0-9A-Za-z_-]+=*$, else 113; so
//     an empty Topic is refused, as the reference's pattern refuses it.
//     Trailing '=' padding is dropped before use (storage keeps topics
//     in the url-safe alphabet only); it does not make another topic.
//   - Urgency (RFC 8030 §5.3): very-low, low, normal or high, any case;
//     anything else (empty included) is refused with 400 and errno null.
//     (autopush-rs maps an unknown value to normal; docs/errors.md lists
//     the difference.)
//   - A body needs Content-Encoding: "aes128gcm" (RFC 8188: the salt and
//     key are in the body, so Encryption must not carry salt= nor
//     Crypto-Key dh=), or the legacy "aesgcm" (needs Encryption: salt=
//     and Crypto-Key: dh=, both base64url; Encryption-Key is refused).
//     Content codings are case-insensitive (RFC 9110 §8.4.1): any case is
//     taken and the lower-case name is kept (the reference compares
//     exactly). Every fault, a missing header included, is errno 110, the
//     reference's. A push without a body needs and keeps none of them.
//   - TTL, Topic, Urgency and Content-Encoding are singletons: one sent
//     twice is refused with its own errno (the reference silently takes
//     the first). Encryption and Crypto-Key are lists; their first field
//     line is read, as the reference reads it.
//   - Encryption and Crypto-Key are stored as the reference stores them:
//     double quotes removed and the '=' padding after each base64 value
//     stripped. They reach the client under the reference's names:
//     "encoding", "encryption", "crypto_key", "encryption_key".

// maxCryptoHeaderBytes bounds the crypto headers kept with a message
// (names and values), storage's own limit.
const maxCryptoHeaderBytes = storage.MaxHeaderBytes

// The answers to a header fault. Messages are the reference's.
// Package variables: answering an error allocates nothing.
var (
	errMissingTTL    = errno.MissingHeader.HTTPError("Missing TTL value")
	errInvalidTTL    = errno.InvalidTTL.HTTPError("Invalid TTL header value")
	errRepeatedTTL   = errno.InvalidTTL.HTTPError("TTL must be sent once")
	errNegativeTTL   = errno.NegativeTTL.HTTPError("TTL must be greater than 0")
	errTopicLength   = errno.InvalidTopic.HTTPError("Topic must be no greater than 32 characters")
	errTopicChars    = errno.InvalidTopic.HTTPError("Topic must be URL and Filename safe Base64 alphabet")
	errRepeatedTopic = errno.InvalidTopic.HTTPError("Topic must be sent once")
	errUrgency       = errno.Unnumbered(http.StatusBadRequest, "Urgency must be one of very-low, low, normal or high, sent once")
)

// Crypto header errors: a body whose encryption headers are missing or
// wrong for its Content-Encoding gets errno 110 ("Invalid crypto keys
// specified"), with the reference's messages; the reference never sends
// 101 ("Missing necessary crypto keys"), and neither does this tier.
func errMissingCrypto(msg string) *errno.HTTPError {
	return errno.InvalidCryptoKeys.HTTPError(msg)
}

func errInvalidCrypto(msg string) *errno.HTTPError {
	return errno.InvalidCryptoKeys.HTTPError(msg)
}

// Headers are a push request's checked headers.
type Headers struct {
	TTL     int64 // effective: 0..storage.MaxTTL
	Topic   string
	Urgency string
	// Crypto headers, only for a push with a body: the coding in lower
	// case (AES128GCM or AESGCM), and Encryption, Crypto-Key and
	// Encryption-Key as stored.
	Encoding, Encryption, CryptoKey, EncryptionKey string
}

// fields are the request's header fields the push rules read,
// collected in one pass over the header; n counts the field lines of each
// singleton.
type fields struct {
	ttl, topic, urgency, encoding        []byte
	nTTL, nTopic, nUrgency, nEncoding    int
	encryption, cryptoKey, encryptionKey []byte
}

// collect reads the push fields of req.
func collect(req *hertzproto.RequestHeader) fields {
	var f fields
	req.VisitAll(func(k, v []byte) {
		switch {
		case equalFold(k, "ttl"):
			f.ttl, f.nTTL = v, f.nTTL+1
		case equalFold(k, "topic"):
			f.topic, f.nTopic = v, f.nTopic+1
		case equalFold(k, "urgency"):
			f.urgency, f.nUrgency = v, f.nUrgency+1
		case equalFold(k, "content-encoding"):
			f.encoding, f.nEncoding = v, f.nEncoding+1
		case equalFold(k, "encryption") && f.encryption == nil:
			f.encryption = v
		case equalFold(k, "crypto-key") && f.cryptoKey == nil:
			f.cryptoKey = v
		case equalFold(k, "encryption-key") && f.encryptionKey == nil:
			f.encryptionKey = v
		}
	})
	return f
}

// equalFold compares an ASCII header name without allocating.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// parseTTL reads the TTL header's n field lines (v: the last).
func parseTTL(v []byte, n int) (int64, *errno.HTTPError) {
	switch {
	case n == 0 || len(v) == 0 && n == 1:
		return 0, errMissingTTL
	case n > 1:
		return 0, errRepeatedTTL
	}
	neg := false
	switch v[0] {
	case '-':
		neg = true
		v = v[1:]
	case '+':
		v = v[1:]
	}
	if len(v) == 0 {
		return 0, errInvalidTTL
	}
	var ttl int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, errInvalidTTL
		}
		if ttl <= storage.MaxTTL { // saturate: anything larger is capped anyway
			ttl = ttl*10 + int64(c-'0')
		}
	}
	switch {
	case neg && ttl > 0:
		return 0, errNegativeTTL
	case ttl > storage.MaxTTL:
		ttl = storage.MaxTTL
	}
	return ttl, nil
}

// parseTopic checks the Topic header's n field lines (v: the last) and
// returns the topic without padding; "" when there is none.
func parseTopic(v []byte, n int) (string, *errno.HTTPError) {
	switch {
	case n == 0:
		return "", nil
	case n > 1:
		return "", errRepeatedTopic
	case len(v) > storage.MaxTopicLen:
		return "", errTopicLength
	}
	i := 0
	for ; i < len(v) && isBase64URLChar(v[i]); i++ {
	}
	end := i
	for ; i < len(v) && v[i] == '='; i++ {
	}
	if end == 0 || i != len(v) {
		return "", errTopicChars
	}
	return string(v[:end]), nil
}

func isBase64URLChar(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// Urgency values (RFC 8030 §5.3).
var urgencies = [...]string{"very-low", "low", "normal", "high"}

// parseUrgency checks the Urgency header's n field lines (v: the last);
// "" when absent.
func parseUrgency(v []byte, n int) (string, *errno.HTTPError) {
	switch {
	case n == 0:
		return "", nil
	case n > 1:
		return "", errUrgency
	}
	for _, u := range urgencies {
		if equalFold(v, u) {
			return u, nil
		}
	}
	return "", errUrgency
}

// Content codings (RFC 8188, and the legacy draft), as kept.
const (
	AES128GCM = "aes128gcm"
	AESGCM    = "aesgcm"
)

// parseEncoding checks the Content-Encoding header's n field lines (v:
// the last) of a push with a body and returns the coding in lower case.
func parseEncoding(v []byte, n int) (string, *errno.HTTPError) {
	switch {
	case n == 0 || n == 1 && len(v) == 0:
		return "", errInvalidCrypto("Missing Content-Encoding header")
	case n > 1:
		return "", errInvalidCrypto("Content-Encoding must be sent once")
	case equalFold(v, AES128GCM):
		return AES128GCM, nil
	case equalFold(v, AESGCM):
		return AESGCM, nil
	}
	return "", errInvalidCrypto("Unknown Content-Encoding header")
}

// Parse reads every push header of req; hasData says whether the push
// has a body.
func Parse(req *hertzproto.RequestHeader, hasData bool) (Headers, *errno.HTTPError) {
	f := collect(req)
	return f.parse(hasData)
}

// parse applies the header rules to the collected fields.
func (f *fields) parse(hasData bool) (Headers, *errno.HTTPError) {
	var h Headers
	var e *errno.HTTPError
	if h.TTL, e = parseTTL(f.ttl, f.nTTL); e != nil {
		return h, e
	}
	if h.Topic, e = parseTopic(f.topic, f.nTopic); e != nil {
		return h, e
	}
	if h.Urgency, e = parseUrgency(f.urgency, f.nUrgency); e != nil {
		return h, e
	}
	if !hasData {
		return h, nil
	}
	if h.Encoding, e = parseEncoding(f.encoding, f.nEncoding); e != nil {
		return h, e
	}
	if len(f.encryption) > 0 {
		h.Encryption = stripHeader(f.encryption)
	}
	if len(f.cryptoKey) > 0 {
		h.CryptoKey = stripHeader(f.cryptoKey)
	}
	if len(f.encryptionKey) > 0 {
		h.EncryptionKey = string(f.encryptionKey)
	}
	return h, h.checkEncryption()
}

// checkEncryption applies the Content-Encoding rules to a push with a
// body.
func (h *Headers) checkEncryption() *errno.HTTPError {
	switch h.Encoding {
	case AES128GCM:
		if e := assertNotExists("aes128gcm Encryption", h.Encryption, "salt"); e != nil {
			return e
		}
		if e := assertNotExists("aes128gcm Crypto-Key", h.CryptoKey, "dh"); e != nil {
			return e
		}
	case AESGCM:
		if e := assertBase64ItemExists("Encryption", h.Encryption, "salt"); e != nil {
			return e
		}
		if h.EncryptionKey != "" {
			return errInvalidCrypto("Encryption-Key header is not valid for webpush draft 02 or later")
		}
		if e := assertBase64ItemExists("Crypto-Key", h.CryptoKey, "dh"); e != nil {
			return e
		}
	default:
		return errInvalidCrypto("Unknown Content-Encoding header")
	}
	if len("encoding")+len(h.Encoding)+len("encryption")+len(h.Encryption)+
		len("crypto_key")+len(h.CryptoKey)+len("encryption_key")+len(h.EncryptionKey) > maxCryptoHeaderBytes {
		return errInvalidCrypto("Crypto headers are too large")
	}
	return nil
}

// Append appends the crypto headers the client needs, in the
// reference's names, to dst; none for a push without a body.
func (h *Headers) Append(dst []protocol.Header) []protocol.Header {
	if h.Encoding == "" {
		return dst
	}
	dst = append(dst, protocol.Header{Name: "encoding", Value: h.Encoding})
	if h.Encryption != "" {
		dst = append(dst, protocol.Header{Name: "encryption", Value: h.Encryption})
	}
	if h.CryptoKey != "" {
		dst = append(dst, protocol.Header{Name: "crypto_key", Value: h.CryptoKey})
	}
	if h.EncryptionKey != "" {
		dst = append(dst, protocol.Header{Name: "encryption_key", Value: h.EncryptionKey})
	}
	return dst
}

// assertBase64ItemExists requires header to hold key=<base64url>.
func assertBase64ItemExists(name, header, key string) *errno.HTTPError {
	if header == "" {
		return errMissingCrypto("Missing " + name + " header")
	}
	v, ok, valid := cryptoKeyItem(header, key)
	switch {
	case !valid:
		return errInvalidCrypto("Invalid " + name + " header")
	case !ok:
		return errMissingCrypto("Missing " + key + " value in " + name + " header")
	case !isPaddedBase64URL(v):
		return errInvalidCrypto("Invalid " + key + " value in " + name + " header")
	}
	return nil
}

// assertNotExists refuses header when it holds key=.
func assertNotExists(name, header, key string) *errno.HTTPError {
	if header == "" {
		return nil
	}
	_, ok, valid := cryptoKeyItem(header, key)
	switch {
	case !valid:
		return errInvalidCrypto("Invalid " + name + " header")
	case ok:
		return errInvalidCrypto("Do not include '" + key + "' header in " + name + " header")
	}
	return nil
}

// cryptoKeyItem finds key in a Crypto-Key style header: sections
// separated by ',', items by ';', each item key=value (the value's
// surrounding spaces and quotes trimmed). It returns the first match;
// valid is false when an item has no '=' (the reference refuses those;
// empty items, such as a trailing ';', are skipped here).
func cryptoKeyItem(header, key string) (value string, found, valid bool) {
	for section := range strings.SplitSeq(header, ",") {
		for item := range strings.SplitSeq(section, ";") {
			if strings.TrimSpace(item) == "" {
				continue
			}
			k, v, ok := strings.Cut(item, "=")
			if !ok {
				return "", false, false
			}
			if !found && strings.TrimSpace(k) == key {
				value, found = strings.Trim(v, ` "`), true
			}
		}
	}
	return value, found, true
}

// isPaddedBase64URL is the reference's ^[0-9A-Za-z\-_]+=*$.
func isPaddedBase64URL(s string) bool {
	i := 0
	for ; i < len(s) && isBase64URLChar(s[i]); i++ {
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// stripHeader removes double quotes and the '=' padding that ends a
// base64 value (a run of '=' after a url-safe character and before ',',
// ';' or the end), as the reference's strip_header does.
func stripHeader(v []byte) string {
	out := make([]byte, 0, len(v))
	for _, c := range v {
		if c != '"' {
			out = append(out, c)
		}
	}
	w := 0
	for i := 0; i < len(out); {
		if out[i] != '=' || w == 0 || !isBase64URLChar(out[w-1]) {
			out[w] = out[i]
			w, i = w+1, i+1
			continue
		}
		j := i
		for j < len(out) && out[j] == '=' {
			j++
		}
		if j == len(out) || out[j] == ',' || out[j] == ';' {
			i = j // padding: dropped
			continue
		}
		w += copy(out[w:], out[i:j])
		i = j
	}
	return string(out[:w])
}
