package loadtest

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

// The client side of RFC 6455, as pure functions over byte slices: the
// event loop feeds them what it read and writes what they append. The load
// tester keeps its own codec rather than the engine's, so a bug shared by
// both cannot hide.

// Websocket opcodes.
const (
	opCont  = 0x0
	opText  = 0x1
	opClose = 0x8
	opPing  = 0x9
	opPong  = 0xA
)

// maxServerFrame bounds a frame from the server: notifications are under
// 8 KiB, so anything near this is a bug.
const maxServerFrame = 1 << 20

// maxUpgradeResponse bounds the HTTP response head.
const maxUpgradeResponse = 8 << 10

const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// appendUpgradeRequest appends the HTTP request that opens a push
// websocket, offering Firefox's subprotocol. key is the 16 random bytes of
// Sec-WebSocket-Key.
func appendUpgradeRequest(dst []byte, host string, key [16]byte) []byte {
	dst = append(dst, "GET / HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	dst = append(dst, "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Protocol: push-notification\r\nSec-WebSocket-Key: "...)
	dst = base64.StdEncoding.AppendEncode(dst, key[:])
	return append(dst, "\r\n\r\n"...)
}

// acceptFor is the Sec-WebSocket-Accept a server must answer key with.
func acceptFor(key [16]byte) []byte {
	h := sha1.New()
	h.Write(base64.StdEncoding.AppendEncode(nil, key[:]))
	h.Write([]byte(wsGUID))
	return base64.StdEncoding.AppendEncode(nil, h.Sum(nil))
}

// UpgradeError is a refused upgrade: the engine answered with an HTTP
// status other than 101 (503 when it is at capacity or draining).
type UpgradeError struct{ Status int }

func (e *UpgradeError) Error() string { return fmt.Sprintf("upgrade: HTTP %d", e.Status) }

// parseUpgradeResponse returns the length of a complete 101 response head
// in buf, 0 when more bytes are needed, or an error.
func parseUpgradeResponse(buf []byte, key [16]byte) (int, error) {
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		if len(buf) > maxUpgradeResponse {
			return 0, errors.New("upgrade: response head too long")
		}
		return 0, nil
	}
	head := buf[:end]
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	var status int
	if _, err := fmt.Sscanf(string(line), "HTTP/1.1 %d", &status); err != nil {
		return 0, fmt.Errorf("upgrade: bad status line %q", line)
	}
	if status != 101 {
		return 0, &UpgradeError{Status: status}
	}
	want := acceptFor(key)
	for len(rest) > 0 {
		var h []byte
		h, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(h, []byte(":"))
		if ok && bytes.EqualFold(bytes.TrimSpace(name), []byte("Sec-WebSocket-Accept")) {
			if !bytes.Equal(bytes.TrimSpace(value), want) {
				return 0, errors.New("upgrade: wrong Sec-WebSocket-Accept")
			}
			return end + 4, nil
		}
	}
	return 0, errors.New("upgrade: no Sec-WebSocket-Accept")
}

// appendClientFrame appends one final, masked frame (clients must mask).
func appendClientFrame(dst []byte, op byte, payload []byte, mask [4]byte) []byte {
	dst = append(dst, 0x80|op)
	switch n := len(payload); {
	case n < 126:
		dst = append(dst, 0x80|byte(n))
	case n <= 0xFFFF:
		dst = append(dst, 0x80|126)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, 0x80|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	dst = append(dst, mask[:]...)
	start := len(dst)
	dst = append(dst, payload...)
	for i := range payload {
		dst[start+i] ^= mask[i&3]
	}
	return dst
}

// appendCloseFrame appends a masked close frame with code.
func appendCloseFrame(dst []byte, code uint16, mask [4]byte) []byte {
	var p [2]byte
	binary.BigEndian.PutUint16(p[:], code)
	return appendClientFrame(dst, opClose, p[:], mask)
}

// serverFrame is one frame parsed from the server; payload aliases the
// input.
type serverFrame struct {
	fin     bool
	op      byte
	payload []byte
}

// parseServerFrame parses one frame at the start of buf. n is 0 when more
// bytes are needed.
func parseServerFrame(buf []byte) (f serverFrame, n int, err error) {
	if len(buf) < 2 {
		return f, 0, nil
	}
	b0, b1 := buf[0], buf[1]
	if b0&0x70 != 0 {
		return f, 0, errors.New("frame: reserved bits set")
	}
	if b1&0x80 != 0 {
		return f, 0, errors.New("frame: server frames must not be masked")
	}
	f.fin, f.op = b0&0x80 != 0, b0&0x0F
	length, hdr := uint64(b1&0x7F), 2
	switch length {
	case 126:
		if len(buf) < 4 {
			return f, 0, nil
		}
		length, hdr = uint64(binary.BigEndian.Uint16(buf[2:4])), 4
	case 127:
		if len(buf) < 10 {
			return f, 0, nil
		}
		length, hdr = binary.BigEndian.Uint64(buf[2:10]), 10
	}
	if length > maxServerFrame {
		return f, 0, fmt.Errorf("frame: %d bytes from the server", length)
	}
	if f.op >= opClose && (!f.fin || length > 125) {
		return f, 0, errors.New("frame: bad control frame")
	}
	if uint64(len(buf)-hdr) < length {
		return f, 0, nil
	}
	f.payload = buf[hdr : hdr+int(length)]
	return f, hdr + int(length), nil
}

// closeCode reads a close frame's status code (1005 when it has none).
func closeCode(payload []byte) int {
	if len(payload) < 2 {
		return 1005
	}
	return int(binary.BigEndian.Uint16(payload))
}
