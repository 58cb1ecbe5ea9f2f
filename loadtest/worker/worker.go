package worker

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/autopush-go/autopush/loadtest/agent"
	"github.com/autopush-go/autopush/loadtest/appserver"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/ledger"
	"github.com/autopush-go/autopush/loadtest/probe"
)

// IsWorker reports whether this process was started as a worker (Env set);
// its main should then call Run and exit.
func IsWorker() bool { return os.Getenv(Env) != "" }

// Run runs a worker process: commands from in, events to out, its log to
// logw. It returns when told to stop or when in is closed.
func Run(in io.Reader, out, logw io.Writer) error {
	if path := os.Getenv(ProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("loadtest: worker: profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("loadtest: worker: profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	w := &worker{
		clock:     hist.NewClock(),
		enc:       json.NewEncoder(out),
		logw:      logw,
		lat:       hist.NewRecorder(),
		resp:      hist.NewRecorder(),
		lag:       hist.NewRecorder(),
		handshake: hist.NewRecorder(),
		quit:      make(chan struct{}),
	}
	defer w.close()
	dec := json.NewDecoder(bufio.NewReader(in))
	for {
		var c Command
		if err := dec.Decode(&c); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("loadtest: worker: read command: %w", err)
		}
		ev, err := w.do(c)
		if err != nil {
			w.emit(Event{Type: "fatal", ID: c.ID, Err: err.Error()})
			return err
		}
		ev.Type, ev.ID = "done", c.ID
		w.emit(ev)
		if c.Op == OpStop {
			return nil
		}
	}
}

// worker is one worker process: its user agents on their loops, its
// application server, its ledger and its latency recorders.
type worker struct {
	setup  Setup
	clock  hist.Clock
	enc    *json.Encoder
	encMu  sync.Mutex
	logw   io.Writer
	logMu  sync.Mutex
	agents *agent.Set
	app    *appserver.Server
	ledger ledger.Ledger
	quit   chan struct{}
	closed bool

	lat, resp, lag, handshake *hist.Recorder
	statsDone                 chan struct{}
}

func (w *worker) emit(ev Event) {
	w.encMu.Lock()
	defer w.encMu.Unlock()
	w.enc.Encode(ev)
}

func (w *worker) logf(format string, args ...any) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	fmt.Fprintf(w.logw, "worker %d: %s\n", w.setup.Index, fmt.Sprintf(format, args...))
}

// tracef logs when tracing (Setup.Trace), with the wall time.
func (w *worker) tracef(format string, args ...any) {
	if w.setup.Trace {
		w.logf("%s %s", time.Now().Format("15:04:05.000000"), fmt.Sprintf(format, args...))
	}
}

// fatal reports an error the worker cannot continue after and exits.
func (w *worker) fatal(err error) {
	w.emit(Event{Type: "fatal", Err: err.Error()})
	os.Exit(1)
}

func (w *worker) do(c Command) (Event, error) {
	switch c.Op {
	case OpSetup:
		if c.Setup == nil {
			return Event{}, errors.New("loadtest: setup without arguments")
		}
		return Event{}, w.start(*c.Setup)
	case OpConnect:
		r := w.agents.ConnectAll(*c.Connect)
		return Event{Connect: &r}, nil
	case OpDisconnect:
		w.agents.DisconnectAll()
		return Event{}, nil
	case OpSend:
		if w.app == nil {
			return Event{}, errors.New("loadtest: send without subscription keys")
		}
		r := w.send(*c.Send)
		return Event{Send: &r}, nil
	case OpChurn:
		w.agents.Churn(*c.Churn)
		return Event{}, nil
	case OpDrain:
		r := w.drain(*c.Drain)
		return Event{Drain: &r}, nil
	case OpAccount:
		w.agents.LogMissing("LOST", false)
		a := w.ledger.Account(0, w.ledger.Len())
		a.AddProblems(w.agents.Problems())
		return Event{Account: &a}, nil
	case OpFates:
		f := w.ledger.Fates()
		return Event{Fates: &f}, nil
	case OpBroadcasts:
		r := w.agents.TakeBroadcasts(c.Current)
		return Event{Broadcasts: &r}, nil
	case OpStop:
		w.close()
		return Event{}, nil
	}
	return Event{}, fmt.Errorf("loadtest: unknown command %q", c.Op)
}

// start builds the worker's application server and user agents and
// starts its loops.
func (w *worker) start(a Setup) error {
	w.setup = a
	if err := fdRoom(a.UAs + a.AppServerConns + 128); err != nil {
		return err
	}
	var vapidPublic string
	if a.Keys {
		s, err := appserver.New(appserver.Settings{Run: a.Run, Worker: a.Index, SourceIPs: a.SourceIPs, VAPIDPrivate: a.VAPIDPrivate,
			VAPIDSubject: a.VAPIDSubject, VAPIDReuse: a.VAPIDReuse, FreshKeys: a.FreshKeys, NetHTTP: a.NetHTTP, PayloadSize: a.PayloadSize, TTL: a.TTL, Conns: a.AppServerConns,
			MaxInFlight: a.MaxInFlight, Timeout: a.PushTimeout, PushReceipt: a.PushReceipt},
			appserver.Env{Clock: w.clock, Ledger: &w.ledger, Response: w.resp, Lag: w.lag, Tracef: w.tracef})
		if err != nil {
			return err
		}
		w.app, vapidPublic = s, s.VAPIDPublic()
	}
	agents, err := agent.New(agent.Settings{Run: a.Run, Worker: a.Index, First: a.First, UAs: a.UAs, Engines: a.Engines,
		SourceIPs: a.SourceIPs, Channels: a.Channels, Loops: a.Loops, MaxPending: a.MaxPending, ConnectTimeout: a.ConnectTimeout,
		ConnectRetries: a.ConnectRetries, PingInterval: a.PingInterval, Keys: a.Keys, VAPIDPublic: vapidPublic,
		PayloadSize: a.PayloadSize, Trace: a.Trace, Broadcasts: a.Broadcasts},
		agent.Env{Clock: w.clock, Ledger: &w.ledger, Latency: w.lat, Handshake: w.handshake, Logf: w.logf, Fatal: w.fatal})
	if err != nil {
		return err
	}
	w.agents = agents
	agents.Start()
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

// send runs one push phase and waits for its answers (and, with a grace,
// for its accepted pushes to arrive), then accounts for it.
func (w *worker) send(a Send) SendResult {
	subs := w.agents.Subscriptions()
	if len(subs) == 0 {
		return SendResult{Errors: map[string]int64{"appserver: no registered user agent": 1}}
	}
	count := a.Count
	if count == 0 {
		count = int(a.Rate * a.Duration.Seconds())
	}
	lo := w.ledger.Len()
	before := w.agents.Problems()
	errsBefore := w.app.Errors()
	sched := appserver.Schedule{Start: w.clock.Now() + int64(time.Millisecond), Period: 1e9 / a.Rate, Count: count, Pick: a.Pick}
	end := sched.End()
	from := sched.Start + int64(a.Warmup)
	w.lat.StartStage(from, end+1)
	w.resp.StartStage(from, end)
	w.lag.StartStage(from, end)
	w.app.Run(sched, subs)
	hi := w.ledger.Len()
	res := SendResult{Scheduled: int64(count), Seconds: float64(w.clock.Now()-sched.Start) / 1e9}
	if a.Grace > 0 {
		deadline := time.Now().Add(a.Grace)
		for w.ledger.Outstanding(lo, hi) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !a.Keep {
		res.Hist = w.lat.TakeStage()
	}
	res.Resp = w.resp.TakeStage()
	w.lag.TakeStage()
	res.Account = w.ledger.Account(lo, hi)
	after := w.agents.Problems()
	after.Sub(before)
	res.Account.AddProblems(after)
	res.Errors = diffCounts(w.app.Errors(), errsBefore)
	return res
}

func diffCounts(now, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range now {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// drain waits until every accepted push was acked (or the timeout), then
// listens Quiet longer for duplicates.
func (w *worker) drain(a Drain) DrainResult {
	deadline := time.Now().Add(a.Timeout)
	for w.ledger.Unacked() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(a.Quiet)
	w.agents.LogMissing("STALLED", true)
	return DrainResult{Unacked: w.ledger.Unacked(), LastRecv: w.agents.Counters().LastRecv, Hist: w.lat.TakeStage()}
}

// reportStats emits the worker's counters every SampleEvery.
func (w *worker) reportStats() {
	defer close(w.statsDone)
	t := time.NewTicker(w.setup.SampleEvery)
	defer t.Stop()
	w.emit(Event{Type: "stats", Stats: w.stats()})
	for {
		select {
		case <-t.C:
		case <-w.quit:
			return
		}
		w.emit(Event{Type: "stats", Stats: w.stats()})
	}
}

func (w *worker) stats() *Stats {
	c := w.agents.Counters()
	p := c.Problems
	s := &Stats{
		Connected: c.Connected, Connecting: c.Connecting,
		Connects: c.Connects, ConnectFail: c.ConnectFail, Dropped: c.Dropped, Closes: c.Closes,
		Received: c.Received, Acked: c.Acked,
		DupAfterAck: p.DupAfterAck, RedelivUnac: p.RedelivUnacked, RedelivUnv: p.RedelivUnverified,
		BadContent: p.BadContent, Misrouted: p.Misrouted, Unknown: p.Unknown,
		Lat: w.lat.TakeInterval(), Resp: w.resp.TakeInterval(), Handshake: w.handshake.TakeInterval(),
		Lag: w.lag.TakeInterval(), Reasons: c.Reasons, Pings: c.Pings,
	}
	if w.app != nil {
		s.Sent = int64(w.ledger.Len())
		s.PostErrors = w.app.ErrorTotal()
		s.Accepted = w.app.Accepted()
	}
	s.RSS, _ = probe.ProcRSS(os.Getpid())
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
	if w.agents != nil {
		w.agents.Close()
	}
	if w.statsDone != nil {
		<-w.statsDone
	}
}
