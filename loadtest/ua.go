package loadtest

import (
	"crypto/ecdh"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

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

	uaid  [16]byte
	chids [][16]byte
	wsKey [16]byte
	keys  *uaKeys  // subscription keys; nil in hold
	eps   []string // endpoints while registering

	in, out, frag []byte
	acks          []uint64 // seqs acked on this connection, not yet certain

	started int64 // when this handshake began
	pingAt  int64 // next {} ping; 0 none
	leaveAt int64 // churn: when to leave; 0 none
}

// uaKeys are a subscription's RFC 8291 keys, made at setup and then
// read-only (the sender reads pub and auth from other goroutines).
type uaKeys struct {
	priv *ecdh.PrivateKey
	pub  []byte
	auth []byte
}

// serverMsg is every field of the server messages a user agent reads.
type serverMsg struct {
	MessageType  string            `json:"messageType"`
	UAID         string            `json:"uaid"`
	Status       int               `json:"status"`
	ChannelID    string            `json:"channelID"`
	PushEndpoint string            `json:"pushEndpoint"`
	Version      string            `json:"version"`
	Data         string            `json:"data"`
	Headers      map[string]string `json:"headers"`
}

// setState moves the user agent and keeps the worker's gauges.
func (u *ua) setState(s uaState) {
	w := u.l.w
	switch {
	case u.state.handshaking() && !s.handshaking():
		w.connecting.Add(-1)
	case !u.state.handshaking() && s.handshaking():
		w.connecting.Add(1)
	}
	for _, g := range [...]struct {
		st    uaState
		gauge *atomic.Int64
	}{{stReady, &w.connected}, {stClosing, &w.closing}} {
		if u.state == g.st && s != g.st {
			g.gauge.Add(-1)
		} else if u.state != g.st && s == g.st {
			g.gauge.Add(1)
		}
	}
	u.state = s
}

// connect opens a socket from the user agent's 127.0.0.x source to its
// engine. Binding first (IP_BIND_ADDRESS_NO_PORT defers the port choice to
// connect) lets every source address use the whole ephemeral range per
// destination.
func (u *ua) connect() {
	l, w := u.l, u.l.w
	w.attempts.Add(1)
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
	src := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, byte(2 + int(u.gid)%w.setup.SourceIPs)}}
	if err := unix.Bind(fd, src); err != nil {
		unix.Close(fd)
		u.failHandshake("bind: " + errnoName(err))
		return
	}
	if err := unix.Connect(fd, w.engines[u.engine]); err != nil && err != unix.EINPROGRESS {
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
	w.tracef("ua %d conn %d connect to engine %d", u.gid, u.conn, u.engine)
	l.setTimer(u, l.now+int64(w.setup.ConnectTimeout))
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
	u.write(appendUpgradeRequest(l.frame[:0], l.w.hosts[u.engine], u.wsKey))
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
		l.now = l.w.clock()
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

func (u *ua) consume(data []byte) int {
	used := 0
	if u.state == stUpgrading {
		n, err := parseUpgradeResponse(data, u.wsKey)
		if err != nil {
			reason := "upgrade"
			var ue *UpgradeError
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
		f, n, err := parseServerFrame(data[used:])
		if err != nil {
			u.broken("bad frame")
			return len(data)
		}
		if n == 0 {
			break
		}
		used += n
		u.frameIn(f)
	}
	return used
}

func (u *ua) frameIn(f serverFrame) {
	switch f.op {
	case opText:
		if !f.fin {
			u.frag = append(u.frag[:0], f.payload...)
			return
		}
		u.message(f.payload)
	case opCont:
		u.frag = append(u.frag, f.payload...)
		if f.fin {
			msg := u.frag
			u.frag = nil
			u.message(msg)
		}
	case opPing:
		if u.state != stClosing {
			u.send(opPong, f.payload)
		}
	case opPong:
	case opClose:
		u.closeReceived(closeCode(f.payload))
	default:
		u.broken("bad opcode")
	}
}

// message handles one protocol message (JSON text).
func (u *ua) message(payload []byte) {
	var m serverMsg
	if err := json.Unmarshal(payload, &m); err != nil {
		u.broken("bad json")
		return
	}
	switch m.MessageType {
	case "hello":
		u.helloReply(&m)
	case "register":
		u.registerReply(&m)
	case "notification":
		u.notification(&m)
	case "", "ping", "broadcast", "unregister":
		// "{}" answers our ping; broadcasts are not subscribed to.
	default:
		u.l.w.reason("unexpected message " + m.MessageType)
	}
}

func (u *ua) hello() {
	u.setState(stHelloing)
	b := append(u.l.scratch(), `{"messageType":"hello","use_webpush":true,"broadcasts":{}`...)
	if u.hasUAID {
		b = append(b, `,"uaid":"`...)
		b = hex.AppendEncode(b, u.uaid[:])
		b = append(b, '"')
	}
	u.sendText(append(b, '}'))
}

func (u *ua) helloReply(m *serverMsg) {
	if u.state != stHelloing {
		u.broken("hello reply out of turn")
		return
	}
	if m.Status != 200 {
		u.broken("hello status " + strconv.Itoa(m.Status))
		return
	}
	id, ok := parseUAID(m.UAID)
	if !ok {
		u.broken("hello: bad uaid")
		return
	}
	if u.hasUAID && id != u.uaid {
		// The server forgot the user: its subscriptions are gone.
		u.l.w.reason("hello: uaid changed")
		u.registered = false
	}
	u.uaid, u.hasUAID = id, true
	if u.registered {
		u.ready()
		return
	}
	u.setState(stRegistering)
	u.regs = uint16(len(u.chids))
	u.eps = make([]string, len(u.chids))
	for i := range u.chids {
		b := append(u.l.scratch(), `{"messageType":"register","channelID":"`...)
		b = appendUUID(b, u.chids[i])
		b = append(b, '"')
		if u.keys != nil {
			b = append(b, `,"key":"`...)
			b = append(b, u.l.w.vapidPublic...)
			b = append(b, '"')
		}
		u.sendText(append(b, '}'))
		if u.fd < 0 {
			return
		}
	}
}

func (u *ua) registerReply(m *serverMsg) {
	if u.state != stRegistering {
		u.broken("register reply out of turn")
		return
	}
	if m.Status != 200 || m.PushEndpoint == "" {
		u.broken("register status " + strconv.Itoa(m.Status))
		return
	}
	i := u.channelIndex(m.ChannelID)
	if i < 0 {
		u.broken("register reply for an unknown channel")
		return
	}
	u.eps[i] = m.PushEndpoint
	if u.regs--; u.regs == 0 {
		u.registered = true
		u.l.w.publish(u)
		u.eps = nil
		u.ready()
	}
}

func (u *ua) channelIndex(s string) int {
	var want [36]byte
	for i, c := range u.chids {
		if string(appendUUID(want[:0], c)) == s {
			return i
		}
	}
	return -1
}

// ready: the handshake is done; the user agent idles, pings now and then,
// and (while churning) leaves after a while.
func (u *ua) ready() {
	l, w := u.l, u.l.w
	u.setState(stReady)
	w.tracef("ua %d conn %d ready uaid %x", u.gid, u.conn, u.uaid)
	w.connects.Add(1)
	w.handshake.record(u.started, l.now)
	if u.pacer {
		u.pacer = false
		w.results <- connOutcome{u: u, ok: true}
	}
	u.pingAt, u.leaveAt = 0, 0
	if p := int64(w.setup.PingInterval); p > 0 {
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

// notification decrypts, checks, accounts and acks one push.
func (u *ua) notification(m *serverMsg) {
	l, w := u.l, u.l.w
	now := l.now
	w.received.Add(1)
	if u.state == stReady {
		// Ack whatever it is, so a bad push cannot hold a flow-control slot.
		defer u.ack(m)
	}
	if u.keys == nil || m.Headers["encoding"] != "aes128gcm" {
		w.badContent.Add(1)
		w.reason("push without aes128gcm payload")
		return
	}
	body, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(m.Data, "="))
	if err == nil {
		body, err = pushcrypto.DecryptAES128GCM(body, u.keys.priv, u.keys.auth)
	}
	if err != nil {
		w.badContent.Add(1)
		w.reason("push does not decrypt")
		return
	}
	id, err := parsePayload(body, w.setup.PayloadSize)
	if err != nil {
		w.badContent.Add(1)
		w.reason("push content differs")
		return
	}
	if id.run != w.setup.Run || id.worker != uint32(w.setup.Index) {
		w.unknown.Add(1)
		w.reason("push from another run or worker")
		return
	}
	if id.ua != uint32(u.idx) {
		w.misrouted.Add(1)
		w.reason("push reached the wrong user agent")
		return
	}
	kind := w.ledger.receive(id.seq, u.idx, u.conn)
	w.tracef("ua %d conn %d recv seq %d version %s kind %d state %s", u.gid, u.conn, id.seq, m.Version, kind, stateNames[u.state])
	switch kind {
	case rcptFirst:
		w.lat.record(id.at, now)
		w.lastRecv.Store(time.Now().UnixNano())
	case rcptAgainUnacked:
		w.redelivUnacked.Add(1)
	case rcptAgainAckUnverified:
		w.redelivUnverified.Add(1)
	case rcptAfterAck:
		w.dupAfterAck.Add(1)
		w.logf("DUPLICATE AFTER ACK: ua %d (uaid %x) seq %d version %s on connection %d", u.gid, u.uaid, id.seq, m.Version, u.conn)
	case rcptUnknown:
		w.unknown.Add(1)
		return
	}
	if u.state == stReady {
		w.ledger.ack(id.seq, u.conn)
		u.acks = append(u.acks, id.seq)
	}
}

func (u *ua) ack(m *serverMsg) {
	if u.fd < 0 || u.state != stReady {
		return
	}
	b := append(u.l.scratch(), `{"messageType":"ack","updates":[{"channelID":`...)
	b = appendJSONString(b, m.ChannelID)
	b = append(b, `,"version":`...)
	b = appendJSONString(b, m.Version)
	u.sendText(append(b, `,"code":100}]}`...))
	u.l.w.acked.Add(1)
}

// connectFor is the connect command's request: connect unless connected,
// and report the outcome on the worker's results either way.
func (u *ua) connectFor() {
	switch {
	case u.state == stReady:
		u.l.w.results <- connOutcome{u: u, ok: true}
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
	l, w := u.l, u.l.w
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
			u.sendText(append(l.scratch(), "{}"...))
			u.pingAt = l.now + l.jitter(int64(w.setup.PingInterval))
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
	n := len(u.l.w.engines)
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
	u.l.w.closes.Add(1)
	u.l.w.tracef("ua %d conn %d close sent", u.gid, u.conn)
	u.setState(stClosing)
	u.write(appendCloseFrame(u.l.frame[:0], 1000, u.l.mask()))
	if u.fd >= 0 {
		u.l.setTimer(u, u.l.now+closeTimeout)
	}
}

// closeReceived handles the server's close frame.
func (u *ua) closeReceived(code int) {
	if u.state == stClosing {
		u.l.w.tracef("ua %d conn %d closed cleanly, %d acks certain", u.gid, u.conn, len(u.acks))
		u.l.w.ledger.confirm(u.acks)
		u.acks = u.acks[:0]
		u.release()
		u.offline()
		return
	}
	// The server closes first: answer, and what we acked since its
	// last reading is uncertain.
	u.write(appendCloseFrame(u.l.frame[:0], uint16(code), u.l.mask()))
	u.broken("closed by server " + strconv.Itoa(code))
}

// broken ends the connection after a failure or a server-side close.
func (u *ua) broken(reason string) {
	w := u.l.w
	w.tracef("ua %d conn %d broken in %s: %s", u.gid, u.conn, stateNames[u.state], reason)
	switch {
	case u.state.handshaking():
		w.connectFail.Add(1)
		w.reason(reason)
		u.release()
		if u.pacer {
			u.pacer = false
			w.results <- connOutcome{u: u, reason: reason}
		}
	case u.state == stReady:
		w.dropped.Add(1)
		w.reason("dropped: " + reason)
		u.release()
	default:
		u.release()
	}
	u.offline()
}

// failHandshake counts a handshake that failed before it had a socket.
func (u *ua) failHandshake(reason string) {
	w := u.l.w
	w.connectFail.Add(1)
	w.reason(reason)
	if u.pacer {
		u.pacer = false
		w.results <- connOutcome{u: u, reason: reason}
	}
	u.offline()
}

// release closes the socket and drops the connection's buffers.
func (u *ua) release() {
	if u.fd >= 0 {
		u.l.remove(int(u.fd))
		u.fd = -1
	}
	u.in, u.out, u.frag = nil, nil, nil
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
	u.send(opText, b)
	u.l.text = b[:0] // keep the grown scratch
}

// send writes one masked frame.
func (u *ua) send(op byte, payload []byte) {
	u.write(appendClientFrame(u.l.frame[:0], op, payload, u.l.mask()))
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

// parseUAID reads a uaid in either form (32 hex digits, or dashed).
func parseUAID(s string) ([16]byte, bool) {
	var id [16]byte
	s = strings.ReplaceAll(s, "-", "")
	if len(s) != 32 {
		return id, false
	}
	_, err := hex.Decode(id[:], []byte(s))
	return id, err == nil
}

// appendUUID appends u in the dashed, lower-case form.
func appendUUID(dst []byte, u [16]byte) []byte {
	dst = hex.AppendEncode(dst, u[0:4])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[4:6])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[6:8])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[8:10])
	dst = append(dst, '-')
	return hex.AppendEncode(dst, u[10:16])
}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, `\u00`...)
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
