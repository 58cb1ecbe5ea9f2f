package ws

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// echoServer is a stand-in for the node's event handler: it reads whatever
// the socket has into one buffer and drives only this package's functions,
// consuming parsed bytes the way a gnet handler would Discard them.
type echoServer struct {
	ln   net.Listener
	errs chan error // one per connection: why it ended (nil: close handshake)
}

func startEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, errs: make(chan error, 16)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { s.errs <- serveEcho(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

const echoMax = 1 << 20

func serveEcho(c net.Conn) error {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var in []byte
	read := func() error {
		if len(in) == cap(in) {
			in = append(in, make([]byte, 4096)...)[:len(in)]
		}
		n, err := c.Read(in[len(in):cap(in)])
		in = in[:len(in)+n]
		return err
	}
	consume := func(n int) { in = in[:copy(in, in[n:])] }

	for {
		req, n, err := ParseUpgrade(in)
		if err != nil {
			var ue *UpgradeError
			errors.As(err, &ue)
			c.Write(ue.AppendResponse(nil))
			return err
		}
		if n > 0 {
			consume(n)
			if _, err := c.Write(AppendUpgradeResponse(nil, &req, req.Protocol())); err != nil {
				return err
			}
			break
		}
		if err := read(); err != nil {
			return err
		}
	}

	var a Assembler
	defer a.Reset()
	var out []byte
	for {
		h, p, n, err := ParseFrame(in, echoMax)
		if err == nil && n > 0 {
			var msg Message
			var ok bool
			msg, ok, err = a.Feed(h, p, echoMax)
			if err == nil && ok {
				switch msg.Op {
				case OpText:
					out = AppendText(out, msg.Payload)
				case OpBinary:
					out = AppendBinary(out, msg.Payload)
				case OpPing:
					out = AppendPong(out, msg.Payload)
				case OpClose:
					out = AppendClose(out, msg.Code, "")
					_, err := c.Write(out)
					return err
				}
			}
			consume(n)
			a.Release()
		}
		if err != nil {
			var ce *CloseError
			errors.As(err, &ce)
			c.Write(ce.AppendClose(out))
			return err
		}
		if n == 0 {
			// Need more: flush what the batch produced, then read.
			if len(out) > 0 {
				if _, err := c.Write(out); err != nil {
					return err
				}
				out = out[:0]
			}
			if err := read(); err != nil {
				return err
			}
		}
	}
}

type clientConn struct {
	net.Conn
	r io.Reader
}

func (c clientConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func dial(t *testing.T, s *echoServer) clientConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := gws.Dialer{Protocols: []string{PushProtocol}}
	conn, br, hs, err := d.Dial(ctx, "ws://"+s.ln.Addr().String()+"/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if hs.Protocol != PushProtocol {
		t.Fatalf("negotiated protocol %q", hs.Protocol)
	}
	var r io.Reader = conn
	if br != nil {
		r = io.MultiReader(br, conn)
	}
	return clientConn{conn, r}
}

func writeFrame(t *testing.T, c net.Conn, fin bool, op OpCode, p []byte) {
	t.Helper()
	f := gws.MaskFrameInPlace(gws.NewFrame(op, fin, bytes.Clone(p)))
	if err := gws.WriteFrame(c, f); err != nil {
		t.Fatal(err)
	}
}

func readFrame(t *testing.T, c clientConn) gws.Frame {
	t.Helper()
	f, err := readFrameFrom(c)
	if err != nil {
		t.Fatal(err)
	}
	if f.Header.Masked || !f.Header.Fin {
		t.Fatalf("bad server frame header %+v", f.Header)
	}
	return f
}

func TestRoundTripGobwasClient(t *testing.T) {
	s := startEchoServer(t)
	c := dial(t, s)

	// Text, via wsutil's client helpers.
	if err := wsutil.WriteClientText(c, []byte(ackJSON)); err != nil {
		t.Fatal(err)
	}
	if got, err := wsutil.ReadServerText(c); err != nil || string(got) != ackJSON {
		t.Fatalf("echo %q %v", got, err)
	}

	// A 64-bit-length binary message both ways.
	big := bytes.Repeat([]byte("0123456789"), 7000)
	if err := wsutil.WriteClientBinary(c, big); err != nil {
		t.Fatal(err)
	}
	if got, err := wsutil.ReadServerBinary(c); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("binary echo: %d bytes %v", len(got), err)
	}

	// Fragmented text with a ping between fragments: the pong comes first.
	writeFrame(t, c, false, OpText, []byte("frag"))
	writeFrame(t, c, true, OpPing, []byte("are you there"))
	writeFrame(t, c, false, OpContinuation, []byte("mented "))
	writeFrame(t, c, true, OpContinuation, []byte("héllo"))
	if f := readFrame(t, c); f.Header.OpCode != OpPong || string(f.Payload) != "are you there" {
		t.Fatalf("got %v %q, want pong", f.Header.OpCode, f.Payload)
	}
	if f := readFrame(t, c); f.Header.OpCode != OpText || string(f.Payload) != "fragmented héllo" {
		t.Fatalf("got %v %q", f.Header.OpCode, f.Payload)
	}

	// wsutil's fragmenting writer (small buffer, many continuation frames).
	w := wsutil.NewWriterSize(c, gws.StateClientSide, OpText, 16)
	msg := strings.Repeat("fragmented by gobwas ", 10)
	if _, err := w.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, err := wsutil.ReadServerText(c); err != nil || string(got) != msg {
		t.Fatalf("echo %q %v", got, err)
	}

	// Close handshake: our 1000 is echoed, then the server hangs up.
	writeFrame(t, c, true, OpClose, gws.NewCloseFrameBody(StatusNormalClosure, "bye"))
	f := readFrame(t, c)
	if f.Header.OpCode != OpClose || !bytes.Equal(f.Payload, []byte{0x03, 0xe8}) {
		t.Fatalf("close reply %v %x", f.Header.OpCode, f.Payload)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after close: %v, want EOF", err)
	}
	if err := <-s.errs; err != nil {
		t.Fatalf("server: %v", err)
	}
}

func TestRoundTripProtocolErrors(t *testing.T) {
	s := startEchoServer(t)
	for _, tc := range []struct {
		name string
		send func(c clientConn)
		code StatusCode
		err  error
	}{
		{"unmasked frame", func(c clientConn) {
			gws.WriteFrame(c, gws.NewTextFrame([]byte("x")))
		}, StatusProtocolError, ErrUnmasked},
		{"compressed frame (deflate not negotiated)", func(c clientConn) {
			c.Write(clientFrame(true, 4, OpText, []byte("x")))
		}, StatusProtocolError, ErrReservedBits},
		{"invalid UTF-8", func(c clientConn) {
			writeFrame(t, c, true, OpText, []byte("bad \xff"))
		}, StatusInvalidFramePayloadData, ErrInvalidUTF8},
		{"too big, refused on its header", func(c clientConn) {
			c.Write(append([]byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0, 0x10, 0, 1}, testMask[:]...))
		}, StatusMessageTooBig, ErrFrameTooBig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			tc.send(c)
			f := readFrame(t, c)
			if f.Header.OpCode != OpClose || len(f.Payload) < 2 ||
				StatusCode(f.Payload[0])<<8|StatusCode(f.Payload[1]) != tc.code {
				t.Fatalf("got %v %q, want close %d", f.Header.OpCode, f.Payload, tc.code)
			}
			if err := <-s.errs; err != tc.err {
				t.Fatalf("server ended with %v, want %v", err, tc.err)
			}
		})
	}
}

// The exact Firefox handshake over TCP, answered byte for byte as a browser
// would check it.
func TestRoundTripFirefoxHandshake(t *testing.T) {
	s := startEchoServer(t)
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// Sent in two writes to exercise need-more.
	c.Write([]byte(firefoxUpgrade[:100]))
	time.Sleep(10 * time.Millisecond)
	c.Write([]byte(firefoxUpgrade[100:]))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" ||
		resp.Header.Get("Sec-WebSocket-Protocol") != PushProtocol || resp.Header.Get("Sec-WebSocket-Extensions") != "" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	c.Write(text(`{"messageType":"hello","use_webpush":true}`))
	f, err := readFrameFrom(br)
	if err != nil || string(f.Payload) != `{"messageType":"hello","use_webpush":true}` {
		t.Fatalf("%q %v", f.Payload, err)
	}

	// A non-websocket request gets the 426 response.
	c2, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	resp, err = http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil || resp.StatusCode != 426 {
		t.Fatalf("%v %v", resp, err)
	}
}
