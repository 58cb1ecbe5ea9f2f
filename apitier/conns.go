package apitier

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Graceful shutdown waits for requests in flight, but Hertz cannot tell
// them from keep-alive connections waiting for their next request, and
// would wait for those until shutdown-timeout. So the listener tracks its
// connections, and Shutdown wakes the idle ones (a read deadline of now),
// which Hertz then closes, as net/http's Server.Shutdown closes idle
// connections. A connection is idle from the end of its last response
// write until it reads the next request's first bytes.

type connTracker struct {
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

// trackingListener records every accepted connection until it closes.
type trackingListener struct {
	net.Listener
	t *connTracker
}

func newTrackingListener(ln net.Listener) *trackingListener {
	return &trackingListener{Listener: ln, t: &connTracker{conns: map[*trackedConn]struct{}{}}}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: l.t}
	l.t.mu.Lock()
	l.t.conns[tc] = struct{}{}
	l.t.mu.Unlock()
	return tc, nil
}

// wakeIdle sets a read deadline of now on every idle connection and
// returns how many connections are open.
func (t *connTracker) wakeIdle() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for c := range t.conns {
		if !c.busy.Load() {
			c.Conn.SetReadDeadline(now)
		}
	}
	return len(t.conns)
}

type trackedConn struct {
	net.Conn
	t    *connTracker
	busy atomic.Bool
	once sync.Once
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.busy.Store(true)
	}
	return n, err
}

func (c *trackedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.busy.Store(false)
	return n, err
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}
