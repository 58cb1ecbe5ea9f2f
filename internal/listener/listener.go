package listener

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Config of a Listener. The zero value caps nothing and sets no deadline.
type Config struct {
	// MaxConns caps the connections open at once. A connection accepted
	// beyond it is written Refusal (when set) and closed, and Accept goes
	// on with the next one. 0: no cap.
	MaxConns int
	// HeaderTimeout is the read deadline of a connection from accept, and
	// from the first byte of each later request, until the server calls
	// Conn.BeginBody. 0: none (the server sets its own).
	HeaderTimeout time.Duration
	// WriteTimeout bounds each write. 0: none.
	WriteTimeout time.Duration
	// Refusal is what a connection over the cap is written before it is
	// closed (an HTTP answer with "Connection: close").
	Refusal []byte
	// OnRefuse, if set, is called for each connection refused (a metric).
	OnRefuse func()
	// Unhandled, if set, sees each write made on a connection whose
	// current request has not reached BeginBody: the server answering a
	// request it could not parse or read, or an interim answer such as
	// "100 Continue". timedOut says that a read deadline passed on the
	// connection (the server may call that a parse error). A non-nil
	// result is written instead of p.
	Unhandled func(p []byte, timedOut bool) []byte
}

// Listener wraps a net.Listener. Safe for concurrent use.
type Listener struct {
	net.Listener
	cfg Config

	mu    sync.Mutex
	conns map[*Conn]struct{}
}

// New wraps ln.
func New(ln net.Listener, cfg Config) *Listener {
	return &Listener{Listener: ln, cfg: cfg, conns: map[*Conn]struct{}{}}
}

// refusalWait bounds writing the refusal: a fresh socket's send buffer
// takes it at once, so only a broken peer ever waits.
const refusalWait = time.Second

// Accept returns the next connection under the cap, refusing (and
// closing) those over it.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &Conn{Conn: nc, l: l}
		l.mu.Lock()
		full := l.cfg.MaxConns > 0 && len(l.conns) >= l.cfg.MaxConns
		if !full {
			l.conns[c] = struct{}{}
		}
		l.mu.Unlock()
		if full {
			l.refuse(nc)
			continue
		}
		if l.cfg.HeaderTimeout > 0 {
			nc.SetReadDeadline(time.Now().Add(l.cfg.HeaderTimeout))
		}
		return c, nil
	}
}

func (l *Listener) refuse(nc net.Conn) {
	if l.cfg.OnRefuse != nil {
		l.cfg.OnRefuse()
	}
	if len(l.cfg.Refusal) == 0 {
		nc.Close()
		return
	}
	nc.SetWriteDeadline(time.Now().Add(refusalWait))
	nc.Write(l.cfg.Refusal)
	// Lingers as Conn.Close does (the client may have sent its request
	// already), off the accept loop.
	go (&Conn{Conn: nc, l: l}).lingerClose()
}

// Open is how many accepted connections are open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// WakeIdle sets a read deadline of now on every connection waiting for
// its next request, which the server then closes (as net/http's
// Shutdown closes idle connections). It returns how many are open.
func (l *Listener) WakeIdle() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for c := range l.conns {
		if !c.busy.Load() {
			c.Conn.SetReadDeadline(now)
		}
	}
	return len(l.conns)
}

// Conn is an accepted connection. A connection is busy from the first
// byte of a request until the first write of its answer, idle otherwise.
type Conn struct {
	net.Conn
	l        *Listener
	busy     atomic.Bool
	handled  atomic.Bool // BeginBody ran for the current request
	timedOut atomic.Bool // a read deadline passed
	unread   atomic.Bool // the request is answered unread: linger on Close
	once     sync.Once
}

// Read reads; the first byte of a request starts its header deadline.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		c.timedOut.Store(true)
	}
	if n > 0 && c.busy.CompareAndSwap(false, true) && c.l.cfg.HeaderTimeout > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(c.l.cfg.HeaderTimeout))
	}
	return n, err
}

// Write writes p within WriteTimeout, or what Config.Unhandled puts in
// its place.
func (c *Conn) Write(p []byte) (int, error) {
	if !c.handled.Load() && c.l.cfg.Unhandled != nil {
		if q := c.l.cfg.Unhandled(p, c.timedOut.Load()); q != nil {
			c.unread.Store(true) // the server closes next, the request not read
			if _, err := c.write(q); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	c.handled.Store(false)
	n, err := c.write(p)
	c.busy.Store(false)
	return n, err
}

func (c *Conn) write(p []byte) (int, error) {
	if c.l.cfg.WriteTimeout > 0 {
		c.Conn.SetWriteDeadline(time.Now().Add(c.l.cfg.WriteTimeout))
	}
	return c.Conn.Write(p)
}

// Close closes the connection and forgets it. After an answer to a
// request that was not read whole it lingers first, as net/http does: it
// half-closes (the client reads the answer, then EOF) and discards what
// the client still sends, at most lingerBytes within lingerWait, so that
// closing with unread data does not reset the connection (a reset can
// destroy the answer before the client reads it).
func (c *Conn) Close() error {
	first := false
	c.once.Do(func() {
		first = true
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	if first && c.unread.Load() {
		return c.lingerClose()
	}
	return c.Conn.Close()
}

func (c *Conn) lingerClose() error {
	if hc, ok := c.Conn.(interface{ CloseWrite() error }); ok && hc.CloseWrite() == nil {
		c.Conn.SetReadDeadline(time.Now().Add(lingerWait))
		io.CopyN(io.Discard, c.Conn, lingerBytes)
	}
	return c.Conn.Close()
}

// What a Close after an unread request discards at most. The time bounds
// the work; the bytes are generous because a close with the client still
// sending resets the connection, and the reset destroys the answer in the
// client's receive buffer before it reads it: with 256 KiB, one in twenty
// 1 MiB bodies refused 413 on loopback got a broken pipe instead of the
// answer (TestPayloadSizeLimit, flaky in make test).
const (
	lingerWait  = 500 * time.Millisecond
	lingerBytes = 8 << 20
)

// BeginBody tells the connection that the current request's header was
// read and routed: the read deadline becomes now + timeout (none for 0).
// Safe on a nil Conn (requests served without a network, in tests).
func (c *Conn) BeginBody(timeout time.Duration) {
	if c == nil {
		return
	}
	c.handled.Store(true)
	c.busy.Store(true)
	if timeout > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(timeout))
	} else {
		c.Conn.SetReadDeadline(time.Time{})
	}
}

// AbandonBody makes every further read fail at once: what is left of the
// current request's body is never read, and the server closes the
// connection after writing its answer. Safe on a nil Conn.
func (c *Conn) AbandonBody() {
	if c != nil {
		c.unread.Store(true)
		c.Conn.SetReadDeadline(time.Now())
	}
}

type ctxKey struct{}

// WithConn returns ctx carrying c, for the server's OnAccept hook.
func WithConn(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*Conn); ok {
		return context.WithValue(ctx, ctxKey{}, lc)
	}
	return ctx
}

// FromContext returns the Conn WithConn put in ctx, or nil.
func FromContext(ctx context.Context) *Conn {
	c, _ := ctx.Value(ctxKey{}).(*Conn)
	return c
}
