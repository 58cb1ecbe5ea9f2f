package ws

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	gws "github.com/gobwas/ws"
)

// firefoxUpgrade is the handshake Firefox 153 sends to a push server.
const firefoxUpgrade = "GET / HTTP/1.1\r\n" +
	"Host: 127.0.0.1:8080\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0\r\n" +
	"Accept: */*\r\n" +
	"Accept-Language: en-US,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate\r\n" +
	"Sec-WebSocket-Version: 13\r\n" +
	"Origin: null\r\n" +
	"Sec-WebSocket-Protocol: push-notification\r\n" +
	"Sec-WebSocket-Extensions: permessage-deflate\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
	"Connection: keep-alive, Upgrade\r\n" +
	"Pragma: no-cache\r\n" +
	"Cache-Control: no-cache\r\n" +
	"Upgrade: websocket\r\n" +
	"\r\n"

// minimalUpgrade is the smallest valid handshake: no Host, no Origin.
const minimalUpgrade = "GET /ws HTTP/1.1\r\n" +
	"Upgrade: websocket\r\n" +
	"Connection: Upgrade\r\n" +
	"Sec-WebSocket-Version: 13\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
	"\r\n"

// upgradeWith returns minimalUpgrade with the header line named like
// line's name replaced by line ("" value removes it), or line added.
func upgradeWith(lines ...string) string {
	req := minimalUpgrade
	for _, line := range lines {
		name, _, _ := strings.Cut(line, ":")
		start := strings.Index(req, "\r\n"+name+":")
		if start >= 0 {
			end := start + 2 + strings.Index(req[start+2:], "\r\n")
			req = req[:start] + req[end:]
		}
		if !strings.HasSuffix(line, ":") {
			req = strings.TrimSuffix(req, "\r\n") + line + "\r\n\r\n"
		}
	}
	return req
}

var testMask = [4]byte{0x37, 0xfa, 0x21, 0x3d}

// clientFrame encodes a masked frame the way a browser would, with rsv
// as the three RSV bits.
func clientFrame(fin bool, rsv byte, op OpCode, payload []byte) []byte {
	b0 := rsv<<4 | byte(op)
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xffff:
		out = append(out, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	out = append(out, testMask[:]...)
	for i, c := range payload {
		out = append(out, c^testMask[i%4])
	}
	return out
}

func text(s string) []byte { return clientFrame(true, 0, OpText, []byte(s)) }

func closeBody(code StatusCode, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ackJSON is a typical client message on the hot path (an ack).
const ackJSON = `{"messageType":"ack","updates":[{"channelID":"d9b74644-4f97-46aa-b8fa-9393985cd6cd","version":"gAAAAABlnK"}]}`

// readFrameFrom reads one frame with gobwas/ws (an independent decoder),
// refusing payloads over 1 MiB instead of trusting the declared length.
func readFrameFrom(r io.Reader) (gws.Frame, error) {
	h, err := gws.ReadHeader(r)
	if err != nil {
		return gws.Frame{}, err
	}
	if h.Length > 1<<20 {
		return gws.Frame{}, fmt.Errorf("frame of %d bytes", h.Length)
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		return gws.Frame{}, err
	}
	if h.Masked {
		gws.Cipher(p, h.Mask, 0)
	}
	return gws.Frame{Header: h, Payload: p}, nil
}
