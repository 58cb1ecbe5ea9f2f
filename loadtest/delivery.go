package loadtest

import (
	"context"
	"sync"
	"time"

	"github.com/autopush-go/autopush/loadtest/agent"
	"github.com/autopush-go/autopush/loadtest/appserver"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/ledger"
	"github.com/autopush-go/autopush/loadtest/monitor"
	"github.com/autopush-go/autopush/loadtest/receipts"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/loadtest/worker"
)

// delivery runs stored and churn: pushes while the user agents are away
// (stored: all of them; churn: coming and going), then everyone reconnects
// and drains, and every push is accounted for.
func (r *run) delivery(ctx context.Context) error {
	cfg := &r.cfg
	err := r.connectEveryone(ctx)
	if err != nil {
		return err
	}
	d := &report.DeliveryReport{UAs: cfg.UAs, Offered: cfg.PushRate}
	r.rep.Delivery = d
	var stopFollow func()
	if r.receipts != nil {
		// The application server reads its receipts as they come, as one
		// would; what is left is drained once everything settled.
		stopFollow = sync.OnceFunc(r.receipts.Follow(ctx))
		defer stopFollow()
	}

	var evs []worker.Event
	var sendStart float64
	if cfg.Scenario == scenario.Stored {
		if err := r.disconnectAll(ctx, "offline"); err != nil {
			return monitor.StepError("disconnect", err)
		}
		r.mon.SetPhase("store", int64(cfg.Messages), func(s report.Sample) int64 { return s.Sent })
		sendStart = r.mon.Now()
		evs, err = r.pool.all(ctx, func(wp *workerProc) worker.Command {
			share := cfg.Messages*(wp.first+wp.uas)/cfg.UAs - cfg.Messages*wp.first/cfg.UAs
			return worker.Command{Op: worker.OpSend, Send: &worker.Send{Rate: cfg.PushRate * float64(wp.uas) / float64(cfg.UAs),
				Count: share, Pick: appserver.PickRoundRobin, Keep: true}}
		})
	} else {
		if _, err := r.pool.all(ctx, churnCmd(true, cfg)); err != nil {
			return monitor.StepError("churn", err)
		}
		before := r.pool.counters()
		count := int64(cfg.PushRate * cfg.Duration.Seconds())
		r.mon.SetPhase("churn", count, func(s report.Sample) int64 { return s.Sent })
		sendStart = r.mon.Now()
		start := time.Now()
		evs, err = r.pool.all(ctx, func(wp *workerProc) worker.Command {
			return worker.Command{Op: worker.OpSend, Send: &worker.Send{Rate: cfg.PushRate / float64(len(r.pool.ws)), Duration: cfg.Duration,
				Pick: appserver.PickRandom, Keep: true}}
		})
		after := r.pool.counters()
		d.ChurnConnects, d.ChurnCloses = after.Connects-before.Connects, after.Closes-before.Closes
		d.ChurnRate = float64(d.ChurnConnects) / time.Since(start).Seconds()
		if err == nil {
			_, err = r.pool.all(ctx, churnCmd(false, cfg))
		}
	}
	if err != nil {
		return monitor.StepError("send", err)
	}
	st, err := mergeStage(cfg.PushRate, evs)
	if err != nil {
		return err
	}
	d.Scheduled, d.SendSeconds, d.Achieved, d.Errors, d.Response = st.Scheduled, st.Seconds, st.Achieved, st.Errors, st.Response
	d.SendCPU = r.mon.AvgCPU(sendStart, r.mon.Now())
	r.mon.Logf("sent %s pushes in %.1fs: %s accepted, errors %s", report.Num(st.Scheduled), st.Seconds, report.Num(st.Account.Accepted), report.CountsOrNone(st.Errors))

	reconnect, drainStart := time.Now(), r.mon.Now()
	recv0 := r.pool.counters()
	if _, err := r.connectAll(ctx, "reconnect"); err != nil {
		return monitor.StepError("reconnect", err)
	}
	r.mon.SetPhase("drain", st.Account.Accepted, func(s report.Sample) int64 { return s.Acked })
	devs, err := r.pool.all(ctx, func(*workerProc) worker.Command {
		return worker.Command{Op: worker.OpDrain, Drain: &worker.Drain{Timeout: cfg.DrainTimeout, Quiet: cfg.Quiet}}
	})
	if err != nil {
		return monitor.StepError("drain", err)
	}
	lat := hist.New()
	var last int64
	for _, ev := range devs {
		d.Stalled += ev.Drain.Unacked
		last = max(last, ev.Drain.LastRecv)
		if err := hist.Merge(lat, ev.Drain.Hist); err != nil {
			return err
		}
	}
	d.Latency = hist.Summarize(lat)
	recv1 := r.pool.counters()
	if last > reconnect.UnixNano() {
		d.DrainSeconds = float64(last-reconnect.UnixNano()) / 1e9
		d.DrainRate = float64(recv1.Received-recv0.Received) / d.DrainSeconds
	}
	d.DrainCPU = r.mon.AvgCPU(drainStart, drainStart+d.DrainSeconds)
	r.mon.Logf("drained: %d accepted pushes still unacked; last first arrival %.1fs after the reconnect", d.Stalled, d.DrainSeconds)
	if err := r.disconnectAll(ctx, "close"); err != nil {
		return monitor.StepError("disconnect", err)
	}
	if cfg.VerifyReconnect {
		if _, err := r.connectAll(ctx, "verify"); err != nil {
			return monitor.StepError("verify reconnect", err)
		}
		if err := monitor.Sleep(ctx, max(cfg.Quiet, time.Second)); err != nil {
			return err
		}
		if err := r.disconnectAll(ctx, "close"); err != nil {
			return monitor.StepError("disconnect", err)
		}
	}
	aevs, err := r.pool.all(ctx, func(*workerProc) worker.Command { return worker.Command{Op: worker.OpAccount} })
	if err != nil {
		return monitor.StepError("account", err)
	}
	for _, ev := range aevs {
		d.Account.Add(*ev.Account)
	}
	if r.receipts != nil {
		return r.accountReceipts(ctx, d, stopFollow)
	}
	return nil
}

// accountReceipts waits until every tracked push the ledgers saw accepted
// is settled (the milestones: terminal = received), at most
// -drain-timeout, then reads every receipt left and compares them with
// the ledgers. stopFollow stops the readers that ran meanwhile: a page
// one of them is reading must be recorded before the drain's last empty
// page means everything was read.
func (r *run) accountReceipts(ctx context.Context, d *report.DeliveryReport, stopFollow func()) error {
	r.mon.SetPhase("settle", 0, nil)
	m, err := receipts.AwaitSettled(ctx, r.cl.MilestonesURL(), d.Account.Accepted, time.Now().Add(r.cfg.DrainTimeout))
	if err != nil {
		return monitor.StepError("milestones", err)
	}
	r.mon.Logf("milestones: received %d, terminal %d, pending %d", receipts.Received(&m), m.Terminal, m.Pending)
	r.mon.SetPhase("receipts", 0, nil)
	stopFollow()
	if err := r.receipts.Drain(ctx); err != nil {
		return monitor.StepError("receipts", err)
	}
	fevs, err := r.pool.all(ctx, func(*workerProc) worker.Command { return worker.Command{Op: worker.OpFates} })
	if err != nil {
		return monitor.StepError("fates", err)
	}
	fates := make([]ledger.Fates, len(fevs))
	for i, ev := range fevs {
		fates[i] = *ev.Fates
	}
	a := receipts.Compare(fates, r.receipts.Receipts())
	a.Subscriptions, a.ReadErrors, a.Milestones = r.receipts.Subscriptions(), r.receipts.Errors(), &m
	d.Receipts = &a
	r.mon.Logf("receipts: %d read for %d tracked pushes: %d delivered, not delivered %s, %d pending",
		a.Read, a.Tracked, a.Delivered, a.Outcomes(), a.Pending)
	return nil
}

func churnCmd(on bool, cfg *scenario.Config) func(*workerProc) worker.Command {
	return func(*workerProc) worker.Command {
		return worker.Command{Op: worker.OpChurn, Churn: &agent.Churn{On: on, SessionMean: cfg.SessionMean, OfflineMean: cfg.OfflineMean}}
	}
}
