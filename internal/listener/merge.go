package listener

import (
	"net"
	"sync"
)

// Merge is one listener over several: Accept returns the next connection
// any of them accepted, Addr is the first's, Close closes them all. It
// serves one API on a plain and a TLS address (tls-listen) behind one
// Listener, so both count toward one cap and one server.
func Merge(lns ...net.Listener) net.Listener {
	m := &merged{lns: lns, ch: make(chan accepted), done: make(chan struct{})}
	for _, ln := range lns {
		go m.accept(ln)
	}
	return m
}

type merged struct {
	lns  []net.Listener
	ch   chan accepted
	done chan struct{}
	once sync.Once
}

type accepted struct {
	c   net.Conn
	err error
}

// accept hands on what ln accepts until an error ends it. A shortage
// (shortage) is handed on too and does not end it: the Listener above
// pauses on it, and so does this, waiting to hand on the next.
func (m *merged) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		select {
		case m.ch <- accepted{c, err}:
			if err != nil && !shortage(err) {
				return
			}
		case <-m.done:
			if c != nil {
				c.Close()
			}
			return
		}
	}
}

func (m *merged) Accept() (net.Conn, error) {
	select {
	case a := <-m.ch:
		return a.c, a.err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *merged) Close() error {
	var first error
	m.once.Do(func() {
		close(m.done)
		for _, ln := range m.lns {
			if err := ln.Close(); err != nil && first == nil {
				first = err
			}
		}
	})
	return first
}

func (m *merged) Addr() net.Addr { return m.lns[0].Addr() }
