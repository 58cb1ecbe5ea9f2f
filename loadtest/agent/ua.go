package agent

import (
	"crypto/ecdh"
	"errors"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/pushcrypto"
)

// uaState is where a user agent is in its connection's life.
type uaState uint8

const (
	stOffline     uaState = iota
	stConnecting          // TCP connect in progress
	stUpgrading           // upgrade request sent
	stHelloing            // hello sent
	stRegistering         // registers sent
	stReady               // idle, receiving and acking
	stClosing             // our close frame sent, waiting for the server's
)

var stateNames = [...]string{"offline", "connect", "upgrade", "hello", "register", "ready", "closing"}

func (s uaState) handshaking() bool { return s >= stConnecting && s <= stRegistering }

// closeTimeout bounds the wait for the server's close frame.
const closeTimeout = 5e9

// ua is one virtual user agent: Firefox's side of the push protocol as a
// state machine on its loop. Only its loop touches it.
type ua struct {
	l      *loop
	idx    int32 // index in the worker
	gid    int32 // index in the run
	fd     int32 // -1 when offline
	state  uaState
	engine uint16
	regs   uint16 // register replies awaited
	conn   uint32 // serial of the current connection (1, 2, ...)
	tgen   uint32 // timer generation

	hasUAID    bool
	registered bool // its channels are registered (once, for good)
	pacer      bool // the connect command awaits this handshake's outcome
	reconnect  bool // connect again once the close completes
	pingOut    bool // its {} ping is not answered yet

	uaid  [16]byte
	chids [][16]byte
	wsKey [16]byte
	keys  *uaKeys  // subscription keys; nil in hold
	eps   []string // endpoints while registering

	in, out []byte
	asm     ws.Assembler // a fragmented message (the engine sends none)
	acks    []uint64     // seqs acked on this connection, not yet certain

	bseen   int64 // the newest broadcast version it has (VersionAt's instant)
	started int64 // when this handshake began
	pingAt  int64 // next {} ping; 0 none
	leaveAt int64 // churn: when to leave; 0 none
}

// uaKeys are a subscription's RFC 8291 keys, made at setup and then
// read-only (the application server reads pub and auth from other
// goroutines).
type uaKeys struct {
	priv *ecdh.PrivateKey
	pub  []byte
	auth []byte
	dec  *pushcrypto.Decrypter // made at the first push; the loop's alone
}

// decrypt decrypts a push's body, remembering the derivation for the
// last application-server key (one ECDH per key, not per push).
func (k *uaKeys) decrypt(body []byte) ([]byte, error) {
	if k.dec == nil {
		d, err := pushcrypto.NewDecrypter(k.priv, k.auth)
		if err != nil {
			return nil, err
		}
		k.dec = d
	}
	return k.dec.Decrypt(body)
}

// setState moves the user agent and keeps the set's gauges.
func (u *ua) setState(to uaState) {
	s := u.l.s
	switch {
	case u.state.handshaking() && !to.handshaking():
		s.connecting.Add(-1)
	case !u.state.handshaking() && to.handshaking():
		s.connecting.Add(1)
	}
	for _, g := range [...]struct {
		st    uaState
		gauge *atomic.Int64
	}{{stReady, &s.connected}, {stClosing, &s.closing}} {
		if u.state == g.st && to != g.st {
			g.gauge.Add(-1)
		} else if u.state != g.st && to == g.st {
			g.gauge.Add(1)
		}
	}
	u.state = to
}

// connect opens a socket from the user agent's 127.0.0.x source to its
// engine. Binding first (IP_BIND_ADDRESS_NO_PORT defers the port choice to
// connect) lets every source address use the whole ephemeral range per
// destination.
func (u *ua) connect() {
	l, s := u.l, u.l.s
	s.attempts.Add(1)
	if u.conn > 0 {
		u.moveEngine()
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		u.failHandshake("socket: " + errnoName(err))
		return
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	src := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, byte(2 + int(u.gid)%s.cfg.SourceIPs)}}
	if err := unix.Bind(fd, src); err != nil {
		unix.Close(fd)
		u.failHandshake("bind: " + errnoName(err))
		return
	}
	if err := unix.Connect(fd, s.engines[u.engine]); err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		u.failHandshake("connect: " + errnoName(err))
		return
	}
	if err := l.add(fd, u, unix.EPOLLIN|unix.EPOLLOUT|unix.EPOLLRDHUP); err != nil {
		unix.Close(fd)
		u.failHandshake("epoll: " + errnoName(err))
		return
	}
	u.fd = int32(fd)
	u.conn++
	u.started = l.now
	u.setState(stConnecting)
	s.tracef("ua %d conn %d connect to engine %d", u.gid, u.conn, u.engine)
	l.setTimer(u, l.now+int64(s.cfg.ConnectTimeout))
}

// event handles what epoll reported for the user agent's socket.
func (u *ua) event(ev uint32) {
	if u.state == stConnecting {
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		if errno, _ := unix.GetsockoptInt(int(u.fd), unix.SOL_SOCKET, unix.SO_ERROR); errno != 0 {
			u.broken("connect: " + unix.ErrnoName(unix.Errno(errno)))
			return
		}
		u.upgrade()
		return
	}
	if ev&unix.EPOLLOUT != 0 && len(u.out) > 0 {
		u.flush()
	}
	if u.fd >= 0 && ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		u.read()
	}
}

func (u *ua) upgrade() {
	l := u.l
	for i := 0; i < 16; i += 4 {
		m := l.mask()
		copy(u.wsKey[i:], m[:])
	}
	u.setState(stUpgrading)
	l.modify(int(u.fd), unix.EPOLLIN|unix.EPOLLRDHUP)
	u.write(ws.AppendUpgradeRequest(l.frame[:0], l.s.cfg.Engines[u.engine], "/", u.wsKey, ws.PushProtocol))
}

// read takes what the socket has.
func (u *ua) read() {
	l := u.l
	for u.fd >= 0 {
		n, err := unix.Read(int(u.fd), l.buf)
		switch {
		case err == unix.EAGAIN:
			return
		case err == unix.EINTR:
			continue
		case err != nil:
			u.broken("read: " + errnoName(err))
			return
		case n == 0:
			u.broken("eof")
			return
		}
		l.now = l.s.env.Clock.Now()
		u.feed(l.buf[:n])
		if n < len(l.buf) {
			return
		}
	}
}

// feed consumes whole units (the upgrade response, frames) and keeps a
// partial one; an idle user agent holds no buffer.
func (u *ua) feed(data []byte) {
	if len(u.in) > 0 {
		u.in = append(u.in, data...)
		data = u.in
	}
	n := u.consume(data)
	if u.fd < 0 {
		u.in = nil
		return
	}
	rest := data[n:]
	switch {
	case len(rest) == 0:
		u.in = nil
	case len(u.in) > 0:
		u.in = u.in[:copy(u.in, rest)]
	default:
		u.in = append([]byte(nil), rest...)
	}
}

// maxServerFrame bounds a frame and a message from the server:
// notifications are under 8 KiB, so anything near this is a bug.
const maxServerFrame = 1 << 20

func (u *ua) consume(data []byte) int {
	used := 0
	if u.state == stUpgrading {
		n, err := ws.ParseUpgradeResponse(data, u.wsKey)
		if err != nil {
			reason := "upgrade"
			var ue *ws.UpgradeError
			if errors.As(err, &ue) {
				reason = "upgrade: HTTP " + strconv.Itoa(ue.Status)
			}
			u.broken(reason)
			return len(data)
		}
		if n == 0 {
			return 0
		}
		used = n
		u.hello()
	}
	for u.fd >= 0 && used < len(data) {
		h, p, n, err := ws.ParseServerFrame(data[used:], maxServerFrame)
		if err != nil {
			u.broken("bad frame")
			return len(data)
		}
		if n == 0 {
			break
		}
		used += n
		msg, ok, err := u.asm.Feed(h, p, maxServerFrame)
		switch {
		case err != nil:
			u.broken("bad frame")
			return len(data)
		case ok:
			u.messageIn(msg)
			u.asm.Release()
		}
	}
	return used
}

// messageIn handles one message from the server.
func (u *ua) messageIn(m ws.Message) {
	switch m.Op {
	case ws.OpText:
		u.message(m.Payload)
	case ws.OpPing:
		u.l.s.serverPings.Add(1)
		if u.state != stClosing {
			u.send(ws.OpPong, m.Payload)
			u.l.s.pongs.Add(1)
		}
	case ws.OpPong:
	case ws.OpClose:
		u.closeReceived(m.Code)
	default:
		u.broken("bad opcode")
	}
}

// ready: the handshake is done; the user agent idles, pings now and then,
// and (while churning) leaves after a while.
func (u *ua) ready() {
	l, s := u.l, u.l.s
	u.setState(stReady)
	s.tracef("ua %d conn %d ready uaid %x", u.gid, u.conn, u.uaid)
	s.connects.Add(1)
	s.env.Handshake.Record(u.started, l.now)
	if u.pacer {
		u.pacer = false
		s.results <- connOutcome{u: u, ok: true}
	}
	u.pingAt, u.leaveAt, u.pingOut = 0, 0, false
	if p := int64(s.cfg.PingInterval); p > 0 {
		u.pingAt = l.now + l.jitter(p)
	}
	if l.churn != nil {
		u.leaveAt = l.now + l.exp(int64(l.churn.SessionMean))
	}
	u.armReadyTimer()
}

func (u *ua) armReadyTimer() {
	next := u.pingAt
	if u.leaveAt != 0 && (next == 0 || u.leaveAt < next) {
		next = u.leaveAt
	}
	if next == 0 {
		u.l.clearTimer(u)
		return
	}
	u.l.setTimer(u, next)
}

// connectFor is the connect command's request: connect unless connected,
// and report the outcome on the worker's results either way.
func (u *ua) connectFor() {
	switch {
	case u.state == stReady:
		u.l.s.results <- connOutcome{u: u, ok: true}
	case u.state.handshaking():
		u.pacer = true
	case u.state == stClosing:
		u.reconnect = true
	default:
		u.pacer = true
		u.connect()
	}
}

// timeout handles the user agent's deadline.
func (u *ua) timeout() {
	l, s := u.l, u.l.s
	switch {
	case u.state.handshaking():
		u.broken("timeout: " + stateNames[u.state])
	case u.state == stClosing:
		u.broken("timeout: close")
	case u.state == stReady:
		if u.leaveAt != 0 && l.now >= u.leaveAt {
			u.leaveAt = 0
			u.disconnect()
			return
		}
		if u.pingAt != 0 && l.now >= u.pingAt {
			if u.pingOut {
				// A whole interval went by without the engine's answer.
				s.pingsUnanswered.Add(1)
			}
			u.pingOut = true
			s.pings.Add(1)
			u.sendText(append(l.scratch(), "{}"...))
			u.pingAt = l.now + l.jitter(int64(s.cfg.PingInterval))
		}
		if u.fd >= 0 {
			u.armReadyTimer()
		}
	case u.state == stOffline && l.churn != nil:
		u.connect()
	}
}

// moveEngine picks the engine of a reconnection, so that users move
// between nodes: a random one while churning, else the next one.
func (u *ua) moveEngine() {
	n := len(u.l.s.engines)
	switch {
	case n < 2:
	case u.l.churn != nil:
		u.engine = uint16(u.l.rng.IntN(n))
	default:
		u.engine = uint16((int(u.engine) + 1) % n)
	}
}

// disconnect starts a clean close: the server answers our close frame
// after handling everything sent before it, acks included.
func (u *ua) disconnect() {
	if u.state != stReady {
		return
	}
	u.l.s.closes.Add(1)
	u.l.s.tracef("ua %d conn %d close sent", u.gid, u.conn)
	u.setState(stClosing)
	u.write(ws.AppendClientClose(u.l.frame[:0], ws.StatusNormalClosure, u.l.mask()))
	if u.fd >= 0 {
		u.l.setTimer(u, u.l.now+closeTimeout)
	}
}

// closeReceived handles the server's close frame.
func (u *ua) closeReceived(code ws.StatusCode) {
	if u.state == stClosing {
		u.l.s.tracef("ua %d conn %d closed cleanly, %d acks certain", u.gid, u.conn, len(u.acks))
		u.l.s.env.Ledger.Confirm(u.acks)
		u.acks = u.acks[:0]
		u.release()
		u.offline()
		return
	}
	// The server closes first: answer, and what we acked since its
	// last reading is uncertain.
	u.write(ws.AppendClientClose(u.l.frame[:0], code, u.l.mask()))
	u.broken("closed by server " + strconv.Itoa(int(code)))
}

// broken ends the connection after a failure or a server-side close.
func (u *ua) broken(reason string) {
	s := u.l.s
	s.tracef("ua %d conn %d broken in %s: %s", u.gid, u.conn, stateNames[u.state], reason)
	switch {
	case u.state.handshaking():
		s.connectFail.Add(1)
		s.reason(reason)
		u.release()
		if u.pacer {
			u.pacer = false
			s.results <- connOutcome{u: u, reason: reason}
		}
	case u.state == stReady:
		s.dropped.Add(1)
		s.reason("dropped: " + reason)
		u.release()
	default:
		u.release()
	}
	u.offline()
}

// failHandshake counts a handshake that failed before it had a socket.
func (u *ua) failHandshake(reason string) {
	s := u.l.s
	s.connectFail.Add(1)
	s.reason(reason)
	if u.pacer {
		u.pacer = false
		s.results <- connOutcome{u: u, reason: reason}
	}
	u.offline()
}

// release closes the socket and drops the connection's buffers.
func (u *ua) release() {
	if u.fd >= 0 {
		u.l.remove(int(u.fd))
		u.fd = -1
	}
	u.in, u.out = nil, nil
	u.asm.Reset()
	u.acks = u.acks[:0]
	u.setState(stOffline)
	u.l.clearTimer(u)
}

// offline decides what an offline user agent does next.
func (u *ua) offline() {
	l := u.l
	switch {
	case u.reconnect:
		u.reconnect = false
		u.pacer = true
		u.connect()
	case l.churn != nil:
		l.setTimer(u, l.now+l.exp(int64(l.churn.OfflineMean)))
	}
}

// sendText sends b, built in the loop's text scratch, as a text frame.
func (u *ua) sendText(b []byte) {
	u.send(ws.OpText, b)
	u.l.text = b[:0] // keep the grown scratch
}

// send writes one masked frame.
func (u *ua) send(op ws.OpCode, payload []byte) {
	u.write(ws.AppendClientFrame(u.l.frame[:0], op, payload, u.l.mask()))
}

// write writes b now, or queues it behind what the socket could not take.
func (u *ua) write(b []byte) {
	u.l.frame = b[:0] // keep the grown scratch
	if u.fd < 0 {
		return
	}
	if len(u.out) > 0 {
		u.out = append(u.out, b...)
		return
	}
	n, err := unix.Write(int(u.fd), b)
	if err == unix.EAGAIN {
		n, err = 0, nil
	}
	if err != nil {
		u.broken("write: " + errnoName(err))
		return
	}
	if n < len(b) {
		u.out = append([]byte(nil), b[n:]...)
		u.l.modify(int(u.fd), unix.EPOLLIN|unix.EPOLLOUT|unix.EPOLLRDHUP)
	}
}

func (u *ua) flush() {
	n, err := unix.Write(int(u.fd), u.out)
	if err == unix.EAGAIN {
		return
	}
	if err != nil {
		u.broken("write: " + errnoName(err))
		return
	}
	u.out = u.out[n:]
	if len(u.out) == 0 {
		u.out = nil
		u.l.modify(int(u.fd), unix.EPOLLIN|unix.EPOLLRDHUP)
	}
}

// errnoName names a system call error the way the report counts it.
func errnoName(err error) string {
	var en unix.Errno
	if errors.As(err, &en) {
		if name := unix.ErrnoName(en); name != "" {
			return name
		}
	}
	return err.Error()
}
