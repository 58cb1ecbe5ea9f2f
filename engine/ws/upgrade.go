package ws

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"strconv"
	"strings"
)

// MaxUpgradeSize bounds the request head (request line, headers and the blank
// line). Firefox's handshake is about 600 bytes; anything near the bound is
// not a browser, and the bound caps what a connection can make us buffer
// before it is a websocket.
const MaxUpgradeSize = 8 << 10

// PushProtocol is the subprotocol Firefox offers on its push connection.
const PushProtocol = "push-notification"

// Upgrade is a parsed, valid websocket opening handshake. Its strings are
// copies and may be kept after the input buffer is reused.
type Upgrade struct {
	// Path is the request-target as sent (origin-form "/..." for browsers).
	Path string
	// Host, Origin and UserAgent are the first such header's value with
	// surrounding whitespace removed, "" when absent. They are not checked:
	// the push service serves any host and origin (Firefox sends
	// "Origin: null" or none).
	Host      string
	Origin    string
	UserAgent string
	// Key is the client's Sec-WebSocket-Key, 24 base64 characters.
	Key string
	// OffersPush reports whether Sec-WebSocket-Protocol lists PushProtocol.
	OffersPush bool
}

// Protocol returns the subprotocol to select in the response: PushProtocol
// when the client offered it, "" (select none) otherwise.
func (u *Upgrade) Protocol() string {
	if u.OffersPush {
		return PushProtocol
	}
	return ""
}

// UpgradeError is a refused handshake: Status is the HTTP status to answer
// with, Reason a short text (also used as the response body).
type UpgradeError struct {
	Status int
	Reason string
	// headers are extra response headers the status requires (e.g. Allow
	// for 405), as name, value pairs.
	headers []string
}

func (e *UpgradeError) Error() string {
	return "ws: upgrade refused (" + strconv.Itoa(e.Status) + "): " + e.Reason
}

// AppendResponse appends the complete HTTP error response for e (with
// Connection: close and the headers its status requires) to dst.
func (e *UpgradeError) AppendResponse(dst []byte) []byte {
	return AppendHTTPResponse(dst, e.Status, e.Reason+"\n", e.headers...)
}

func upgradeErr(status int, reason string, headers ...string) *UpgradeError {
	return &UpgradeError{Status: status, Reason: reason, headers: headers}
}

// Handshake errors. Compare with errors.Is or ==.
var (
	// ErrUpgradeTooLarge: no end of head within MaxUpgradeSize bytes.
	ErrUpgradeTooLarge = upgradeErr(431, "request header fields too large")
	// ErrMalformedRequest: request line or header syntax is broken.
	ErrMalformedRequest = upgradeErr(400, "malformed HTTP request")
	// ErrMethodNotAllowed: a method other than GET.
	ErrMethodNotAllowed = upgradeErr(405, "method not allowed", "Allow", "GET")
	// ErrHTTPVersion: not HTTP/1.x with x >= 1 (505 for another major
	// version, 400 for HTTP/1.0, which cannot upgrade).
	ErrHTTPVersion    = upgradeErr(505, "HTTP version not supported")
	ErrHTTP10         = upgradeErr(400, "websocket requires HTTP/1.1")
	ErrRequestBody    = upgradeErr(400, "upgrade request must not have a body")
	ErrDuplicateField = upgradeErr(400, "duplicate Sec-WebSocket header")
	// ErrNotWebSocket: a well-formed GET without "Upgrade: websocket". The
	// returned Upgrade still carries Path etc. so a plain HTTP request (a
	// load balancer's health check) can be answered by path instead.
	ErrNotWebSocket = upgradeErr(426, "websocket upgrade required",
		"Upgrade", "websocket", "Sec-WebSocket-Version", "13")
	ErrConnectionHeader = upgradeErr(400, "Connection header lacks upgrade")
	ErrMissingVersion   = upgradeErr(400, "missing Sec-WebSocket-Version")
	// ErrUnsupportedVersion: Sec-WebSocket-Version is not 13; RFC 6455
	// §4.4 asks for 426 naming the version we speak.
	ErrUnsupportedVersion = upgradeErr(426, "unsupported Sec-WebSocket-Version",
		"Upgrade", "websocket", "Sec-WebSocket-Version", "13")
	ErrBadKey = upgradeErr(400, "missing or invalid Sec-WebSocket-Key")
)

var headEnd = []byte("\r\n\r\n")

// ParseUpgrade parses a websocket opening handshake (RFC 6455 §4.2.1) from
// the start of buf.
//
// n == 0 and err == nil: the head is not complete yet; call again with more
// bytes. Otherwise n is the length of the head (bytes after it, if any, are
// already websocket frames). On error, err is an *UpgradeError to answer
// with (see AppendResponse) before closing; n is 0 only for
// ErrUpgradeTooLarge. When the head was well-formed HTTP but not a valid
// handshake, req holds what was parsed (Path, Host, ...).
func ParseUpgrade(buf []byte) (req Upgrade, n int, err error) {
	end, tooLarge := findHead(buf)
	switch {
	case tooLarge:
		return Upgrade{}, 0, ErrUpgradeTooLarge
	case end < 0:
		return Upgrade{}, 0, nil
	}
	n = end + len(headEnd)
	var p headParse
	if err := p.parse(buf[:end+2]); err != nil {
		return Upgrade{}, n, err
	}
	req = p.strings()
	return req, n, p.check()
}

// findHead returns where the blank line ending an HTTP head starts in buf,
// -1 while it is not there yet, and tooLarge when there is none within
// MaxUpgradeSize bytes.
func findHead(buf []byte) (end int, tooLarge bool) {
	scan := buf
	if len(scan) > MaxUpgradeSize {
		scan = scan[:MaxUpgradeSize]
	}
	end = bytes.Index(scan, headEnd)
	return end, end < 0 && len(buf) >= MaxUpgradeSize
}

// headParse holds slices into the input while the head is validated.
type headParse struct {
	path, host, origin, ua, key []byte

	offersPush, upgradeWS, connUpgrade bool
	hasVersion, version13, hasKey      bool
}

// parse checks the syntax of head (request line and header lines, each
// ending in CRLF) and records the fields we care about.
func (p *headParse) parse(head []byte) error {
	i := bytes.Index(head, crlf) // present: head ends in CRLF
	if err := p.requestLine(head[:i]); err != nil {
		return err
	}
	for rest := head[i+2:]; len(rest) > 0; {
		i = bytes.Index(rest, crlf)
		if err := p.field(rest[:i]); err != nil {
			return err
		}
		rest = rest[i+2:]
	}
	return nil
}

var crlf = []byte("\r\n")

func (p *headParse) requestLine(line []byte) error {
	method, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok || len(method) == 0 || !isToken(method) {
		return ErrMalformedRequest
	}
	target, version, ok := bytes.Cut(rest, []byte{' '})
	if !ok || len(target) == 0 {
		return ErrMalformedRequest
	}
	for _, c := range target {
		if c <= ' ' || c == 0x7f {
			return ErrMalformedRequest
		}
	}
	// HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 §2.3).
	if len(version) != 8 || string(version[:5]) != "HTTP/" || version[6] != '.' ||
		!isDigit(version[5]) || !isDigit(version[7]) {
		return ErrMalformedRequest
	}
	if string(method) != "GET" {
		return ErrMethodNotAllowed
	}
	switch {
	case version[5] != '1':
		return ErrHTTPVersion
	case version[7] == '0':
		return ErrHTTP10
	}
	p.path = target
	return nil
}

func (p *headParse) field(line []byte) error {
	name, value, ok := bytes.Cut(line, []byte{':'})
	// A name must be a token: this also rejects obs-fold continuation
	// lines and whitespace before the colon (RFC 9112 §5.1, §5.2).
	if !ok || len(name) == 0 || !isToken(name) {
		return ErrMalformedRequest
	}
	value = trimOWS(value)
	for _, c := range value {
		// CTLs other than HTAB include bare CR and LF, i.e. lines not
		// ended by CRLF.
		if (c < ' ' && c != '\t') || c == 0x7f {
			return ErrMalformedRequest
		}
	}
	switch {
	case fieldIs(name, "Host"):
		if p.host == nil {
			p.host = value
		}
	case fieldIs(name, "Origin"):
		if p.origin == nil {
			p.origin = value
		}
	case fieldIs(name, "User-Agent"):
		if p.ua == nil {
			p.ua = value
		}
	case fieldIs(name, "Upgrade"):
		p.upgradeWS = p.upgradeWS || hasToken(value, "websocket", true)
	case fieldIs(name, "Connection"):
		p.connUpgrade = p.connUpgrade || hasToken(value, "upgrade", true)
	case fieldIs(name, "Sec-WebSocket-Version"):
		if p.hasVersion {
			return ErrDuplicateField
		}
		p.hasVersion = true
		p.version13 = string(value) == "13"
	case fieldIs(name, "Sec-WebSocket-Key"):
		if p.hasKey {
			return ErrDuplicateField
		}
		p.hasKey = true
		p.key = value
	case fieldIs(name, "Sec-WebSocket-Protocol"):
		// Subprotocol names compare case-sensitively (RFC 6455 §4.1).
		p.offersPush = p.offersPush || hasToken(value, PushProtocol, false)
	case fieldIs(name, "Transfer-Encoding"):
		return ErrRequestBody
	case fieldIs(name, "Content-Length"):
		// Bytes after the head are frames; a body would be ambiguous.
		if string(value) != "0" {
			return ErrRequestBody
		}
	}
	return nil
}

// check validates the websocket part of a syntactically valid head.
func (p *headParse) check() error {
	switch {
	case !p.upgradeWS:
		return ErrNotWebSocket
	case !p.connUpgrade:
		return ErrConnectionHeader
	case !p.hasVersion:
		return ErrMissingVersion
	case !p.version13:
		return ErrUnsupportedVersion
	case !validKey(p.key):
		return ErrBadKey
	}
	return nil
}

// strings copies the kept fields out of the input with one allocation.
func (p *headParse) strings() Upgrade {
	var sb strings.Builder
	sb.Grow(len(p.path) + len(p.host) + len(p.origin) + len(p.ua) + len(p.key))
	for _, f := range [...][]byte{p.path, p.host, p.origin, p.ua, p.key} {
		sb.Write(f)
	}
	all := sb.String()
	take := func(f []byte) string {
		s := all[:len(f)]
		all = all[len(f):]
		return s
	}
	return Upgrade{
		Path:       take(p.path),
		Host:       take(p.host),
		Origin:     take(p.origin),
		UserAgent:  take(p.ua),
		Key:        take(p.key),
		OffersPush: p.offersPush,
	}
}

// validKey reports whether k is base64 of exactly 16 bytes (RFC 6455 §4.1).
func validKey(k []byte) bool {
	if len(k) != 24 {
		return false
	}
	var raw [18]byte
	n, err := base64.StdEncoding.Decode(raw[:], k)
	return err == nil && n == 16
}

// hasToken reports whether the comma-separated list contains tok, compared
// ASCII case-insensitively when fold is set.
func hasToken(list []byte, tok string, fold bool) bool {
	for len(list) > 0 {
		var item []byte
		item, list, _ = bytes.Cut(list, []byte{','})
		item = trimOWS(item)
		if fold && fieldIs(item, tok) || !fold && string(item) == tok {
			return true
		}
	}
	return false
}

// fieldIs compares b to an ASCII name case-insensitively.
func fieldIs(b []byte, name string) bool {
	if len(b) != len(name) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != lower(name[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isToken reports whether b is an RFC 9110 token (tchar+).
func isToken(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 || !tchar[c] {
			return false
		}
	}
	return true
}

var tchar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// acceptGUID is the fixed GUID of RFC 6455 §1.3.
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// AppendAccept appends the Sec-WebSocket-Accept value for key:
// base64(SHA-1(key + GUID)), RFC 6455 §4.2.2.
func AppendAccept(dst []byte, key string) []byte {
	// A stack buffer keeps the hash input off the heap for real keys
	// (24 bytes); an oversized key is still answered, just less cheaply.
	var in [64]byte
	var sum [sha1.Size]byte
	if len(key)+len(acceptGUID) <= len(in) {
		m := copy(in[:], key)
		m += copy(in[m:], acceptGUID)
		sum = sha1.Sum(in[:m])
	} else {
		sum = sha1.Sum([]byte(key + acceptGUID))
	}
	return base64.StdEncoding.AppendEncode(dst, sum[:])
}

// AppendUpgradeResponse appends the 101 Switching Protocols response
// accepting req. protocol is the selected subprotocol, normally
// req.Protocol(); "" selects none. It must be one the client offered, or
// the browser fails the connection. No extension is accepted.
func AppendUpgradeResponse(dst []byte, req *Upgrade, protocol string) []byte {
	dst = append(dst, "HTTP/1.1 101 Switching Protocols\r\n"+
		"Upgrade: websocket\r\n"+
		"Connection: Upgrade\r\n"+
		"Sec-WebSocket-Accept: "...)
	dst = AppendAccept(dst, req.Key)
	dst = append(dst, "\r\n"...)
	if protocol != "" {
		dst = append(dst, "Sec-WebSocket-Protocol: "...)
		dst = append(dst, protocol...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// AppendHTTPResponse appends a complete HTTP/1.1 response with a body
// (plain text unless headers name a Content-Type) and Connection: close:
// a refused upgrade (400, 426, 503 when the node is full, ...) or a tiny
// plain-HTTP answer such as a health check's 200.
// headers are extra headers as name, value pairs, e.g. "Retry-After", "30"
// (a trailing name without value is ignored). They and body are written as
// given, so they must not come from the client unchecked.
func AppendHTTPResponse(dst []byte, status int, body string, headers ...string) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	dst = append(dst, statusText(status)...)
	dst = append(dst, "\r\n"...)
	for i := 0; i+1 < len(headers); i += 2 {
		dst = append(dst, headers[i]...)
		dst = append(dst, ": "...)
		dst = append(dst, headers[i+1]...)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "Connection: close\r\n"...)
	if body != "" && !hasField(headers, "Content-Type") {
		dst = append(dst, "Content-Type: text/plain; charset=utf-8\r\n"...)
	}
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, body...)
}

// hasField reports whether the name, value pairs name the field.
func hasField(headers []string, name string) bool {
	for i := 0; i+1 < len(headers); i += 2 {
		if fieldIs([]byte(headers[i]), name) {
			return true
		}
	}
	return false
}

// statusText covers the statuses the node answers with; net/http is not
// imported for its table.
func statusText(status int) string {
	switch status {
	case 101:
		return "Switching Protocols"
	case 200:
		return "OK"
	case 204:
		return "No Content"
	case 400:
		return "Bad Request"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 408:
		return "Request Timeout"
	case 413:
		return "Content Too Large"
	case 426:
		return "Upgrade Required"
	case 429:
		return "Too Many Requests"
	case 431:
		return "Request Header Fields Too Large"
	case 500:
		return "Internal Server Error"
	case 503:
		return "Service Unavailable"
	case 505:
		return "HTTP Version Not Supported"
	}
	return "Status " + strconv.Itoa(status)
}
