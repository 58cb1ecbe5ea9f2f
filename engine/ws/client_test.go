package ws

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	gws "github.com/gobwas/ws"
)

// rfcKey is RFC 6455 §1.3's example nonce ("the sample nonce").
var rfcKey = [16]byte([]byte("the sample nonce"))

// rfcResponse is a server's answer to a request with rfcKey.
const rfcResponse = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
	"sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"

func TestUpgradeRequestIsWhatTheServerAccepts(t *testing.T) {
	if got := base64.StdEncoding.EncodeToString(rfcKey[:]); got != "dGhlIHNhbXBsZSBub25jZQ==" {
		t.Fatalf("key %s", got)
	}
	b := AppendUpgradeRequest(nil, "127.0.0.1:8080", "/", rfcKey, PushProtocol)
	req := string(b)
	for _, want := range []string{"GET / HTTP/1.1\r\n", "Host: 127.0.0.1:8080\r\n", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
		"Sec-WebSocket-Protocol: push-notification\r\n", "Upgrade: websocket\r\n", "Sec-WebSocket-Version: 13\r\n"} {
		if !strings.Contains(req, want) {
			t.Errorf("request lacks %q:\n%s", want, req)
		}
	}
	u, n, err := ParseUpgrade(b)
	if err != nil || n != len(b) || !u.OffersPush || u.Host != "127.0.0.1:8080" || u.Path != "/" {
		t.Fatalf("server parse: %+v %d %v", u, n, err)
	}
	// The server's answer is what the client accepts.
	resp := AppendUpgradeResponse(nil, &u, u.Protocol())
	if n, err := ParseUpgradeResponse(resp, rfcKey); n != len(resp) || err != nil {
		t.Fatalf("client parse of %q: %d %v", resp, n, err)
	}
	if strings.Contains(string(AppendUpgradeRequest(nil, "h", "/ws", rfcKey, "")), "Protocol") {
		t.Error("a protocol offered without one")
	}
}

func TestParseUpgradeResponse(t *testing.T) {
	frame := "\x81\x02{}"
	for i := range len(rfcResponse) {
		if n, err := ParseUpgradeResponse([]byte(rfcResponse[:i]), rfcKey); n != 0 || err != nil {
			t.Fatalf("partial %d bytes: n=%d err=%v", i, n, err)
		}
	}
	if n, err := ParseUpgradeResponse([]byte(rfcResponse+frame), rfcKey); n != len(rfcResponse) || err != nil {
		t.Fatalf("whole: n=%d err=%v", n, err)
	}
	var ue *UpgradeError
	if _, err := ParseUpgradeResponse([]byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 30\r\n\r\n"), rfcKey); !errors.As(err, &ue) || ue.Status != 503 {
		t.Errorf("503: %v", err)
	}
	for name, c := range map[string]struct {
		resp string
		want error
	}{
		"wrong accept":   {strings.Replace(rfcResponse, "s3pP", "xxxx", 1), ErrWrongAccept},
		"no accept":      {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", ErrNoAccept},
		"status line":    {"HTTP/1.1 1O1 Switching\r\n\r\n", ErrMalformedResponse},
		"not HTTP":       {"SSH-2.0-OpenSSH\r\n\r\n", ErrMalformedResponse},
		"status 000":     {"HTTP/1.1 000 x\r\n\r\n", ErrMalformedResponse},
		"header line":    {"HTTP/1.1 101 OK\r\nno colon\r\n\r\n", ErrMalformedResponse},
		"endless head":   {strings.Repeat("a", MaxUpgradeSize+1), ErrResponseTooLarge},
		"status no text": {"HTTP/1.1 101\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n", nil},
	} {
		if _, err := ParseUpgradeResponse([]byte(c.resp), rfcKey); err != c.want {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// TestClientFrames: masked frames as a client sends them read back with
// the node's ParseFrame and with gobwas; the node's frames read back with
// ParseServerFrame, which leaves its input as it is.
func TestClientFrames(t *testing.T) {
	mask := [4]byte{1, 2, 3, 4}
	for _, n := range []int{0, 5, 7, 8, 9, 125, 126, 65535, 65536} {
		payload := bytes.Repeat([]byte("x"), n)
		b := AppendClientFrame([]byte("prefix"), OpText, payload, mask)[6:]
		f, err := readFrameFrom(bytes.NewReader(b)) // gobwas, unmasking a copy
		if err != nil || !f.Header.Masked || !f.Header.Fin || f.Header.OpCode != OpText || !bytes.Equal(f.Payload, payload) {
			t.Fatalf("%d bytes: gobwas read %+v", n, f.Header)
		}
		h, p, used, err := ParseFrame(b, 0)
		if err != nil || used != len(b) || !h.Masked || h.Mask != mask || !bytes.Equal(p, payload) {
			t.Fatalf("%d bytes: ParseFrame %+v %d %v", n, h, used, err)
		}
		server := AppendFrame(nil, OpBinary, payload)
		in := bytes.Clone(server)
		h, p, used, err = ParseServerFrame(in, 0)
		if err != nil || used != len(server) || h.Masked || h.OpCode != OpBinary || h.Length != int64(n) || !bytes.Equal(p, payload) {
			t.Fatalf("%d bytes: ParseServerFrame %+v %d %v", n, h, used, err)
		}
		if !bytes.Equal(in, server) {
			t.Fatalf("%d bytes: ParseServerFrame modified its input", n)
		}
	}
	for code, body := range map[StatusCode][]byte{1000: {0x03, 0xe8}, 4001: {0x0f, 0xa1}, StatusNoStatusRcvd: {}, 0: {}} {
		b := AppendClientClose(nil, code, [4]byte{9, 9, 9, 9})
		h, p, _, err := ParseFrame(b, 0)
		if err != nil || h.OpCode != OpClose || !bytes.Equal(p, body) {
			t.Errorf("close %d: %+v %v %v", code, h, p, err)
		}
	}
}

func TestParseServerFrame(t *testing.T) {
	var in []byte
	var want [][]byte
	for _, n := range []int{0, 2, 125, 126, 300, 70000} {
		p := bytes.Repeat([]byte{byte(n)}, n)
		var buf bytes.Buffer
		gws.WriteFrame(&buf, gws.NewTextFrame(p))
		in = append(in, buf.Bytes()...)
		want = append(want, p)
	}
	// Every split point: a partial frame asks for more, never errs.
	for cut := 0; cut <= len(in); cut += 97 {
		got, used := parseServerFrames(t, in[:cut])
		if used > cut || len(got) > len(want) {
			t.Fatalf("cut %d: used %d, %d frames", cut, used, len(got))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("cut %d: frame %d differs", cut, i)
			}
		}
	}
	if got, used := parseServerFrames(t, in); len(got) != len(want) || used != len(in) {
		t.Fatalf("whole: %d frames, used %d of %d", len(got), used, len(in))
	}
	for name, c := range map[string]struct {
		b    []byte
		want error
	}{
		"masked":             {[]byte{0x81, 0x81, 1, 2, 3, 4, 'x'}, ErrMasked},
		"reserved bits":      {[]byte{0xC1, 0x00}, ErrReservedBits},
		"reserved opcode":    {[]byte{0x83, 0x00}, ErrReservedOpcode},
		"long control":       {append([]byte{0x89, 126, 0, 200}, make([]byte, 200)...), ErrControlTooLong},
		"fragmented control": {[]byte{0x09, 0x00}, ErrControlFragmented},
		"huge":               {binary.BigEndian.AppendUint64([]byte{0x81, 127}, 1<<40), ErrFrameTooBig},
		"64-bit sign":        {binary.BigEndian.AppendUint64([]byte{0x81, 127}, 1<<63), ErrBadLength},
	} {
		if _, _, _, err := ParseServerFrame(c.b, 1<<20); err != c.want {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func parseServerFrames(t *testing.T, b []byte) ([][]byte, int) {
	t.Helper()
	var out [][]byte
	used := 0
	for {
		_, p, n, err := ParseServerFrame(b[used:], 1<<20)
		if err != nil {
			t.Fatalf("at %d: %v", used, err)
		}
		if n == 0 {
			return out, used
		}
		out = append(out, append([]byte(nil), p...))
		used += n
	}
}

// TestClientZeroAlloc: the client side allocates nothing when dst has
// room, the upgrade included (a refused one aside).
func TestClientZeroAlloc(t *testing.T) {
	out := make([]byte, 0, 1024)
	server := AppendText(nil, []byte(ackJSON))
	resp := []byte(rfcResponse)
	var sink int
	allocs := testing.AllocsPerRun(1000, func() {
		out = AppendUpgradeRequest(out[:0], "127.0.0.1:8080", "/", rfcKey, PushProtocol)
		n, err := ParseUpgradeResponse(resp, rfcKey)
		_, p, m, err2 := ParseServerFrame(server, 4096)
		if err != nil || err2 != nil || n == 0 || m == 0 {
			t.Fatal(err, err2)
		}
		out = AppendClientFrame(out[:0], OpText, p, [4]byte{1, 2, 3, 4})
		out = AppendClientClose(out, StatusNormalClosure, [4]byte{5, 6, 7, 8})
		sink += len(out)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs", allocs)
	}
}

func FuzzParseServerFrame(f *testing.F) {
	for _, s := range [][]byte{
		AppendText(nil, []byte(ackJSON)),
		concat(AppendHeader(nil, false, OpText, 4), []byte("frag"), AppendPing(nil, []byte("hi")),
			AppendHeader(nil, true, OpContinuation, 4), []byte("ment"), AppendClose(nil, 1000, "bye")),
		AppendFrame(nil, OpBinary, make([]byte, 300)),
	} {
		addEverySplit(f, s)
	}
	addHalves(f,
		[]byte("\x81\x7e\x00\x80"),
		[]byte("\x88\x02\x03\xe8"),
		[]byte{0x81, 0x81, 1, 2, 3, 4, 'x'},
		binary.BigEndian.AppendUint64([]byte{0x82, 127}, 1<<40),
	)
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		in := bytes.Clone(data)
		h, p, n, err := ParseServerFrame(in, fuzzMaxFrame)
		if !bytes.Equal(in, data) {
			t.Fatal("ParseServerFrame modified its input")
		}
		switch {
		case err != nil:
			if _, ok := err.(*CloseError); !ok || n != 0 || p != nil {
				t.Fatalf("error %T %v with n = %d", err, err, n)
			}
		case n == 0:
			if p != nil || h != (Header{}) {
				t.Fatalf("need-more with %+v", h)
			}
		default:
			if n > len(data) || int64(len(p)) != h.Length || len(p) > fuzzMaxFrame || n < len(p)+2 || h.Masked ||
				(len(p) > 0 && &p[len(p)-1] != &in[n-1]) {
				t.Fatalf("payload of %d bytes, header %+v, n = %d of %d", len(p), h, n, len(data))
			}
			// Written back by the node, it parses the same.
			back := append(AppendHeader(nil, h.Fin, h.OpCode, len(p)), p...)
			h2, p2, _, err2 := ParseServerFrame(back, fuzzMaxFrame)
			if err2 != nil || h2 != h || !bytes.Equal(p2, p) {
				t.Fatalf("written back: %+v %q %v, first %+v %q", h2, p2, err2, h, p)
			}
		}
		// The first piece alone asks for more or gives the same result:
		// errors are decided from the header bytes.
		k := int(split) % (len(data) + 1)
		h1, p1, n1, err1 := ParseServerFrame(data[:k], fuzzMaxFrame)
		if !(n1 == 0 && err1 == nil) && (h1 != h || n1 != n || err1 != err || !bytes.Equal(p1, p)) {
			t.Fatalf("prefix %d: (%+v, %d, %v), whole: (%+v, %d, %v)", k, h1, n1, err1, h, n, err)
		}
	})
}

func FuzzParseUpgradeResponse(f *testing.F) {
	addEverySplit(f, []byte(rfcResponse+"\x81\x02{}"))
	addHalves(f,
		"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 30\r\n\r\n",
		"HTTP/1.1 101\r\n\r\n",
		"HTTP/1.0 000 0000\r\n\r\n",
		"HTTP/1.0 101 x\r\nSec-WebSocket-Accept: x\r\n\r\n",
		"HTTP/1.1 101 x\r\nSec-WebSocket-Accept:s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\t\r\n\r\n",
	)
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		in := bytes.Clone(data)
		n, err := ParseUpgradeResponse(in, rfcKey)
		if !bytes.Equal(in, data) {
			t.Fatal("ParseUpgradeResponse modified its input")
		}
		switch {
		case err == nil && n == 0:
			if len(data) >= MaxUpgradeSize || bytes.Contains(data, headEnd) {
				t.Fatalf("need-more on %d bytes holding a head", len(data))
			}
		case err == nil:
			if n > len(data) || !bytes.HasSuffix(data[:n], headEnd) || bytes.Contains(data[:n-1], headEnd) {
				t.Fatalf("n = %d is not the end of the head", n)
			}
		case n != 0:
			t.Fatalf("n = %d with %v", n, err)
		}
		var ue *UpgradeError
		if errors.As(err, &ue) && (ue.Status == 101 || ue.Status < 100 || ue.Status > 999) {
			t.Fatalf("refused with status %d", ue.Status)
		}
		k := int(split) % (len(data) + 1)
		n1, err1 := ParseUpgradeResponse(data[:k], rfcKey)
		if !(n1 == 0 && err1 == nil) && (n1 != n || !reflect.DeepEqual(err1, err)) {
			t.Fatalf("prefix %d: (%d, %v), whole: (%d, %v)", k, n1, err1, n, err)
		}
	})
}
