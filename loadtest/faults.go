package loadtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/loadtest/appserver"
	"github.com/autopush-go/autopush/loadtest/ledger"
	"github.com/autopush-go/autopush/loadtest/monitor"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/loadtest/worker"
)

// faults runs one phase per fault of cfg.FaultList against the replicated
// cluster: pushes flow while the fault happens and is undone, then
// everyone reconnects and drains, and the phase's pushes are accounted
// for (the ledgers' totals less the previous phase's).
func (r *run) faults(ctx context.Context) error {
	cfg := &r.cfg
	if err := r.connectEveryone(ctx); err != nil {
		return err
	}
	f := &report.FaultsReport{UAs: cfg.UAs, Offered: cfg.PushRate, CQLNodes: cfg.CQLNodes, Engines: len(r.cl.Engines),
		Endpoints: len(r.cl.Endpoints)}
	r.rep.Faults = f
	var before ledger.Accounting
	for _, name := range cfg.FaultList {
		p, total, err := r.faultPhase(ctx, name, before)
		if err != nil {
			return fmt.Errorf("loadtest: fault %s: %w", name, err)
		}
		before = total
		f.Phases = append(f.Phases, *p)
		r.mon.Logf("%s (%s): %s accepted, %d lost, %d duplicated after ack; down %.1f s, recovered %.1f s later; refusals %s",
			p.Fault, p.Target, report.Num(p.Account.Accepted), p.Account.Lost, p.Account.DuplicatedAfterAck,
			p.DownSeconds, p.RecoverySeconds, report.CountsOrNone(p.Errors))
	}
	return nil
}

// faultPhase runs one fault; it returns the phase and the ledgers' totals
// after it.
func (r *run) faultPhase(ctx context.Context, name string, before ledger.Accounting) (*report.FaultPhase, ledger.Accounting, error) {
	cfg := &r.cfg
	p := &report.FaultPhase{Fault: name}
	if _, err := r.pool.all(ctx, churnCmd(true, cfg)); err != nil {
		return nil, before, monitor.StepError("churn", err)
	}
	c0 := r.pool.counters()
	r.mon.SetPhase(name, 0, nil)
	// Pushes flow in short sends until FaultAfter past the fault's end,
	// however long the fault takes.
	type sent struct {
		evs []worker.Event
		err error
	}
	done := make(chan sent, 1)
	var back atomic.Int64 // ns since the run's start when the fault ended; 0 before
	go func() {
		var all []worker.Event
		for {
			evs, err := r.pool.all(ctx, func(wp *workerProc) worker.Command {
				return worker.Command{Op: worker.OpSend, Send: &worker.Send{Rate: cfg.PushRate / float64(len(r.pool.ws)),
					Duration: sendChunk, Pick: appserver.PickRandom, Keep: true}}
			})
			all = append(all, evs...)
			b := back.Load()
			if err != nil || b > 0 && r.mon.Now()-float64(b)/1e9 >= cfg.FaultAfter.Seconds() {
				done <- sent{all, err}
				return
			}
		}
	}()
	if err := monitor.Sleep(ctx, cfg.FaultLead); err != nil {
		return nil, before, err
	}
	start := r.mon.Now()
	target, err := r.inject(ctx, name)
	if err != nil {
		return nil, before, err
	}
	end0 := r.mon.Now()
	back.Store(int64(end0 * 1e9))
	p.Target, p.DownSeconds = target, end0-start
	r.mon.Logf("%s: %s back after %.1f s", name, target, p.DownSeconds)
	s := <-done
	if s.err != nil {
		return nil, before, monitor.StepError("send", s.err)
	}
	end := r.mon.Now()
	st, err := mergeStage(cfg.PushRate, s.evs)
	if err != nil {
		return nil, before, err
	}
	p.Scheduled, p.Errors = st.Scheduled, st.Errors
	c1 := r.pool.counters()
	p.Dropped, p.ConnectFail = c1.Dropped-c0.Dropped, c1.ConnectFail-c0.ConnectFail
	p.RecoverySeconds = recovery(r.mon.Series(), end0, end, cfg.UAs)
	p.Exited = r.exitedOnTheirOwn()

	if _, err := r.pool.all(ctx, churnCmd(false, cfg)); err != nil {
		return nil, before, monitor.StepError("churn", err)
	}
	stalled, err := r.drainEveryone(ctx)
	if err != nil {
		return nil, before, err
	}
	p.Stalled = stalled
	var total ledger.Accounting
	aevs, err := r.pool.all(ctx, func(*workerProc) worker.Command { return worker.Command{Op: worker.OpAccount} })
	if err != nil {
		return nil, before, monitor.StepError("account", err)
	}
	for _, ev := range aevs {
		total.Add(*ev.Account)
	}
	p.Account = total.Minus(before)
	return p, total, nil
}

// sendChunk is the length of one send of a fault's phase.
const sendChunk = 5 * time.Second

// drainEveryone reconnects every user agent, waits until what was
// accepted has arrived, and leaves everyone connected for the next phase;
// it returns the pushes still unacked when the drain ended.
func (r *run) drainEveryone(ctx context.Context) (int, error) {
	cfg := &r.cfg
	if _, err := r.connectAll(ctx, "reconnect"); err != nil {
		return 0, monitor.StepError("reconnect", err)
	}
	r.mon.SetPhase("drain", 0, nil)
	devs, err := r.pool.all(ctx, func(*workerProc) worker.Command {
		return worker.Command{Op: worker.OpDrain, Drain: &worker.Drain{Timeout: cfg.DrainTimeout, Quiet: cfg.Quiet}}
	})
	if err != nil {
		return 0, monitor.StepError("drain", err)
	}
	stalled := 0
	for _, ev := range devs {
		stalled += ev.Drain.Unacked
	}
	if cfg.VerifyReconnect {
		// A clean close makes every ack certain; anything that arrives
		// after the reconnect was delivered after its ack.
		if err := r.disconnectAll(ctx, "close"); err != nil {
			return 0, monitor.StepError("disconnect", err)
		}
		if _, err := r.connectAll(ctx, "verify"); err != nil {
			return 0, monitor.StepError("verify reconnect", err)
		}
		if err := monitor.Sleep(ctx, max(cfg.Quiet, time.Second)); err != nil {
			return 0, err
		}
	}
	return stalled, nil
}

// inject causes the fault and undoes it; it returns what it hit.
func (r *run) inject(ctx context.Context, name string) (string, error) {
	cfg, cl := &r.cfg, r.cl
	switch name {
	case scenario.FaultReplica:
		i := cl.CQL.Nodes() - 1
		if err := cl.CQL.Kill(ctx, i); err != nil {
			return "", err
		}
		if err := monitor.Sleep(ctx, cfg.DownTime); err != nil {
			return "", err
		}
		return fmt.Sprintf("Cassandra node %d (SIGKILL)", i+1), cl.CQL.Restart(ctx, i)
	case scenario.FaultEngineKill:
		cl.Engine(0).Kill()
		if err := monitor.Sleep(ctx, cfg.DownTime); err != nil {
			return "", err
		}
		return "autoconnect-0 (SIGKILL)", cl.RestartEngine(ctx, 0)
	case scenario.FaultEndpointKill:
		cl.EndpointProc(0).Kill()
		if err := monitor.Sleep(ctx, cfg.DownTime); err != nil {
			return "", err
		}
		return "autoendpoint-0 (SIGKILL)", cl.RestartEndpoint(ctx, 0)
	case scenario.FaultRoll:
		for i := range cl.Engines {
			// The engine drains on SIGTERM: it tells its clients to go,
			// lets them finish, and exits 0.
			e := cl.Engine(i)
			if err := e.Stop(time.Minute); err != nil {
				return "", err
			}
			if code := e.ExitCode(); code != 0 {
				return "", fmt.Errorf("autoconnect-%d exited %d on SIGTERM", i, code)
			}
			if err := cl.RestartEngine(ctx, i); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("every engine in turn (SIGTERM), %d", len(cl.Engines)), nil
	case scenario.FaultOutage:
		// Stopped, not killed: with its commit log synced periodically
		// (tools/cql/cassandra.yaml, Cassandra's default mode), a node
		// killed outright may lose its last writes, and every replica
		// killed at once would lose them from the cluster: the store's
		// loss, not the tiers'. One replica killed is the replica fault.
		n := cl.CQL.Nodes()
		if err := allNodes(n, func(i int) error { return cl.CQL.Stop(ctx, i) }); err != nil {
			return "", err
		}
		if err := monitor.Sleep(ctx, cfg.Outage); err != nil {
			return "", err
		}
		return fmt.Sprintf("all %d Cassandra nodes (SIGTERM) for %s", n, cfg.Outage),
			allNodes(n, func(i int) error { return cl.CQL.Restart(ctx, i) })
	}
	return "", fmt.Errorf("unknown fault %q", name)
}

// exitedOnTheirOwn names the server processes that are not running (the
// faults restart what they stop before they return).
func (r *run) exitedOnTheirOwn() []string {
	var out []string
	check := func(name string, p *proc.Proc) {
		select {
		case <-p.Exited():
			out = append(out, fmt.Sprintf("%s (pid %d, exit %d)", name, p.PID(), p.ExitCode()))
		default:
		}
	}
	for i := range r.cl.Engines {
		check(fmt.Sprintf("autoconnect-%d", i), r.cl.Engine(i))
	}
	for i := range r.cl.Endpoints {
		check(fmt.Sprintf("autoendpoint-%d", i), r.cl.EndpointProc(i))
	}
	return out
}

// recovery is how long after back (seconds since the run's start) the
// service was whole again, from the samples: from the first sample on
// which no push was refused since and every user agent was connected,
// to the end of the phase. -1 when that never held.
func recovery(series []report.Sample, back, end float64, uas int) float64 {
	var in []report.Sample
	for _, s := range series {
		if s.T >= back && s.T <= end {
			in = append(in, s)
		}
	}
	if len(in) == 0 {
		return -1
	}
	last := in[len(in)-1]
	for i, s := range in {
		if s.Connected >= uas && s.PostErrors == last.PostErrors {
			// Whole from this sample on: connections can drop again, so
			// check every later one.
			ok := true
			for _, t := range in[i:] {
				if t.Connected < uas {
					ok = false
					break
				}
			}
			if ok {
				// The interval before s is when it happened.
				prev := back
				if i > 0 {
					prev = in[i-1].T
				}
				return max(0, prev-back)
			}
		}
	}
	return -1
}

// allNodes runs f for each of n nodes at once, and returns the first
// error.
func allNodes(n int, f func(i int) error) error {
	var g errgroup.Group
	for i := range n {
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}
