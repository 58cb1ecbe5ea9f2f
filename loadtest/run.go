package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/loadtest/agent"
	"github.com/autopush-go/autopush/loadtest/cluster"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/monitor"
	"github.com/autopush-go/autopush/loadtest/outbound"
	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/receipts"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/loadtest/worker"
)

// Run runs one scenario against processes it starts and stops itself, and
// returns the report, also written to cfg.Out. stdout gets the summary,
// stderr the progress and the run's own log lines. The error is about the
// run itself; a run that measured a failure (lost pushes, say) returns a
// report with Pass false and a nil error.
func Run(ctx context.Context, cfg scenario.Config, stdout, stderr io.Writer) (*report.Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Scenario != scenario.Sender {
		if err := checkKernel(&cfg, nil); err != nil {
			return nil, err
		}
	}
	r := &run{cfg: cfg, out: stdout, log: stderr, started: time.Now()}
	if len(cfg.CQLHosts) > 0 {
		r.storagePID = probe.StoragePID()
	}
	if cfg.Commit == "" {
		cfg.Commit = gitDescribe()
	}
	r.rep = &report.Report{Scenario: cfg.Scenario, Command: cfg.Command, Commit: cfg.Commit, Started: r.started, Config: cfg,
		Machine: probe.DescribeMachine()}
	if err := r.execute(ctx); err != nil {
		r.mon.StopProgress()
		return r.rep, err
	}
	r.rep.Seconds = time.Since(r.started).Seconds()
	r.rep.Machine.LoadAvgEnd = probe.LoadAvg()
	r.verdict()
	files, err := r.rep.Write(cfg.Out)
	r.rep.Files = files
	r.rep.PrintSummary(stdout)
	return r.rep, err
}

// run is one Run in progress.
type run struct {
	cfg        scenario.Config
	out        io.Writer
	log        io.Writer
	started    time.Time
	storagePID int // the CQL server's, when known
	rep        *report.Report
	cl         *cluster.Cluster
	pool       *pool
	mon        *monitor.Monitor
	signer     *pushcrypto.VAPIDSigner // the application servers' key (scenarios that send)
	receipts   *receipts.Client        // -receipts
}

func (r *run) execute(ctx context.Context) (err error) {
	logDir := filepath.Join(r.cfg.Out, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	r.mon = monitor.New(r.log, &r.cfg, r.started, r.storagePID)
	if r.cfg.Scenario == scenario.Sender {
		return outbound.Run(ctx, &r.cfg, r.rep, r.mon, logDir)
	}
	if r.cfg.Sends() {
		// Made before the cluster: with -receipts the service tracks its
		// public key.
		if r.signer, err = pushcrypto.NewVAPIDSigner("mailto:loadtest@example.com"); err != nil {
			return err
		}
		if r.cfg.Receipts {
			r.cfg.TrackingKey = r.signer.Public
		}
	}
	r.mon.Logf("starting %d engine(s) and %d worker(s); logs in %s", r.cfg.EngineCount(), r.cfg.WorkerCount(), logDir)
	if r.cl, err = cluster.Start(ctx, &r.cfg, logDir, r.mon.Log()); err != nil {
		return err
	}
	defer r.cl.Stop()
	if r.pool, err = startPool(ctx, r.cfg.WorkerCount(), r.cfg.UAs, logDir, r.cfg.Profile); err != nil {
		return err
	}
	defer r.pool.stop()
	r.rep.Cluster = r.cl.Info()
	r.rep.Cluster.Workers = len(r.pool.ws)
	subs, err := r.subscribeReceipts(ctx)
	if err != nil {
		return err
	}
	if err := r.setupWorkers(ctx, subs); err != nil {
		return err
	}
	stop := r.mon.Start(r.sample)
	defer func() {
		stop()
		r.rep.Series = r.mon.Series()
		r.mon.StopProgress()
	}()
	switch r.cfg.Scenario {
	case scenario.Hold:
		err = r.hold(ctx)
	case scenario.Notify:
		err = r.notify(ctx)
	case scenario.Stored, scenario.Churn:
		err = r.delivery(ctx)
	case scenario.Broadcast:
		err = r.broadcast(ctx)
	case scenario.Faults:
		err = r.faults(ctx)
	}
	if err != nil {
		return err
	}
	s := r.pool.counters()
	if len(s.Reasons) > 0 {
		r.rep.Reasons = s.Reasons
	}
	return nil
}

// subscribeReceipts makes one receipt subscription per worker (its
// sender's) with -receipts, and returns their URLs by worker.
func (r *run) subscribeReceipts(ctx context.Context) ([]string, error) {
	if !r.cfg.Receipts {
		return nil, nil
	}
	r.receipts = receipts.New(r.cl.EndpointURL, r.signer)
	subs := make([]string, len(r.pool.ws))
	for i := range subs {
		var err error
		if subs[i], err = r.receipts.Subscribe(ctx); err != nil {
			return nil, err
		}
	}
	return subs, nil
}

// setupWorkers gives each worker its share of the run: with receipts,
// subs[i] is worker i's receipt subscription.
func (r *run) setupWorkers(ctx context.Context, subs []string) error {
	var b [4]byte
	rand.Read(b[:])
	runID := binary.BigEndian.Uint32(b[:])
	a := worker.Setup{Run: runID, Engines: r.cl.WSAddrs, SourceIPs: r.cfg.SourceIPs, Channels: r.cfg.Channels,
		Loops: r.cfg.Loops, MaxPending: max(1, r.cfg.MaxPending/len(r.pool.ws)), ConnectTimeout: r.cfg.ConnectTimeout,
		ConnectRetries: r.cfg.ConnectRetries, PingInterval: r.cfg.PingInterval, SampleEvery: r.cfg.SampleEvery}
	if r.cfg.Sends() {
		a.Keys, a.VAPIDPrivate, a.VAPIDSubject = true, r.signer.Private(), r.signer.Subject
		a.VAPIDReuse, a.FreshKeys, a.PayloadSize, a.TTL = r.cfg.VAPIDReuse, r.cfg.FreshAppServerKeys, r.cfg.PayloadSize, r.cfg.TTL
		a.NetHTTP = r.cfg.NetHTTP
		a.AppServerConns, a.MaxInFlight, a.PushTimeout = r.cfg.AppServerConns, r.cfg.MaxInFlight, r.cfg.PushTimeout
		a.Trace = r.cfg.Trace
	}
	if r.cfg.Broadcasts > 0 {
		a.Broadcasts = cluster.BroadcastIDs(r.cfg.Broadcasts)
	}
	_, err := r.pool.all(ctx, func(wp *workerProc) worker.Command {
		s := a
		s.Index, s.First, s.UAs = wp.idx, wp.first, wp.uas
		if subs != nil {
			s.PushReceipt = subs[wp.idx]
		}
		return worker.Command{Op: worker.OpSetup, Setup: &s}
	})
	return err
}

// enginePIDs are the engines' process ids.
func (r *run) enginePIDs() []int {
	var pids []int
	for i := range r.cl.Engines {
		pids = append(pids, r.cl.Engine(i).PID())
	}
	return pids
}

// serverPIDs are the engines' and the endpoint's process ids.
func (r *run) serverPIDs() []int {
	pids := r.enginePIDs()
	if ep := r.cl.EndpointNow(); ep != nil {
		pids = append(pids, ep.PID())
	}
	return pids
}

// sample reads the workers' counters and the processes' memory.
func (r *run) sample() report.Sample {
	ws, h := r.pool.take()
	s := report.Sample{T: time.Since(r.started).Seconds(), Phase: r.mon.Phase(), Connected: ws.Connected, Connecting: ws.Connecting,
		Connects: ws.Connects, ConnectFail: ws.ConnectFail, Dropped: ws.Dropped, WorkerRSS: ws.RSS,
		Sent: ws.Sent, Accepted: ws.Accepted, PostErrors: ws.PostErrors, Received: ws.Received, Acked: ws.Acked}
	s.Engine = probe.SumEngines(r.engineSamples())
	var endpoint, workers []int
	engines := r.enginePIDs()
	if ep := r.cl.EndpointNow(); ep != nil {
		s.EndpointRSS, _ = probe.ProcRSS(ep.PID())
		endpoint = append(endpoint, ep.PID())
	}
	for _, wp := range r.pool.ws {
		workers = append(workers, wp.p.PID())
	}
	s.CPU = r.mon.ReadCPU(engines, endpoint, workers)
	for _, x := range [...]struct {
		dst **hist.Latency
		h   *intervalHists
		get func(*intervalHists) hist.Latency
	}{
		{&s.Latency, &h, func(h *intervalHists) hist.Latency { return hist.Summarize(h.lat) }},
		{&s.Response, &h, func(h *intervalHists) hist.Latency { return hist.Summarize(h.resp) }},
		{&s.Lag, &h, func(h *intervalHists) hist.Latency { return hist.Summarize(h.lag) }},
		{&s.Handshake, &h, func(h *intervalHists) hist.Latency { return hist.Summarize(h.handshake) }},
	} {
		if l := x.get(x.h); l.Count > 0 {
			*x.dst = &l
		}
	}
	return s
}

// engineSamples reads every engine once.
func (r *run) engineSamples() []probe.EngineSample {
	out := make([]probe.EngineSample, len(r.cl.Engines))
	var wg sync.WaitGroup
	for i := range r.cl.Engines {
		e := r.cl.Engine(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], _ = probe.SampleEngine(e.PID(), r.cl.MetricsURLs[i], r.cl.GCTraces[i])
		}()
	}
	wg.Wait()
	return out
}

// connectEveryone connects every user agent before a scenario's pushes,
// into the report's Connect section.
func (r *run) connectEveryone(ctx context.Context) error {
	c, err := r.connectAll(ctx, "connect")
	if err != nil {
		return monitor.StepError("connect", err)
	}
	r.rep.Connect = c
	r.mon.Logf("connected %s user agents in %.1fs", report.Num(c.Connected), c.Seconds)
	return nil
}

// connectAll connects every user agent and reports the ramp.
func (r *run) connectAll(ctx context.Context, name string) (*report.ConnectReport, error) {
	r.mon.SetPhase(name, int64(r.cfg.UAs), func(s report.Sample) int64 { return int64(s.Connected) })
	start, t0 := time.Now(), r.mon.Now()
	var evs []worker.Event
	err := r.withProfile(name, func() (err error) {
		evs, err = r.pool.all(ctx, func(wp *workerProc) worker.Command {
			return worker.Command{Op: worker.OpConnect, Connect: &agent.Connect{Rate: r.cfg.ConnectRate / float64(len(r.pool.ws))}}
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	c := &report.ConnectReport{Target: r.cfg.UAs, Offered: r.cfg.ConnectRate, Seconds: time.Since(start).Seconds()}
	h := hist.New()
	for _, ev := range evs {
		c.Connected += ev.Connect.Connected
		c.Attempts += ev.Connect.Attempts
		c.Failures += ev.Connect.Failures
		if err := hist.Merge(h, ev.Connect.Handshake); err != nil {
			return nil, err
		}
	}
	c.Handshake = hist.Summarize(h)
	c.CPU = r.mon.AvgCPU(t0, r.mon.Now())
	c.Achieved = float64(c.Attempts-c.Failures) / c.Seconds
	return c, nil
}

// disconnectAll closes every connection cleanly.
func (r *run) disconnectAll(ctx context.Context, name string) error {
	r.mon.SetPhase(name, 0, nil)
	_, err := r.pool.all(ctx, func(*workerProc) worker.Command { return worker.Command{Op: worker.OpDisconnect} })
	return err
}

// verdict decides Pass from what the scenario measured.
func (r *run) verdict() {
	var p []string
	if c := r.rep.Connect; c != nil && c.Connected < c.Target {
		p = append(p, fmt.Sprintf("only %d of %d user agents connected", c.Connected, c.Target))
	}
	if h := r.rep.Hold; h != nil {
		if h.DroppedDuringRun > 0 {
			p = append(p, fmt.Sprintf("%d connections dropped", h.DroppedDuringRun))
		}
		if h.Pings.Unanswered > 0 {
			p = append(p, fmt.Sprintf("%d user agent pings unanswered for a whole -ping-interval", h.Pings.Unanswered))
		}
		if b := r.cfg.Budget; b > 0 && r.cfg.UAs >= scenario.BudgetFrom && float64(h.RSSPerConn) > float64(b) {
			p = append(p, fmt.Sprintf("engine RSS %.0f B per connection is over the %d B budget", float64(h.RSSPerConn), b))
		}
		if h.GoroutinesGrew(r.rep.Cluster.Engines) {
			p = append(p, fmt.Sprintf("engine goroutines grew with connections: %d -> %d (at most %d more per engine)",
				h.GoroutinesStart, h.GoroutinesEnd, scenario.GoroutineSlack))
		}
	}
	if n := r.rep.Notify; n != nil {
		for _, s := range n.Stalled {
			if s.Closed != s.Stalls {
				p = append(p, fmt.Sprintf("at %.0f/s: only %d of %d stalled connections closed by the endpoint within %.0f s",
					s.Offered, s.Closed, s.Stalls, s.LimitS))
			}
			if !s.Account.Exact() {
				p = append(p, fmt.Sprintf("at %.0f/s with stalls: %d lost, %d duplicated after ack", s.Offered,
					s.Account.Lost, s.Account.DuplicatedAfterAck))
			}
			if q, ok := n.Quiet(s.Offered); ok && r.cfg.StallP99Factor > 0 && s.Latency.P99 > r.cfg.StallP99Factor*q.Latency.P99 {
				p = append(p, fmt.Sprintf("at %.0f/s: p99 %.1f ms with stalls, over %g × the %.1f ms without",
					s.Offered, s.Latency.P99, r.cfg.StallP99Factor, q.Latency.P99))
			}
		}
		for _, s := range n.Stages {
			if !s.Account.Exact() {
				p = append(p, fmt.Sprintf("at %.0f/s: %d lost, %d duplicated after ack, %d bad content", s.Offered,
					s.Account.Lost, s.Account.DuplicatedAfterAck, s.Account.BadContent+s.Account.Misrouted+s.Account.Unknown))
			}
		}
		if rc := n.Receipts; rc != nil {
			p = append(p, rc.Problems()...)
		}
	}
	if d := r.rep.Delivery; d != nil {
		a := d.Account
		if a.Accepted < d.Scheduled {
			p = append(p, fmt.Sprintf("only %d of %d pushes accepted (errors: %s): lower -push-rate to what the system sustains",
				a.Accepted, d.Scheduled, report.CountsOrNone(d.Errors)))
		}
		if d.Stalled > 0 {
			p = append(p, fmt.Sprintf("%d pushes stalled: not delivered to their user agent, connected for the whole %s drain (see STALLED in the worker logs)",
				d.Stalled, r.cfg.DrainTimeout))
		}
		if !a.Exact() || a.Unacked > 0 {
			p = append(p, fmt.Sprintf("%d lost, %d duplicated after ack, %d unacked, %d bad content", a.Lost, a.DuplicatedAfterAck,
				a.Unacked, a.BadContent+a.Misrouted+a.Unknown))
		}
		if d.Receipts != nil {
			p = append(p, d.Receipts.Problems()...)
		}
	}
	if b := r.rep.Broadcast; b != nil {
		p = append(p, b.Problems()...)
	}
	if f := r.rep.Faults; f != nil {
		for _, ph := range f.Phases {
			p = append(p, ph.Problems()...)
		}
	}
	if r.rep.Sender != nil {
		p = append(p, r.rep.SenderProblems(r.cfg.RateTolerance)...)
	}
	r.rep.Problems = p
	r.rep.Pass = len(p) == 0
}
