package apitiertest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// Raw is a client connection that sends bytes as given: half a header, a
// body that stops, a chunked body without its last chunk. Its reads wait
// at most a generous deadline that only a server that never answers (or
// never closes) reaches.
type Raw struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

// RawWait bounds each wait of a Raw for the server.
const RawWait = 20 * time.Second

// Dial opens a Raw connection to addr (host:port).
func Dial(t testing.TB, addr string) *Raw {
	t.Helper()
	return DialFrom(t, addr, "")
}

// DialFrom opens a Raw connection to addr from the loopback address
// source ("127.0.0.7"; "" for any), as a distinct client to the node's
// per-source connection cap.
func DialFrom(t testing.TB, addr, source string) *Raw {
	t.Helper()
	d := net.Dialer{}
	if source != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %q: %v", addr, source, err)
	}
	t.Cleanup(func() { c.Close() })
	return &Raw{t: t, c: c, br: bufio.NewReader(c)}
}

// Write sends s.
func (r *Raw) Write(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// CloseWrite half-closes the connection: the server reads EOF.
func (r *Raw) CloseWrite() {
	r.t.Helper()
	if err := r.c.(*net.TCPConn).CloseWrite(); err != nil {
		r.t.Fatalf("close write: %v", err)
	}
}

// Answer reads the next answer (interim 1xx answers included).
func (r *Raw) Answer() Answer {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(RawWait))
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("read answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatalf("read answer body: %v", err)
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// WantClosed waits for the server to close the connection, with nothing
// more sent on it.
func (r *Raw) WantClosed() {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(RawWait))
	b, err := io.ReadAll(r.br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		r.t.Fatalf("the server kept the connection open %v", RawWait)
	}
	if len(b) > 0 {
		r.t.Fatalf("after the answer the server sent %q", b)
	}
}
