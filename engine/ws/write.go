package ws

import (
	"encoding/binary"
	"unicode/utf8"
)

// Server frames are never masked (RFC 6455 §5.1) and never fragmented here:
// the node's messages are small JSON documents. Every Append function only
// appends, so it allocates nothing when dst has room.

// AppendHeader appends a server frame header for a payload of length bytes.
func AppendHeader(dst []byte, fin bool, op OpCode, length int) []byte {
	b0 := byte(op) & 0x0f
	if fin {
		b0 |= 0x80
	}
	switch {
	case length < 126:
		return append(dst, b0, byte(length))
	case length <= 0xffff:
		return append(dst, b0, 126, byte(length>>8), byte(length))
	default:
		dst = append(dst, b0, 127)
		return binary.BigEndian.AppendUint64(dst, uint64(length))
	}
}

// AppendFrame appends a final, unmasked frame. It does not check control
// frame limits; prefer AppendPing, AppendPong and AppendClose for those.
func AppendFrame(dst []byte, op OpCode, payload []byte) []byte {
	dst = AppendHeader(dst, true, op, len(payload))
	return append(dst, payload...)
}

// AppendText appends a text message; p must be valid UTF-8 (not checked:
// the node writes JSON it encoded itself).
func AppendText(dst, p []byte) []byte { return AppendFrame(dst, OpText, p) }

// AppendTextString is AppendText for a string.
func AppendTextString(dst []byte, s string) []byte {
	dst = AppendHeader(dst, true, OpText, len(s))
	return append(dst, s...)
}

// AppendBinary appends a binary message.
func AppendBinary(dst, p []byte) []byte { return AppendFrame(dst, OpBinary, p) }

// AppendPing appends a ping; p beyond MaxControlPayload bytes is dropped.
func AppendPing(dst, p []byte) []byte {
	return AppendFrame(dst, OpPing, p[:min(len(p), MaxControlPayload)])
}

// AppendPong appends a pong, normally echoing a ping's payload (which
// ParseFrame already limited to MaxControlPayload bytes).
func AppendPong(dst, p []byte) []byte {
	return AppendFrame(dst, OpPong, p[:min(len(p), MaxControlPayload)])
}

// AppendClose appends a close frame. code 0 or StatusNoStatusRcvd gives an
// empty body (no status). reason is cut at a character boundary to fit the
// 123 bytes a close frame leaves for it.
func AppendClose(dst []byte, code StatusCode, reason string) []byte {
	if code == 0 || code == StatusNoStatusRcvd {
		return AppendHeader(dst, true, OpClose, 0)
	}
	if len(reason) > MaxControlPayload-2 {
		cut := MaxControlPayload - 2
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut]
	}
	dst = AppendHeader(dst, true, OpClose, 2+len(reason))
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	return append(dst, reason...)
}

// frameReserve is the header room BeginFrame reserves: enough for payloads
// up to 64 KiB, which the node's messages always are.
const frameReserve = 4

// BeginFrame starts a frame whose payload the caller appends directly to
// the returned slice (e.g. JSON encoded straight into the outbound buffer,
// without knowing its length up front). Finish it with EndFrame, passing
// the returned mark.
func BeginFrame(dst []byte) (buf []byte, mark int) {
	return append(dst, 0, 0, 0, 0), len(dst)
}

// EndFrame writes the header of the frame begun at mark, whose payload is
// everything appended since, and returns the finished buffer. Payloads
// under 126 bytes are moved 2 bytes back; payloads over 64 KiB 6 bytes
// forward (the only case that may grow buf).
func EndFrame(buf []byte, mark int, op OpCode) []byte {
	start := mark + frameReserve
	n := len(buf) - start
	switch {
	case n < 126:
		AppendHeader(buf[mark:mark], true, op, n)
		copy(buf[mark+2:], buf[start:])
		return buf[:len(buf)-2]
	case n <= 0xffff:
		AppendHeader(buf[mark:mark], true, op, n)
		return buf
	default:
		buf = append(buf, make([]byte, 6)...)
		copy(buf[start+6:], buf[start:start+n])
		AppendHeader(buf[mark:mark], true, op, n)
		return buf
	}
}
