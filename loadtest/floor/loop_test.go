package floor

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gobwas/ws"
)

func TestParseRequest(t *testing.T) {
	req := "POST /push/7 HTTP/1.1\r\nHost: x\r\ncontent-length: 3\r\n\r\nabcGET"
	method, path, _, n, err := parseRequest([]byte(req))
	if err != nil || method != "POST" || path != "/push/7" || n != len(req)-3 {
		t.Fatalf("got %q %q %d %v", method, path, n, err)
	}
	for _, short := range []string{"POST /push/7 HTTP/1.1\r\nHost: x\r\n", "POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nab"} {
		if _, _, _, _, err := parseRequest([]byte(short)); !errors.Is(err, errShort) {
			t.Errorf("%q: %v, want errShort", short, err)
		}
	}
	for _, bad := range []string{"POST /x\r\n\r\n", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"} {
		if _, _, _, _, err := parseRequest([]byte(bad)); err == nil || errors.Is(err, errShort) {
			t.Errorf("%q: %v, want an error", bad, err)
		}
	}
}

func TestParseFrame(t *testing.T) {
	f := ws.MustCompileFrame(ws.MaskFrame(ws.NewTextFrame([]byte("42"))))
	op, p, n, err := parseFrame(append(f, 0x81))
	if err != nil || op != ws.OpText || string(p) != "42" || n != len(f) {
		t.Fatalf("got %v %q %d %v", op, p, n, err)
	}
	if _, _, _, err := parseFrame(f[:len(f)-1]); !errors.Is(err, errShort) {
		t.Fatalf("a cut frame: %v, want errShort", err)
	}
}

// FuzzParse: whatever a connection sends, the parsers answer without
// panicking and never claim more bytes than they were given.
func FuzzParse(f *testing.F) {
	f.Add([]byte("POST /push/1 HTTP/1.1\r\nContent-Length: 2\r\n\r\nab"))
	f.Add(ws.MustCompileFrame(ws.MaskFrame(ws.NewTextFrame([]byte("1")))))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, head, n, err := parseRequest(b); err == nil && (n > len(b) || !bytes.HasPrefix(b, head)) {
			t.Fatalf("request: %d of %d bytes", n, len(b))
		}
		if _, _, n, err := parseFrame(b); err == nil && n > len(b) {
			t.Fatalf("frame: %d of %d bytes", n, len(b))
		}
	})
}
