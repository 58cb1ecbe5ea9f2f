package loadtest

import (
	"bufio"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/autopush-go/autopush/internal/pushcrypto"
)

// IsWorker reports whether this process was started as a worker (WorkerEnv
// set); its main should then call RunWorker and exit.
func IsWorker() bool { return os.Getenv(WorkerEnv) != "" }

// RunWorker runs a worker process: commands from in, events to out, its
// log to logw. It returns when told to stop or when in is closed.
func RunWorker(in io.Reader, out, logw io.Writer) error {
	w := &worker{
		epoch:     time.Now(),
		enc:       json.NewEncoder(out),
		logw:      logw,
		reasons:   map[string]int64{},
		lat:       newRecorder(),
		resp:      newRecorder(),
		lag:       newRecorder(),
		handshake: newRecorder(),
		quit:      make(chan struct{}),
	}
	defer w.close()
	dec := json.NewDecoder(bufio.NewReader(in))
	for {
		var c command
		if err := dec.Decode(&c); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("loadtest: worker: read command: %w", err)
		}
		ev, err := w.do(c)
		if err != nil {
			w.emit(event{Type: "fatal", ID: c.ID, Err: err.Error()})
			return err
		}
		ev.Type, ev.ID = "done", c.ID
		w.emit(ev)
		if c.Op == opStop {
			return nil
		}
	}
}

// worker is one worker process: its user agents on their loops, its
// sender, its ledger and counters.
type worker struct {
	setup   setupArgs
	epoch   time.Time
	enc     *json.Encoder
	encMu   sync.Mutex
	logw    io.Writer
	logMu   sync.Mutex
	loops   []*loop
	uas     []*ua
	engines []unix.Sockaddr
	hosts   []string
	subs    []atomic.Pointer[subscription]
	ledger  ledger
	sender  *sender
	results chan connOutcome
	quit    chan struct{}
	closed  bool

	vapidPublic string

	lat, resp, lag, handshake *recorder

	connected, connecting, closing                   atomic.Int64
	attempts, connects, connectFail, dropped, closes atomic.Int64
	received, acked                                  atomic.Int64
	dupAfterAck, redelivUnacked, redelivUnverified   atomic.Int64
	badContent, misrouted, unknown                   atomic.Int64
	lastRecv                                         atomic.Int64 // wall clock ns of the latest first arrival
	reasonsMu                                        sync.Mutex
	reasons                                          map[string]int64
	statsDone                                        chan struct{}
}

// subscription is what the sender needs of a registered user agent.
type subscription struct {
	ua        int32
	endpoints []string
	keys      *uaKeys
}

// connOutcome is one handshake's result for the connect command.
type connOutcome struct {
	u      *ua
	ok     bool
	reason string
}

// clock is nanoseconds since the worker started (monotonic).
func (w *worker) clock() int64 { return int64(time.Since(w.epoch)) }

func (w *worker) emit(ev event) {
	w.encMu.Lock()
	defer w.encMu.Unlock()
	w.enc.Encode(ev)
}

func (w *worker) logf(format string, args ...any) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	fmt.Fprintf(w.logw, "worker %d: %s\n", w.setup.Index, fmt.Sprintf(format, args...))
}

// tracef logs when tracing (Config.Trace), with the wall time.
func (w *worker) tracef(format string, args ...any) {
	if w.setup.Trace {
		w.logf("%s %s", time.Now().Format("15:04:05.000000"), fmt.Sprintf(format, args...))
	}
}

// wall is a worker clock reading as wall time.
func (w *worker) wall(at int64) string {
	return w.epoch.Add(time.Duration(at)).Format("15:04:05.000000")
}

// logMissing logs the accepted pushes that never arrived (kind "LOST"),
// or were not acked (kind "STALLED"), with what a post-mortem needs: the
// endpoint's message id (Location) and the user agent's uaid and
// connection count.
func (w *worker) logMissing(kind string, unacked bool) {
	for _, p := range w.ledger.missing(unacked) {
		u := w.uas[p.ua]
		var uaid [16]byte
		var conns uint32
		var state uaState
		u.l.call(func() { uaid, conns, state = u.uaid, u.conn, u.state })
		w.logf("%s: push seq %d to ua %d (uaid %x, %d connections, now %s), arrived %d times, location %s",
			kind, p.seq, u.gid, uaid, conns, stateNames[state], p.recv, p.location)
	}
}

// fatal reports an error the worker cannot continue after and exits.
func (w *worker) fatal(err error) {
	w.emit(event{Type: "fatal", Err: err.Error()})
	os.Exit(1)
}

// reason counts why a handshake failed or a connection dropped.
func (w *worker) reason(r string) {
	w.reasonsMu.Lock()
	w.reasons[r]++
	w.reasonsMu.Unlock()
}

func (w *worker) do(c command) (event, error) {
	switch c.Op {
	case opSetup:
		if c.Setup == nil {
			return event{}, errors.New("loadtest: setup without arguments")
		}
		return event{}, w.start(*c.Setup)
	case opConnect:
		r := w.connectAll(*c.Connect)
		return event{Connect: &r}, nil
	case opDisconnect:
		w.disconnectAll()
		return event{}, nil
	case opSend:
		if w.sender == nil {
			return event{}, errors.New("loadtest: send without subscription keys")
		}
		r := w.sender.phase(*c.Send)
		return event{Send: &r}, nil
	case opChurn:
		w.churn(*c.Churn)
		return event{}, nil
	case opDrain:
		r := w.drain(*c.Drain)
		return event{Drain: &r}, nil
	case opAccount:
		w.logMissing("LOST", false)
		a := w.ledger.account(0, w.ledger.len())
		a.addProblems(w.problemCounts())
		return event{Account: &a}, nil
	case opStop:
		w.close()
		return event{}, nil
	}
	return event{}, fmt.Errorf("loadtest: unknown command %q", c.Op)
}

// start builds the worker's user agents and starts its loops.
func (w *worker) start(a setupArgs) error {
	w.setup = a
	if err := fdRoom(a.UAs + a.SenderConns + 128); err != nil {
		return err
	}
	for _, e := range a.Engines {
		sa, err := sockaddr(e)
		if err != nil {
			return err
		}
		w.engines = append(w.engines, sa)
		w.hosts = append(w.hosts, e)
	}
	if a.Keys {
		s, err := newSender(w)
		if err != nil {
			return err
		}
		w.sender = s
		w.vapidPublic = s.signer.Public
	}
	for i := range max(a.Loops, 1) {
		l, err := newLoop(w, uint64(a.Index)<<32|uint64(i))
		if err != nil {
			return err
		}
		w.loops = append(w.loops, l)
	}
	w.subs = make([]atomic.Pointer[subscription], a.UAs)
	w.results = make(chan connOutcome, a.UAs)
	for i := range a.UAs {
		gid := a.First + i
		u := &ua{idx: int32(i), gid: int32(gid), fd: -1, engine: uint16(gid % len(w.engines)),
			chids: make([][16]byte, a.Channels), l: w.loops[i%len(w.loops)]}
		for c := range u.chids {
			rand.Read(u.chids[c][:])
			u.chids[c][6] = u.chids[c][6]&0x0f | 0x40
			u.chids[c][8] = u.chids[c][8]&0x3f | 0x80
		}
		if a.Keys {
			priv, err := ecdh.P256().GenerateKey(rand.Reader)
			if err != nil {
				return fmt.Errorf("loadtest: subscription key: %w", err)
			}
			u.keys = &uaKeys{priv: priv, pub: priv.PublicKey().Bytes(), auth: make([]byte, pushcrypto.AuthSecretLen)}
			rand.Read(u.keys.auth)
		}
		u.l.uas = append(u.l.uas, u)
		w.uas = append(w.uas, u)
	}
	for _, l := range w.loops {
		go l.run()
	}
	w.statsDone = make(chan struct{})
	go w.reportStats()
	return nil
}

// fdRoom raises the soft open-files limit to the hard one and checks that
// n files fit.
func fdRoom(n int) error {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("loadtest: getrlimit: %w", err)
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		unix.Setrlimit(unix.RLIMIT_NOFILE, &l)
	}
	if l.Cur < uint64(n) {
		return fmt.Errorf("loadtest: a worker needs %d open files, its limit is %d: use more workers (-per-worker)", n, l.Cur)
	}
	return nil
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
// sender. Called on the user agent's loop.
func (w *worker) publish(u *ua) {
	if u.keys == nil {
		return
	}
	w.subs[u.idx].Store(&subscription{ua: u.idx, endpoints: u.eps, keys: u.keys})
}

// subscriptions lists the registered user agents, in index order.
func (w *worker) subscriptions() []*subscription {
	var out []*subscription
	for i := range w.subs {
		if s := w.subs[i].Load(); s != nil {
			out = append(out, s)
		}
	}
	return out
}

// connectAll connects the worker's offline user agents (the first Upto),
// starting Rate handshakes per second and at most MaxPending at a time;
// failed ones are retried ConnectRetries times, a second later.
func (w *worker) connectAll(a connectArgs) connectResult {
	start := time.Now()
	n := len(w.uas)
	if a.Upto > 0 {
		n = min(n, a.Upto)
	}
	todo := w.notReady(n)
	w.handshake.startStage(0, math.MaxInt64)
	tick := time.Duration(float64(time.Second) / a.Rate)
	next := time.Now()
	tries := map[*ua]int{}
	type retry struct {
		u  *ua
		at time.Time
	}
	var retries []retry
	var res connectResult
	inFlight := 0
	for len(todo) > 0 || len(retries) > 0 || inFlight > 0 {
		now := time.Now()
		for len(retries) > 0 && !now.Before(retries[0].at) {
			todo = append(todo, retries[0].u)
			retries = retries[1:]
		}
		for len(todo) > 0 && inFlight < w.setup.MaxPending && !now.Before(next) {
			u := todo[0]
			todo = todo[1:]
			inFlight++
			tries[u]++
			res.Attempts++
			u.l.post(u.connectFor)
			next = next.Add(tick)
		}
		if inFlight >= w.setup.MaxPending && next.Before(now) {
			next = now // held back by the cap: no burst to catch up
		}
		var wake <-chan time.Time
		switch {
		case len(todo) > 0 && inFlight < w.setup.MaxPending:
			wake = time.After(time.Until(next))
		case len(retries) > 0:
			wake = time.After(time.Until(retries[0].at))
		}
		select {
		case o := <-w.results:
			inFlight--
			if !o.ok {
				res.Failures++
				if tries[o.u] <= w.setup.ConnectRetries {
					retries = append(retries, retry{o.u, time.Now().Add(time.Second)})
				}
			}
		case <-wake:
		case <-w.quit:
			return res
		}
	}
	res.Connected = int(w.connected.Load())
	res.Seconds = time.Since(start).Seconds()
	res.Handshake = w.handshake.takeStage()
	return res
}

// notReady lists the first n user agents that are not ready.
func (w *worker) notReady(n int) []*ua {
	var out []*ua
	var mu sync.Mutex
	for _, l := range w.loops {
		l.call(func() {
			for _, u := range l.uas {
				if int(u.idx) < n && u.state != stReady {
					mu.Lock()
					out = append(out, u)
					mu.Unlock()
				}
			}
		})
	}
	return out
}

// disconnectAll closes every connection with a close handshake (waiting
// up to the close timeout) and abandons handshakes in progress.
func (w *worker) disconnectAll() {
	for _, l := range w.loops {
		l.call(func() {
			for _, u := range l.uas {
				u.reconnect = false
				switch {
				case u.state == stReady:
					u.disconnect()
				case u.state.handshaking():
					u.pacer = false
					u.release()
				}
			}
		})
	}
	deadline := time.Now().Add(2 * closeTimeout)
	for (w.connected.Load() > 0 || w.closing.Load() > 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// churn starts or stops the user agents' connect/disconnect cycle.
func (w *worker) churn(a churnArgs) {
	for _, l := range w.loops {
		l.call(func() {
			if !a.On {
				l.churn = nil
				for _, u := range l.uas {
					if u.state == stReady {
						u.leaveAt = 0
						u.armReadyTimer()
					}
				}
				return
			}
			c := a
			l.churn = &c
			for _, u := range l.uas {
				switch u.state {
				case stReady:
					u.leaveAt = l.now + l.exp(int64(c.SessionMean))
					u.armReadyTimer()
				case stOffline:
					l.setTimer(u, l.now+l.exp(int64(c.OfflineMean)))
				}
			}
		})
	}
}

// drain waits until every accepted push was acked (or the timeout), then
// listens Quiet longer for duplicates.
func (w *worker) drain(a drainArgs) drainResult {
	deadline := time.Now().Add(a.Timeout)
	for w.ledger.unacked() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(a.Quiet)
	w.logMissing("STALLED", true)
	return drainResult{Unacked: w.ledger.unacked(), LastRecv: w.lastRecv.Load(), Hist: w.lat.takeStage()}
}

// problems are the arrivals the user agents counted as wrong or repeated.
type problems struct {
	dupAfterAck, redelivUnacked, redelivUnverified, badContent, misrouted, unknown int64
}

func (w *worker) problemCounts() problems {
	return problems{w.dupAfterAck.Load(), w.redelivUnacked.Load(), w.redelivUnverified.Load(),
		w.badContent.Load(), w.misrouted.Load(), w.unknown.Load()}
}

func (p *problems) sub(q problems) {
	p.dupAfterAck -= q.dupAfterAck
	p.redelivUnacked -= q.redelivUnacked
	p.redelivUnverified -= q.redelivUnverified
	p.badContent -= q.badContent
	p.misrouted -= q.misrouted
	p.unknown -= q.unknown
}

func (a *Accounting) addProblems(p problems) {
	a.DuplicatedAfterAck += p.dupAfterAck
	a.RedeliveredUnacked += p.redelivUnacked
	a.RedeliveredAckUnverified += p.redelivUnverified
	a.BadContent += p.badContent
	a.Misrouted += p.misrouted
	a.Unknown += p.unknown
}

// reportStats emits the worker's counters every SampleEvery.
func (w *worker) reportStats() {
	defer close(w.statsDone)
	t := time.NewTicker(w.setup.SampleEvery)
	defer t.Stop()
	w.emit(event{Type: "stats", Stats: w.stats()})
	for {
		select {
		case <-t.C:
		case <-w.quit:
			return
		}
		w.emit(event{Type: "stats", Stats: w.stats()})
	}
}

func (w *worker) stats() *workerStats {
	s := &workerStats{
		Connected: int(w.connected.Load()), Connecting: int(w.connecting.Load()),
		Connects: w.connects.Load(), ConnectFail: w.connectFail.Load(), Dropped: w.dropped.Load(), Closes: w.closes.Load(),
		Received: w.received.Load(), Acked: w.acked.Load(),
		DupAfterAck: w.dupAfterAck.Load(), RedelivUnac: w.redelivUnacked.Load(), RedelivUnv: w.redelivUnverified.Load(),
		BadContent: w.badContent.Load(), Misrouted: w.misrouted.Load(), Unknown: w.unknown.Load(),
		Lat: w.lat.takeInterval(), Resp: w.resp.takeInterval(), Handshake: w.handshake.takeInterval(),
		Lag: w.lag.takeInterval(),
	}
	if w.sender != nil {
		s.Sent = int64(w.ledger.len())
		s.PostErrors = w.sender.errorTotal()
		s.Accepted = w.sender.accepted.Load()
	}
	s.RSS, _ = procRSS(os.Getpid())
	w.reasonsMu.Lock()
	s.Reasons = make(map[string]int64, len(w.reasons))
	for k, v := range w.reasons {
		s.Reasons[k] = v
	}
	w.reasonsMu.Unlock()
	return s
}

// close stops the loops (sockets closed without a handshake) and the
// stats; idempotent.
func (w *worker) close() {
	if w.closed {
		return
	}
	w.closed = true
	close(w.quit)
	for _, l := range w.loops {
		l.shutdown()
	}
	if w.statsDone != nil {
		<-w.statsDone
	}
}
