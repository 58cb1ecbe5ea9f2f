// Package tcpfault is a TCP front on 127.0.0.1 for a fake provider: it
// forwards each connection to the fake, or fails it as a provider's
// network can: refused (nothing listens), reset (the request arrives,
// then the connection is reset), hung (accepted, never answered). A
// client pointed at the front sees the fake's answers, or exactly the
// transport errors those failures give.
//
// It is a test double, as the fakes: only tests import it, never a
// service binary (stack/deps_test.go). It listens only on loopback.
package tcpfault

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Mode is what the front does with a connection.
type Mode int

// Modes. The zero value forwards.
const (
	// Forward copies bytes both ways between the client and the target.
	Forward Mode = iota
	// Reset reads the client's first bytes (a request, or a TLS hello),
	// then resets the connection (RST) without an answer.
	Reset
	// Hang accepts and reads, and never answers: the client times out.
	Hang
	// Refuse closes the listener: connecting is refused until another
	// mode listens again on the same address.
	Refuse
)

var modeNames = [...]string{"forward", "reset", "hang", "refuse"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Front is one front. Safe for concurrent use.
type Front struct {
	target string
	addr   string

	mu     sync.Mutex
	mode   Mode
	ln     net.Listener // nil while refusing or closed
	conns  map[net.Conn]struct{}
	closed bool
	served sync.WaitGroup
}

// Start listens on 127.0.0.1:0 and forwards to target (host:port) until
// Set says otherwise.
func Start(target string) (*Front, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Front{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	f.serve(ln)
	return f, nil
}

// Addr is the front's address (host:port); it stays the same whatever
// the mode.
func (f *Front) Addr() string { return f.addr }

// Set changes the mode for the connections to come and closes every
// open one, so that a client's kept-alive connection meets the new mode
// too (its request in flight, if any, fails). Leaving Refuse listens
// again on Addr, which fails if another socket took the port meanwhile.
func (f *Front) Set(m Mode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("tcpfault: closed")
	}
	f.mode = m
	f.dropConnsLocked()
	switch {
	case m == Refuse && f.ln != nil:
		f.ln.Close()
		f.ln = nil
	case m != Refuse && f.ln == nil:
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			return fmt.Errorf("tcpfault: listen again on %s: %w", f.addr, err)
		}
		f.serveLocked(ln)
	}
	return nil
}

// Close stops listening and closes every connection.
func (f *Front) Close() error {
	f.mu.Lock()
	f.closed = true
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
	}
	f.dropConnsLocked()
	f.mu.Unlock()
	f.served.Wait()
	return nil
}

func (f *Front) dropConnsLocked() {
	for c := range f.conns {
		c.Close()
	}
	clear(f.conns)
}

func (f *Front) serve(ln net.Listener) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.serveLocked(ln)
}

func (f *Front) serveLocked(ln net.Listener) {
	f.ln = ln
	f.served.Add(1)
	go func() {
		defer f.served.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed: Refuse or Close
			}
			f.handle(c)
		}
	}()
}

// handle serves one accepted connection in the mode of its arrival.
func (f *Front) handle(c net.Conn) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		c.Close()
		return
	}
	mode := f.mode
	f.conns[c] = struct{}{}
	f.served.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.served.Done()
		defer f.forget(c)
		switch mode {
		case Reset:
			var b [1]byte
			if _, err := c.Read(b[:]); err == nil {
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetLinger(0) // close with RST, not FIN
				}
			}
		case Hang:
			io.Copy(io.Discard, c) // until the client or Set closes it
		default:
			f.forward(c)
		}
	}()
}

// forward copies between c and a new connection to the target until
// either side closes.
func (f *Front) forward(c net.Conn) {
	t, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	f.mu.Lock()
	if _, open := f.conns[c]; !open {
		f.mu.Unlock()
		t.Close()
		return
	}
	f.conns[t] = struct{}{}
	f.mu.Unlock()
	defer f.forget(t)
	done := make(chan struct{})
	go func() {
		io.Copy(t, c)
		t.Close()
		close(done)
	}()
	io.Copy(c, t)
	c.Close()
	<-done
}

func (f *Front) forget(c net.Conn) {
	c.Close()
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}
