package ws

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// The client role, for the load tester's user agents and test clients: the
// same pure functions over byte slices as the server side, the other way
// round. Client frames are masked, server frames are not (RFC 6455 §5.1).
// Nothing here allocates when dst has room, except the error of a refused
// upgrade.

// Upgrade response errors from ParseUpgradeResponse. A response other than
// 101 is an *UpgradeError carrying its status instead.
var (
	ErrResponseTooLarge  = errors.New("ws: upgrade response head too large")
	ErrMalformedResponse = errors.New("ws: malformed upgrade response")
	ErrNoAccept          = errors.New("ws: upgrade response without Sec-WebSocket-Accept")
	ErrWrongAccept       = errors.New("ws: wrong Sec-WebSocket-Accept")
)

// ErrMasked is a server frame with the mask bit set (from
// ParseServerFrame).
var ErrMasked = closeErr(StatusProtocolError, "server frame masked")

// AppendUpgradeRequest appends the opening handshake a client sends: GET
// path on host, offering protocol ("" offers none), with key (16 random
// bytes, a fresh one per connection) as Sec-WebSocket-Key.
func AppendUpgradeRequest(dst []byte, host, path string, key [16]byte, protocol string) []byte {
	dst = append(dst, "GET "...)
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	dst = append(dst, "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"...)
	if protocol != "" {
		dst = append(dst, "Sec-WebSocket-Protocol: "...)
		dst = append(dst, protocol...)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "Sec-WebSocket-Key: "...)
	dst = base64.StdEncoding.AppendEncode(dst, key[:])
	return append(dst, "\r\n\r\n"...)
}

// ParseUpgradeResponse parses the server's answer to AppendUpgradeRequest
// with key from the start of buf.
//
// n == 0 and err == nil: the head is not complete yet; call again with
// more bytes. Otherwise n is the length of a 101 head whose
// Sec-WebSocket-Accept answers key (bytes after it are already frames).
// Any other status is an *UpgradeError with that status (503 from a node
// that is full or draining); a head over MaxUpgradeSize, a malformed one or
// a wrong accept is one of the errors above.
func ParseUpgradeResponse(buf []byte, key [16]byte) (n int, err error) {
	end, tooLarge := findHead(buf)
	switch {
	case tooLarge:
		return 0, ErrResponseTooLarge
	case end < 0:
		return 0, nil
	}
	head := buf[:end+2] // every line ends in CRLF
	i := bytes.Index(head, crlf)
	status, ok := statusCode(head[:i])
	switch {
	case !ok:
		return 0, ErrMalformedResponse
	case status != 101:
		return 0, &UpgradeError{Status: status, Reason: "refused by the server"}
	}
	var b64 [24]byte
	base64.StdEncoding.Encode(b64[:], key[:])
	var want [28]byte
	AppendAccept(want[:0], string(b64[:]))
	accepted := false
	for rest := head[i+2:]; len(rest) > 0; {
		i = bytes.Index(rest, crlf)
		name, value, ok := bytes.Cut(rest[:i], []byte{':'})
		if !ok || len(name) == 0 || !isToken(name) {
			return 0, ErrMalformedResponse
		}
		if fieldIs(name, "Sec-WebSocket-Accept") {
			if string(trimOWS(value)) != string(want[:]) {
				return 0, ErrWrongAccept
			}
			accepted = true
		}
		rest = rest[i+2:]
	}
	if !accepted {
		return 0, ErrNoAccept
	}
	return end + len(headEnd), nil
}

// statusCode reads the status of a status line: "HTTP/1.x" SP 3DIGIT (100
// to 999), then SP and a reason phrase, or nothing.
func statusCode(line []byte) (int, bool) {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || !isDigit(line[7]) || line[8] != ' ' ||
		len(line) > 12 && line[12] != ' ' {
		return 0, false
	}
	code := 0
	for _, c := range line[9:12] {
		if !isDigit(c) {
			return 0, false
		}
		code = code*10 + int(c-'0')
	}
	return code, code >= 100
}

// AppendClientFrame appends a final frame masked with mask, as a client
// must send it; mask should be fresh random bytes for every frame. It does
// not check control frame limits.
func AppendClientFrame(dst []byte, op OpCode, payload []byte, mask [4]byte) []byte {
	h := len(dst)
	dst = AppendHeader(dst, true, op, len(payload))
	dst[h+1] |= 0x80 // MASK
	dst = append(dst, mask[:]...)
	p := len(dst)
	dst = append(dst, payload...)
	maskBytes(dst[p:], mask)
	return dst
}

// AppendClientClose appends a masked close frame with code; 0 or
// StatusNoStatusRcvd gives an empty body (no status).
func AppendClientClose(dst []byte, code StatusCode, mask [4]byte) []byte {
	if code == 0 || code == StatusNoStatusRcvd {
		return AppendClientFrame(dst, OpClose, nil, mask)
	}
	var body [2]byte
	binary.BigEndian.PutUint16(body[:], uint16(code))
	return AppendClientFrame(dst, OpClose, body[:], mask)
}

// maskBytes XORs b with mask, eight bytes at a time.
func maskBytes(b []byte, mask [4]byte) {
	k := uint64(binary.LittleEndian.Uint32(mask[:]))
	k |= k << 32
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, binary.LittleEndian.Uint64(b)^k)
		b = b[8:]
	}
	for i := range b {
		b[i] ^= mask[i&3]
	}
}

// ParseServerFrame parses one server frame from the start of buf, with a
// payload of at most maxPayload bytes (maxPayload <= 0: no limit but int
// range). It is ParseFrame for the client: the frame must not be masked,
// and buf is never modified, so the same bytes may be parsed again.
//
// n == 0 and err == nil: the frame is not complete yet; call again with
// more bytes. Otherwise n is the frame's length and payload aliases buf's
// payload bytes (its capacity ends with the frame). An error is a
// *CloseError, decided from the header bytes alone; h is the zero Header on
// need-more or error.
func ParseServerFrame(buf []byte, maxPayload int) (h Header, payload []byte, n int, err error) {
	return parseFrame(buf, maxPayload, false)
}
