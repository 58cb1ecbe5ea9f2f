package loadtest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gobwas/ws"
)

// rfcKey is RFC 6455 §1.3's example nonce ("the sample nonce").
var rfcKey = [16]byte([]byte("the sample nonce"))

func TestAcceptForRFCExample(t *testing.T) {
	if got := string(acceptFor(rfcKey)); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("accept %q", got)
	}
	req := string(appendUpgradeRequest(nil, "127.0.0.1:8080", rfcKey))
	for _, want := range []string{"GET / HTTP/1.1\r\n", "Host: 127.0.0.1:8080\r\n", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
		"Sec-WebSocket-Protocol: push-notification\r\n", "Upgrade: websocket\r\n"} {
		if !strings.Contains(req, want) {
			t.Errorf("request lacks %q:\n%s", want, req)
		}
	}
}

func TestParseUpgradeResponse(t *testing.T) {
	ok := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
	frame := "\x81\x02{}"
	for i := range len(ok) {
		if n, err := parseUpgradeResponse([]byte(ok[:i]), rfcKey); n != 0 || err != nil {
			t.Fatalf("partial %d bytes: n=%d err=%v", i, n, err)
		}
	}
	if n, err := parseUpgradeResponse([]byte(ok+frame), rfcKey); n != len(ok) || err != nil {
		t.Fatalf("whole: n=%d err=%v", n, err)
	}
	var ue *UpgradeError
	if _, err := parseUpgradeResponse([]byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 30\r\n\r\n"), rfcKey); !errors.As(err, &ue) || ue.Status != 503 {
		t.Errorf("503: %v", err)
	}
	bad := strings.Replace(ok, "s3pP", "xxxx", 1)
	if _, err := parseUpgradeResponse([]byte(bad), rfcKey); err == nil {
		t.Error("wrong accept accepted")
	}
	if _, err := parseUpgradeResponse(bytes.Repeat([]byte("a"), maxUpgradeResponse+1), rfcKey); err == nil {
		t.Error("endless head accepted")
	}
}

// TestClientFrameDecodesWithGobwas: our masked frames are what a standard
// server-side reader expects.
func TestClientFrameDecodesWithGobwas(t *testing.T) {
	for _, n := range []int{0, 5, 125, 126, 65535, 65536} {
		payload := bytes.Repeat([]byte("x"), n)
		b := appendClientFrame(nil, opText, payload, [4]byte{1, 2, 3, 4})
		f, err := readFrame(b)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !f.Header.Masked || !f.Header.Fin || f.Header.OpCode != ws.OpText {
			t.Fatalf("%d bytes: header %+v", n, f.Header)
		}
		ws.Cipher(f.Payload, f.Header.Mask, 0)
		if !bytes.Equal(f.Payload, payload) {
			t.Fatalf("%d bytes: payload differs", n)
		}
	}
	c := appendCloseFrame(nil, 1000, [4]byte{9, 9, 9, 9})
	f, _ := readFrame(c)
	ws.Cipher(f.Payload, f.Header.Mask, 0)
	if f.Header.OpCode != ws.OpClose || closeCode(f.Payload) != 1000 {
		t.Errorf("close frame %+v %v", f.Header, f.Payload)
	}
}

// readFrame reads one whole frame with gobwas's header reader.
func readFrame(b []byte) (ws.Frame, error) {
	r := bytes.NewReader(b)
	h, err := ws.ReadHeader(r)
	if err != nil {
		return ws.Frame{}, err
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		return ws.Frame{}, err
	}
	return ws.Frame{Header: h, Payload: p}, nil
}

func TestParseServerFrame(t *testing.T) {
	var in []byte
	var want [][]byte
	for _, n := range []int{0, 2, 125, 126, 300, 70000} {
		p := bytes.Repeat([]byte{byte(n)}, n)
		var buf bytes.Buffer
		ws.WriteFrame(&buf, ws.NewTextFrame(p))
		in = append(in, buf.Bytes()...)
		want = append(want, p)
	}
	// Every split point: a partial frame asks for more, never errs.
	for cut := 0; cut <= len(in); cut += 97 {
		got, used := parseAll(t, in[:cut])
		if used > cut || len(got) > len(want) {
			t.Fatalf("cut %d: used %d, %d frames", cut, used, len(got))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("cut %d: frame %d differs", cut, i)
			}
		}
	}
	if got, used := parseAll(t, in); len(got) != len(want) || used != len(in) {
		t.Fatalf("whole: %d frames, used %d of %d", len(got), used, len(in))
	}
	for name, b := range map[string][]byte{
		"masked":             {0x81, 0x81, 1, 2, 3, 4, 'x'},
		"reserved bits":      {0xC1, 0x00},
		"long control":       append([]byte{0x89, 126, 0, 200}, make([]byte, 200)...),
		"fragmented control": {0x09, 0x00},
		"huge":               binary.BigEndian.AppendUint64([]byte{0x81, 127}, 1<<40),
	} {
		if _, _, err := parseServerFrame(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func parseAll(t *testing.T, b []byte) ([][]byte, int) {
	t.Helper()
	var out [][]byte
	used := 0
	for {
		f, n, err := parseServerFrame(b[used:])
		if err != nil {
			t.Fatalf("at %d: %v", used, err)
		}
		if n == 0 {
			return out, used
		}
		out = append(out, append([]byte(nil), f.payload...))
		used += n
	}
}

func FuzzParseServerFrame(f *testing.F) {
	f.Add([]byte("\x81\x02{}"))
	f.Add([]byte("\x81\x7e\x00\x80"))
	f.Add([]byte("\x88\x02\x03\xe8"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := parseServerFrame(b)
		if err != nil || n == 0 {
			return
		}
		if n > len(b) || len(fr.payload) > n || len(fr.payload) > maxServerFrame {
			t.Fatalf("n %d payload %d of %d bytes", n, len(fr.payload), len(b))
		}
	})
}

func FuzzParseUpgradeResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 503 x\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseUpgradeResponse(b, rfcKey)
		if err == nil && n > 0 && (n > len(b) || !bytes.HasSuffix(b[:n], []byte("\r\n\r\n"))) {
			t.Fatalf("n %d of %q", n, b)
		}
	})
}

func TestAppendUUIDAndJSONString(t *testing.T) {
	u := [16]byte{0xde, 0xad, 0xbe, 0xef, 0, 1, 0x40, 2, 0x80, 3, 4, 5, 6, 7, 8, 9}
	if got := string(appendUUID(nil, u)); got != "deadbeef-0001-4002-8003-040506070809" {
		t.Errorf("uuid %s", got)
	}
	if id, ok := parseUAID("deadbeef00014002800304050607080 9"); ok {
		t.Errorf("bad uaid parsed: %x", id)
	}
	if id, ok := parseUAID("deadbeef-0001-4002-8003-040506070809"); !ok || id != u {
		t.Errorf("dashed uaid: %x %v", id, ok)
	}
	if got := string(appendJSONString(nil, "a\"b\\c\n")); got != `"a\"b\\c\u000a"` {
		t.Errorf("json string %s", got)
	}
	if got := base64.StdEncoding.EncodeToString(rfcKey[:]); got != "dGhlIHNhbXBsZSBub25jZQ==" {
		t.Errorf("key %s", got)
	}
}
