package ws

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func TestParseFrameOK(t *testing.T) {
	tests := []struct {
		name    string
		frame   []byte
		fin     bool
		op      OpCode
		payload string
	}{
		{"text", text("hello"), true, OpText, "hello"},
		{"empty text", text(""), true, OpText, ""},
		{"125 bytes", text(strings.Repeat("a", 125)), true, OpText, strings.Repeat("a", 125)},
		{"16-bit length", text(strings.Repeat("b", 126)), true, OpText, strings.Repeat("b", 126)},
		{"16-bit max", clientFrame(true, 0, OpBinary, bytes.Repeat([]byte{7}, 0xffff)), true, OpBinary, strings.Repeat("\x07", 0xffff)},
		{"64-bit length", clientFrame(true, 0, OpBinary, bytes.Repeat([]byte{9}, 0x10000)), true, OpBinary, strings.Repeat("\x09", 0x10000)},
		{"fragment", clientFrame(false, 0, OpText, []byte("frag")), false, OpText, "frag"},
		{"continuation", clientFrame(true, 0, OpContinuation, []byte("ment")), true, OpContinuation, "ment"},
		{"ping", clientFrame(true, 0, OpPing, []byte("p")), true, OpPing, "p"},
		{"ping 125", clientFrame(true, 0, OpPing, bytes.Repeat([]byte{1}, 125)), true, OpPing, strings.Repeat("\x01", 125)},
		{"pong", clientFrame(true, 0, OpPong, nil), true, OpPong, ""},
		{"close", clientFrame(true, 0, OpClose, closeBody(1000, "bye")), true, OpClose, "\x03\xe8bye"},
		// Non-minimal length encodings are tolerated.
		{"non-minimal 16-bit", append(append([]byte{0x81, 0x80 | 126, 0, 2}, testMask[:]...), 'h'^testMask[0], 'i'^testMask[1]), true, OpText, "hi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := text("next")
			buf := concat(tt.frame, next)
			h, p, n, err := ParseFrame(buf, 1<<20)
			if err != nil || n != len(tt.frame) {
				t.Fatalf("n=%d err=%v, want n=%d", n, err, len(tt.frame))
			}
			if h.Fin != tt.fin || h.OpCode != tt.op || !h.Masked || h.Mask != testMask ||
				h.Length != int64(len(tt.payload)) || h.Rsv != 0 {
				t.Fatalf("header %+v", h)
			}
			if string(p) != tt.payload {
				t.Fatalf("payload %q", p)
			}
			if cap(p) != len(p) {
				t.Fatalf("payload cap %d reaches into the next frame", cap(p))
			}
			if !bytes.Equal(buf[n:], next) {
				t.Fatal("next frame was touched")
			}
			// Every strict prefix is need-more and leaves the bytes as they were.
			for k := range len(tt.frame) {
				if k > 32 && k < len(tt.frame)-32 && k%1009 != 0 {
					continue // keep the 64 KiB cases fast
				}
				cp := bytes.Clone(tt.frame[:k])
				h, p, n, err := ParseFrame(cp, 1<<20)
				if n != 0 || err != nil || p != nil || h != (Header{}) {
					t.Fatalf("prefix %d: n=%d err=%v", k, n, err)
				}
				if !bytes.Equal(cp, tt.frame[:k]) {
					t.Fatalf("prefix %d modified", k)
				}
			}
		})
	}
}

func TestParseFrameErrors(t *testing.T) {
	unmasked := []byte{0x81, 0x02, 'h', 'i'}
	len64 := func(n uint64) []byte {
		return binary.BigEndian.AppendUint64([]byte{0x82, 0x80 | 127}, n)
	}
	tests := []struct {
		name  string
		frame []byte
		max   int
		want  *CloseError
	}{
		{"RSV1 (permessage-deflate not negotiated)", clientFrame(true, 4, OpText, []byte("x")), 0, ErrReservedBits},
		{"RSV2", clientFrame(true, 2, OpText, nil), 0, ErrReservedBits},
		{"RSV3", clientFrame(true, 1, OpPing, nil), 0, ErrReservedBits},
		{"opcode 3", clientFrame(true, 0, 3, nil), 0, ErrReservedOpcode},
		{"opcode 7", clientFrame(true, 0, 7, nil), 0, ErrReservedOpcode},
		{"opcode 0xB", clientFrame(true, 0, 0xb, nil), 0, ErrReservedOpcode},
		{"opcode 0xF", clientFrame(true, 0, 0xf, nil), 0, ErrReservedOpcode},
		{"fragmented ping", clientFrame(false, 0, OpPing, nil), 0, ErrControlFragmented},
		{"fragmented close", clientFrame(false, 0, OpClose, nil), 0, ErrControlFragmented},
		{"ping 126", clientFrame(true, 0, OpPing, make([]byte, 126)), 0, ErrControlTooLong},
		{"close 64-bit length", []byte{0x88, 0x80 | 127}, 0, ErrControlTooLong},
		{"unmasked", unmasked, 0, ErrUnmasked},
		{"unmasked, header only", unmasked[:2], 0, ErrUnmasked},
		{"length MSB", len64(1 << 63), 0, ErrBadLength},
		{"length MSB, limited", len64(1<<63 | 5), 10, ErrBadLength},
		{"over max, 7-bit", text("0123456789a"), 10, ErrFrameTooBig},
		{"over max, 16-bit header only", []byte{0x81, 0x80 | 126, 0x01, 0x00}, 255, ErrFrameTooBig},
		{"over max, 64-bit header only", len64(1 << 40), 1 << 20, ErrFrameTooBig},
		{"over int range, no max", len64(1<<63 - 1), 0, ErrFrameTooBig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, p, n, err := ParseFrame(tt.frame, tt.max)
			if err != tt.want {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if n != 0 || p != nil || h != (Header{}) {
				t.Fatalf("n=%d p=%q h=%+v on error", n, p, h)
			}
		})
	}
	// The limit is inclusive.
	if _, _, n, err := ParseFrame(text("0123456789"), 10); err != nil || n == 0 {
		t.Fatalf("frame of exactly max: n=%d err=%v", n, err)
	}
}

func TestCloseErrorCodes(t *testing.T) {
	for _, e := range []*CloseError{ErrReservedBits, ErrReservedOpcode, ErrControlFragmented,
		ErrControlTooLong, ErrUnmasked, ErrBadLength, ErrUnexpectedContinuation,
		ErrExpectedContinuation, ErrCloseTooShort, ErrCloseCode} {
		if e.Code != StatusProtocolError {
			t.Errorf("%v: code %d", e, e.Code)
		}
	}
	for _, e := range []*CloseError{ErrFrameTooBig, ErrMessageTooBig} {
		if e.Code != StatusMessageTooBig {
			t.Errorf("%v: code %d", e, e.Code)
		}
	}
	for _, e := range []*CloseError{ErrInvalidUTF8, ErrCloseReasonUTF8} {
		if e.Code != StatusInvalidFramePayloadData {
			t.Errorf("%v: code %d", e, e.Code)
		}
	}
	out := ErrFrameTooBig.AppendClose(nil)
	want := append([]byte{0x88, byte(2 + len(ErrFrameTooBig.Reason)), 0x03, 0xf1}, ErrFrameTooBig.Reason...)
	if !bytes.Equal(out, want) {
		t.Fatalf("close frame %q, want %q", out, want)
	}
	if got := ErrFrameTooBig.Error(); got != "ws: frame too big (close 1009)" {
		t.Fatalf("Error() = %q", got)
	}
}
