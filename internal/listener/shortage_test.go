package listener

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/devcert"
)

// shortLn is a listener whose next `left` Accepts fail as they do in a
// process out of file descriptors.
type shortLn struct {
	net.Listener
	left atomic.Int32
}

func (s *shortLn) Accept() (net.Conn, error) {
	if s.left.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: s.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return s.Listener.Accept()
}

func loopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func dial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// acceptWithin runs l.Accept and gives its outcome, or fails the test
// after 10 s.
func acceptWithin(t *testing.T, l net.Listener) (net.Conn, error) {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := l.Accept()
		got <- result{c, err}
	}()
	select {
	case r := <-got:
		return r.c, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return in 10 s")
		return nil, nil
	}
}

// TestAcceptWaitsOutShortage: accepts that fail for want of file
// descriptors are waited out (each seen by OnAcceptError), not returned:
// Hertz stops serving for good at the first error Accept returns. A
// Close during the pauses ends Accept at once.
func TestAcceptWaitsOutShortage(t *testing.T) {
	ln := loopback(t)
	short := &shortLn{Listener: ln}
	short.left.Store(3)
	var seen atomic.Int32
	l := New(short, Config{OnAcceptError: func(err error) {
		if errors.Is(err, syscall.EMFILE) {
			seen.Add(1)
		}
	}})
	client := dial(t, ln.Addr())
	c, err := acceptWithin(t, l)
	if err != nil {
		t.Fatalf("Accept: %v; want the connection once the shortage passed", err)
	}
	if c.RemoteAddr().String() != client.LocalAddr().String() {
		t.Fatalf("accepted %v, dialled from %v", c.RemoteAddr(), client.LocalAddr())
	}
	c.Close()
	if n := seen.Load(); n != 3 {
		t.Fatalf("OnAcceptError saw %d EMFILEs, want 3", n)
	}

	// A shortage that lasts: Close ends the pauses (a thousand of them
	// would take a quarter of an hour).
	short.left.Store(1000)
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		done <- err
	}()
	for seen.Load() < 5 {
		time.Sleep(time.Millisecond)
	}
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept went on pausing after Close")
	}
}

// TestMergeWaitsOutShortage: a shortage on one of merged listeners does
// not end its accepting (Merge used to stop a listener at its first
// error, and tls-listen or listen went deaf after one EMFILE).
func TestMergeWaitsOutShortage(t *testing.T) {
	a, b := loopback(t), loopback(t)
	short := &shortLn{Listener: a}
	short.left.Store(2)
	l := New(Merge(short, b), Config{})
	defer l.Close()
	client := dial(t, a.Addr())
	c, err := acceptWithin(t, l)
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	defer c.Close()
	if c.RemoteAddr().String() != client.LocalAddr().String() {
		t.Fatalf("accepted %v, dialled from %v", c.RemoteAddr(), client.LocalAddr())
	}
}

// TestStalledRefusalDoesNotHoldAccept: on a TLS listener a refusal is
// written after the client's handshake, and a client over the cap that
// never sends one holds its refusal for RefusalWait. Accept goes on
// meanwhile: the next connection under the cap is accepted at once.
func TestStalledRefusalDoesNotHoldAccept(t *testing.T) {
	files, _, err := devcert.Ensure(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	plain := loopback(t)
	var refused atomic.Int32
	l := New(tls.NewListener(plain, &tls.Config{Certificates: []tls.Certificate{pair}}), Config{
		MaxConns:    1,
		Refusal:     []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
		RefusalWait: time.Minute,
		OnRefuse:    func() { refused.Add(1) },
	})
	defer l.Close()
	dial(t, plain.Addr())
	held, err := acceptWithin(t, l)
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			next <- c
		}
	}()
	stalled := dial(t, plain.Addr()) // over the cap; sends no handshake
	for refused.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	held.Close() // a place under the cap again
	client := dial(t, plain.Addr())
	select {
	case c := <-next:
		defer c.Close()
		if c.RemoteAddr().String() != client.LocalAddr().String() {
			t.Fatalf("accepted %v, want the connection dialled from %v", c.RemoteAddr(), client.LocalAddr())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept waited on the stalled client's refusal")
	}
	stalled.Close() // ends its refusal's handshake
}
