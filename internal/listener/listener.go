package listener

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config of a Listener. The zero value caps nothing and sets no deadline.
type Config struct {
	// MaxConns caps the connections open at once. A connection accepted
	// beyond it is written Refusal (when set) and closed, and Accept goes
	// on with the next one. 0: no cap.
	MaxConns int
	// MaxConnsPerSource caps the connections open at once from one
	// source: an IPv4 address, or an IPv6 /64 (one host's usual share).
	// A connection beyond it is written SourceRefusal and closed. 0: no
	// cap.
	MaxConnsPerSource int
	// Exempt are the sources MaxConnsPerSource does not apply to (a load
	// balancer in front, whose connections all come from its addresses).
	Exempt []netip.Prefix
	// RequestTimeout bounds the time from a request's first byte (for a
	// connection's first request: from accept) until its answer is
	// written, plus at most Spread of it: the read deadline is set then
	// and never moved later, whatever deadline the server asks for
	// meanwhile. A request that
	// does not arrive whole in time fails its reads. 0: none (the server
	// sets its own deadlines).
	RequestTimeout time.Duration
	// WriteTimeout bounds each write. 0: none.
	WriteTimeout time.Duration
	// Refusal is what a connection over MaxConns is written before it is
	// closed (an HTTP answer with "Connection: close").
	Refusal []byte
	// SourceRefusal is what a connection over MaxConnsPerSource is
	// written before it is closed; Refusal when empty.
	SourceRefusal []byte
	// OnRefuse, if set, is called for each connection refused over
	// MaxConns, and OnSourceRefuse for each over MaxConnsPerSource
	// (metrics).
	OnRefuse, OnSourceRefuse func()
	// RefusalWait bounds writing a refusal (on a TLS connection, the
	// client's handshake first). 0: one second, as a fresh socket's send
	// buffer takes a refusal at once and only a broken or stalling peer
	// ever waits.
	RefusalWait time.Duration
	// OnAcceptError, if set, sees each accept error Accept waits out
	// (metrics, a log line): the process ran out of file descriptors or
	// kernel memory, and Accept tries again after a pause.
	OnAcceptError func(error)
	// Unhandled, if set, sees each write made on a connection whose
	// current request has not reached Conn.Routed: the server answering a
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

	sources *Sources // nil: no per-source cap

	mu    sync.Mutex // before sources' own
	conns map[*Conn]struct{}

	refusing  chan struct{} // a token per refusal being written
	closed    chan struct{} // closed by Close: ends a pause in Accept
	closeOnce sync.Once
}

// New wraps ln.
func New(ln net.Listener, cfg Config) *Listener {
	if cfg.RefusalWait <= 0 {
		cfg.RefusalWait = time.Second
	}
	return &Listener{Listener: ln, cfg: cfg, conns: map[*Conn]struct{}{},
		sources:  NewSources(cfg.MaxConnsPerSource, cfg.Exempt),
		refusing: make(chan struct{}, maxRefusing),
		closed:   make(chan struct{})}
}

// maxRefusing bounds the refusals being written at once; beyond it a
// connection over a cap is closed without its answer. Each one waits at
// most RefusalWait.
const maxRefusing = 256

// The pauses after an accept error: doubled from the first to the last
// while errors follow each other. Connections wait in the kernel's
// queue meanwhile, and one closing frees the descriptor the next takes.
const (
	firstAcceptPause = 5 * time.Millisecond
	lastAcceptPause  = time.Second
)

// Accept returns the next connection under the caps, refusing (and
// closing) those over them. An accept that fails for want of a file
// descriptor or of kernel memory is tried again after a pause: a server
// whose Accept returns an error stops serving for good (Hertz's does),
// and the shortage passes as connections close.
func (l *Listener) Accept() (net.Conn, error) {
	var pause time.Duration
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			if !shortage(err) {
				return nil, err
			}
			if l.cfg.OnAcceptError != nil {
				l.cfg.OnAcceptError(err)
			}
			pause = min(max(2*pause, firstAcceptPause), lastAcceptPause)
			select {
			case <-l.closed:
				return nil, net.ErrClosed
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		c := &Conn{Conn: nc, l: l, src: l.sources.Of(nc.RemoteAddr())}
		l.mu.Lock()
		full := l.cfg.MaxConns > 0 && len(l.conns) >= l.cfg.MaxConns
		over := !full && !l.sources.Take(c.src)
		if !full && !over {
			l.conns[c] = struct{}{}
		}
		l.mu.Unlock()
		switch {
		case full:
			l.refuse(nc, l.cfg.Refusal, l.cfg.OnRefuse)
			continue
		case over:
			refusal := l.cfg.SourceRefusal
			if len(refusal) == 0 {
				refusal = l.cfg.Refusal
			}
			l.refuse(nc, refusal, l.cfg.OnSourceRefuse)
			continue
		}
		if l.cfg.RequestTimeout > 0 {
			c.arm(time.Now())
		}
		return c, nil
	}
}

func (l *Listener) refuse(nc net.Conn, refusal []byte, count func()) {
	if count != nil {
		count()
	}
	if len(refusal) == 0 {
		nc.Close()
		return
	}
	select {
	case l.refusing <- struct{}{}:
	default:
		nc.Close() // a flood of refusals: no answer for the rest
		return
	}
	// Off the accept loop: on a TLS connection the write first runs the
	// handshake, which a client that stalls holds for RefusalWait, and
	// Accept must go on meanwhile.
	go func() {
		defer func() { <-l.refusing }()
		nc.SetDeadline(time.Now().Add(l.cfg.RefusalWait)) // both: the handshake reads
		nc.Write(refusal)
		// Lingers as Conn.Close does: the client may have sent its
		// request already.
		(&Conn{Conn: nc, l: l}).lingerClose()
	}()
}

// Close closes the listener; an Accept pausing after an error returns.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// shortage says whether an accept error is the process or the kernel
// running short (file descriptors, buffers, memory), which passes.
func shortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
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
// byte of a request (or from BeginRequest) until the first write of its
// answer, idle otherwise.
type Conn struct {
	net.Conn
	l        *Listener
	src      Source // what the per-source cap counts it under
	busy     atomic.Bool
	reqEnd   atomic.Int64 // the current request's deadline (unix ns); 0: none
	handled  atomic.Bool  // Routed ran for the current request
	timedOut atomic.Bool  // the request's read deadline passed
	abandon  atomic.Bool  // AbandonBody ran: its deadline is no time-out
	unread   atomic.Bool  // the request is answered unread: linger on Close
	once     sync.Once
}

// arm starts a request's deadline at now + RequestTimeout, plus a spread
// (Spread), unless one is running.
func (c *Conn) arm(now time.Time) {
	if c.l.cfg.RequestTimeout <= 0 || c.reqEnd.Load() != 0 {
		return
	}
	end := now.Add(c.l.cfg.RequestTimeout + rand.N(Spread(c.l.cfg.RequestTimeout)))
	c.reqEnd.Store(end.UnixNano())
	c.Conn.SetReadDeadline(end)
}

// Spread is how much later than its timeout a request's deadline may
// fall, at random: a tenth of the timeout, at most half a second. A crowd
// of connections opened together and stalled together (one client's
// attack) is then closed over that time, not all in one instant, whose
// burst of wake-ups and closes held the other requests up for 100 ms on
// two cores (docs/capacity.md).
func Spread(timeout time.Duration) time.Duration {
	return max(time.Nanosecond, min(timeout/10, 500*time.Millisecond))
}

// Read reads; the first byte of a request starts its deadline.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !c.abandon.Load() {
		c.timedOut.Store(true)
	}
	if n > 0 && c.busy.CompareAndSwap(false, true) {
		c.arm(time.Now())
	}
	return n, err
}

// BeginRequest tells the connection that the server starts on its next
// request, at now: one whose bytes it read along with the one before
// (pipelined) starts its deadline here, as it read no byte of it. Safe on
// a nil Conn.
func (c *Conn) BeginRequest(now time.Time) {
	if c == nil {
		return
	}
	c.busy.Store(true)
	c.arm(now)
}

// SetReadDeadline sets the read deadline, never later than the current
// request's: the server's own deadlines (Hertz sets one after a
// keep-alive request's first bytes) cannot extend it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if end := c.reqEnd.Load(); end != 0 && (t.IsZero() || t.UnixNano() > end) {
		t = time.Unix(0, end)
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines, the read one as SetReadDeadline.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// continueAnswer is the interim answer that does not end a request.
var continueAnswer = []byte("HTTP/1.1 100 ")

// Write writes p within WriteTimeout, or what Config.Unhandled puts in
// its place. The first write of a final answer ends the request: its
// deadline stops and the connection is idle.
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
	interim := bytes.HasPrefix(p, continueAnswer)
	if !interim {
		c.handled.Store(false)
	}
	n, err := c.write(p)
	if !interim {
		c.reqEnd.Store(0)
		c.busy.Store(false)
	}
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
		c.l.sources.Release(c.src)
		c.l.mu.Unlock()
	})
	// A connection that ran out its time is closed at once: its client
	// is the stalled kind, and lingering for it would wake every one of a
	// crowd of them a second time.
	if first && c.unread.Load() && !c.timedOut.Load() {
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

// Routed tells the connection that the current request's header was read
// and routed: what the server writes from now on is its own answer, not
// Config.Unhandled's to see. The read deadline stays the request's. Safe
// on a nil Conn (requests served without a network, in tests).
func (c *Conn) Routed() {
	if c == nil {
		return
	}
	c.handled.Store(true)
	c.busy.Store(true)
}

// AbandonBody makes every further read fail at once: what is left of the
// current request's body is never read, and the server closes the
// connection after writing its answer. Safe on a nil Conn.
func (c *Conn) AbandonBody() {
	if c != nil {
		c.unread.Store(true)
		// Its deadline of now is not the client running out of time: the
		// close after the answer must still linger (Close), or the client
		// still sending the body gets a reset instead of the answer.
		c.abandon.Store(true)
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
