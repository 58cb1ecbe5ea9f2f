package ws

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	gws "github.com/gobwas/ws"
)

// readServerFrame decodes a server frame with gobwas/ws, an independent
// implementation.
func readServerFrame(t *testing.T, b []byte) (gws.Frame, int) {
	t.Helper()
	r := bytes.NewReader(b)
	f, err := readFrameFrom(r)
	if err != nil {
		t.Fatalf("gobwas cannot read %q: %v", b[:min(len(b), 32)], err)
	}
	if f.Header.Masked || f.Header.Rsv != 0 {
		t.Fatalf("server frame masked or with RSV: %+v", f.Header)
	}
	return f, len(b) - r.Len()
}

func TestAppendFrameLengths(t *testing.T) {
	for _, n := range []int{0, 1, 125, 126, 127, 0xffff, 0x10000, 70000} {
		p := bytes.Repeat([]byte{'z'}, n)
		out := AppendText([]byte("pre"), p)
		f, used := readServerFrame(t, out[3:])
		if used != len(out)-3 || !f.Header.Fin || f.Header.OpCode != OpText || !bytes.Equal(f.Payload, p) {
			t.Fatalf("len %d: %+v used %d", n, f.Header, used)
		}
		if s := AppendTextString(nil, string(p)); !bytes.Equal(s, out[3:]) {
			t.Fatalf("len %d: AppendTextString differs", n)
		}
		// BeginFrame/EndFrame produce the same bytes, after a prefix.
		buf, mark := BeginFrame([]byte("pre"))
		buf = append(buf, p...)
		buf = EndFrame(buf, mark, OpText)
		if !bytes.Equal(buf, out) {
			t.Fatalf("len %d: EndFrame gives %q...", n, buf[:min(len(buf), 16)])
		}
	}
	if f, _ := readServerFrame(t, AppendBinary(nil, []byte{0, 1})); f.Header.OpCode != OpBinary {
		t.Fatal(f.Header)
	}
	if h := AppendHeader(nil, false, OpContinuation, 3); !bytes.Equal(h, []byte{0x00, 3}) {
		t.Fatalf("%x", h)
	}
}

func TestAppendControl(t *testing.T) {
	long := bytes.Repeat([]byte{'p'}, 200)
	for _, tc := range []struct {
		out  []byte
		op   OpCode
		want []byte
	}{
		{AppendPing(nil, []byte("hi")), OpPing, []byte("hi")},
		{AppendPing(nil, long), OpPing, long[:125]},
		{AppendPong(nil, nil), OpPong, []byte{}},
		{AppendPong(nil, long), OpPong, long[:125]},
		{AppendClose(nil, 1000, "bye"), OpClose, []byte("\x03\xe8bye")},
		{AppendClose(nil, 0, "ignored"), OpClose, []byte{}},
		{AppendClose(nil, StatusNoStatusRcvd, ""), OpClose, []byte{}},
	} {
		f, _ := readServerFrame(t, tc.out)
		if f.Header.OpCode != tc.op || !f.Header.Fin || !bytes.Equal(f.Payload, tc.want) {
			t.Errorf("%v %q, want %v %q", f.Header.OpCode, f.Payload, tc.op, tc.want)
		}
	}
	// A long reason is cut to fit, at a character boundary.
	reason := strings.Repeat("é", 100) // 200 bytes
	f, _ := readServerFrame(t, AppendClose(nil, 1001, reason))
	if len(f.Payload) > 125 || !utf8.Valid(f.Payload[2:]) || !strings.HasPrefix(reason, string(f.Payload[2:])) {
		t.Fatalf("close payload %d bytes %q", len(f.Payload), f.Payload)
	}
	if len(f.Payload) != 124 { // 2 + 61*2: 123 would split a character
		t.Fatalf("close payload %d bytes", len(f.Payload))
	}
}
