package agent

import (
	"crypto/ecdh"
	"crypto/rand"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/ledger"
)

// Settings are one worker's user agents' share of the run.
type Settings struct {
	Run            uint32   // run id, in every payload
	Worker         int      // the worker's index, in every payload
	First          int      // run-wide index of the first user agent
	UAs            int      // how many
	Engines        []string // websocket host:port of every engine
	SourceIPs      int      // 127.0.0.2 .. 127.0.0.(1+SourceIPs)
	Channels       int      // registered per user agent
	Loops          int      // epoll loops
	MaxPending     int      // handshakes in progress at most
	ConnectTimeout time.Duration
	ConnectRetries int
	PingInterval   time.Duration // {} pings, jittered; 0 never
	// Keys gives subscriptions RFC 8291 keys, registered with VAPIDPublic
	// (false for hold: no pushes).
	Keys        bool
	VAPIDPublic string
	PayloadSize int  // of every push's plaintext
	Trace       bool // log every connection and arrival
	// Broadcasts are the broadcast ids every user agent follows (named in
	// its hello); none: it follows none (broadcast.go).
	Broadcasts []string
}

// Env is what the user agents share with their worker.
type Env struct {
	Clock     hist.Clock
	Ledger    *ledger.Ledger
	Latency   *hist.Recorder // delivery: scheduled send to first arrival
	Handshake *hist.Recorder // connect to the last register reply
	Logf      func(format string, args ...any)
	Fatal     func(error) // the worker cannot go on
}

// Set is one worker's user agents on their event loops. Its exported
// methods are goroutine-safe; a command (ConnectAll, DisconnectAll, Churn)
// runs at a time.
type Set struct {
	cfg     Settings
	env     Env
	loops   []*loop
	uas     []*ua
	engines []unix.Sockaddr
	subs    []atomic.Pointer[Subscription]
	results chan connOutcome
	quit    chan struct{}
	closed  atomic.Bool

	connected, connecting, closing                   atomic.Int64
	attempts, connects, connectFail, dropped, closes atomic.Int64
	received, acked                                  atomic.Int64
	dupAfterAck, redelivUnacked, redelivUnverified   atomic.Int64
	badContent, misrouted, unknown                   atomic.Int64
	pings, pingReplies, pingsUnanswered              atomic.Int64 // {} pings sent, answered, found unanswered at the next
	serverPings, pongs                               atomic.Int64 // the engine's websocket pings received, answered
	lastRecv                                         atomic.Int64 // wall clock ns of the latest first arrival
	reasonsMu                                        sync.Mutex
	reasons                                          map[string]int64
	bcast                                            broadcasts
}

// Subscription is what the application server needs of a registered user
// agent.
type Subscription struct {
	UA        int32 // index in the worker
	GID       int32 // index in the run
	Endpoints []string
	P256dh    []byte
	Auth      []byte
}

// connOutcome is one handshake's result for ConnectAll.
type connOutcome struct {
	u      *ua
	ok     bool
	reason string
}

// New builds the user agents (offline) and their loops; Start runs them.
func New(cfg Settings, env Env) (*Set, error) {
	s := &Set{cfg: cfg, env: env, reasons: map[string]int64{}, quit: make(chan struct{})}
	for _, e := range cfg.Engines {
		sa, err := sockaddr(e)
		if err != nil {
			return nil, err
		}
		s.engines = append(s.engines, sa)
	}
	for i := range max(cfg.Loops, 1) {
		l, err := newLoop(s, uint64(cfg.Worker)<<32|uint64(i))
		if err != nil {
			return nil, err
		}
		s.loops = append(s.loops, l)
	}
	s.subs = make([]atomic.Pointer[Subscription], cfg.UAs)
	s.results = make(chan connOutcome, cfg.UAs)
	for i := range cfg.UAs {
		gid := cfg.First + i
		u := &ua{idx: int32(i), gid: int32(gid), fd: -1, engine: uint16(gid % len(s.engines)),
			chids: make([][16]byte, cfg.Channels), l: s.loops[i%len(s.loops)]}
		for c := range u.chids {
			rand.Read(u.chids[c][:])
			u.chids[c][6] = u.chids[c][6]&0x0f | 0x40
			u.chids[c][8] = u.chids[c][8]&0x3f | 0x80
		}
		if cfg.Keys {
			priv, err := ecdh.P256().GenerateKey(rand.Reader)
			if err != nil {
				return nil, fmt.Errorf("loadtest: subscription key: %w", err)
			}
			u.keys = &uaKeys{priv: priv, pub: priv.PublicKey().Bytes(), auth: make([]byte, pushcrypto.AuthSecretLen)}
			rand.Read(u.keys.auth)
		}
		u.l.uas = append(u.l.uas, u)
		s.uas = append(s.uas, u)
	}
	return s, nil
}

// Start runs the loops.
func (s *Set) Start() {
	for _, l := range s.loops {
		go l.run()
	}
}

// Close stops the loops, closing every socket without a handshake;
// idempotent.
func (s *Set) Close() {
	if s.closed.Swap(true) {
		return
	}
	close(s.quit)
	for _, l := range s.loops {
		l.shutdown()
	}
}

// sockaddr resolves an IPv4 host:port.
func sockaddr(hostport string) (unix.Sockaddr, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("loadtest: engine address %q: %w", hostport, err)
	}
	ip := net.ParseIP(host).To4()
	p, err := strconv.Atoi(port)
	if ip == nil || err != nil {
		return nil, fmt.Errorf("loadtest: engine address %q is not IPv4 host:port", hostport)
	}
	return &unix.SockaddrInet4{Port: p, Addr: [4]byte(ip)}, nil
}

// publish makes a registered user agent's subscription visible to the
// application server. Called on the user agent's loop.
func (s *Set) publish(u *ua) {
	if u.keys == nil {
		return
	}
	s.subs[u.idx].Store(&Subscription{UA: u.idx, GID: u.gid, Endpoints: u.eps, P256dh: u.keys.pub, Auth: u.keys.auth})
}

// Subscriptions lists the registered user agents, in index order.
func (s *Set) Subscriptions() []*Subscription {
	var out []*Subscription
	for i := range s.subs {
		if sub := s.subs[i].Load(); sub != nil {
			out = append(out, sub)
		}
	}
	return out
}

// LogMissing logs the accepted pushes that never arrived (kind "LOST"), or
// were not acked (kind "STALLED"), with what a post-mortem needs: the
// endpoint's message id (Location) and the user agent's uaid and
// connection count.
func (s *Set) LogMissing(kind string, unacked bool) {
	for _, p := range s.env.Ledger.Missing(unacked) {
		u := s.uas[p.UA]
		var uaid [16]byte
		var conns uint32
		var state uaState
		u.l.call(func() { uaid, conns, state = u.uaid, u.conn, u.state })
		s.env.Logf("%s: push seq %d to ua %d (uaid %x, %d connections, now %s), arrived %d times, location %s",
			kind, p.Seq, u.gid, uaid, conns, stateNames[state], p.Recv, p.Location)
	}
}

// reason counts why a handshake failed or a connection dropped.
func (s *Set) reason(r string) {
	s.reasonsMu.Lock()
	s.reasons[r]++
	s.reasonsMu.Unlock()
}

// tracef logs when tracing (Settings.Trace), with the wall time.
func (s *Set) tracef(format string, args ...any) {
	if s.cfg.Trace {
		s.env.Logf("%s %s", time.Now().Format("15:04:05.000000"), fmt.Sprintf(format, args...))
	}
}

// Counters are the user agents' gauges and cumulative counts.
type Counters struct {
	Connected, Connecting                  int   // ready now; handshaking now
	Connects, ConnectFail, Dropped, Closes int64 // handshakes done and failed; ready connections lost; closed by us
	Received, Acked                        int64
	Problems                               ledger.Problems
	Reasons                                map[string]int64 // why handshakes failed and connections dropped
	LastRecv                               int64            // wall clock ns of the latest first arrival
	Pings                                  Pings
}

// Pings counts the keepalives both ways.
type Pings struct {
	Sent       int64 `json:"sent"`       // {} pings the user agents sent
	Answered   int64 `json:"answered"`   // ... the engines answered
	Unanswered int64 `json:"unanswered"` // ... still unanswered when the next was due
	Server     int64 `json:"server"`     // the engines' websocket pings received
	Pongs      int64 `json:"pongs"`      // ... answered
}

// Add adds o to p.
func (p *Pings) Add(o Pings) {
	p.Sent += o.Sent
	p.Answered += o.Answered
	p.Unanswered += o.Unanswered
	p.Server += o.Server
	p.Pongs += o.Pongs
}

// Counters reads the counters now.
func (s *Set) Counters() Counters {
	c := Counters{
		Connected: int(s.connected.Load()), Connecting: int(s.connecting.Load()),
		Connects: s.connects.Load(), ConnectFail: s.connectFail.Load(), Dropped: s.dropped.Load(), Closes: s.closes.Load(),
		Received: s.received.Load(), Acked: s.acked.Load(), Problems: s.Problems(), LastRecv: s.lastRecv.Load(),
		Pings: Pings{Sent: s.pings.Load(), Answered: s.pingReplies.Load(), Unanswered: s.pingsUnanswered.Load(),
			Server: s.serverPings.Load(), Pongs: s.pongs.Load()},
	}
	s.reasonsMu.Lock()
	c.Reasons = make(map[string]int64, len(s.reasons))
	for k, v := range s.reasons {
		c.Reasons[k] = v
	}
	s.reasonsMu.Unlock()
	return c
}

// Problems are the arrivals counted as wrong or repeated so far.
func (s *Set) Problems() ledger.Problems {
	return ledger.Problems{DupAfterAck: s.dupAfterAck.Load(), RedelivUnacked: s.redelivUnacked.Load(),
		RedelivUnverified: s.redelivUnverified.Load(), BadContent: s.badContent.Load(), Misrouted: s.misrouted.Load(),
		Unknown: s.unknown.Load()}
}
