package loadtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/autopush-go/autopush/loadtest/appserver"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/monitor"
	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/receipts"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/worker"
)

// notify connects every user agent, then offers each rate of the ladder
// for StageTime; after the first rate whose p99 passes P99Limit (and
// MinStages) it stops. With -receipts every push is tracked and the
// application server reads and acks its receipts as they come, so each
// stage's CPU per push is that of a tracked push, receipts read included.
func (r *run) notify(ctx context.Context) error {
	cfg := &r.cfg
	if err := r.connectEveryone(ctx); err != nil {
		return err
	}
	n := &report.NotifyReport{UAs: cfg.UAs, P99Limit: ms(cfg.P99Limit)}
	r.rep.Notify = n
	stopFollow := func() {}
	if r.receipts != nil {
		stopFollow = sync.OnceFunc(r.receipts.Follow(ctx))
		defer stopFollow()
	}
	for i, rate := range cfg.Rates {
		name := fmt.Sprintf("%s/s", report.Num(rate))
		st, err := r.pushStage(ctx, name, rate, cfg.StageTime, r.profileDuring(name, cfg.Warmup, cfg.StageTime-cfg.Warmup))
		if err != nil {
			return err
		}
		n.Stages = append(n.Stages, st)
		if cfg.Stalls > 0 {
			if err := r.stallStage(ctx, n, rate); err != nil {
				return err
			}
		}
		if cfg.P99Limit > 0 && st.Latency.P99 > ms(cfg.P99Limit) {
			if n.CrossedAt == 0 {
				n.CrossedAt = rate
			}
			if i+1 >= cfg.MinStages {
				break
			}
		}
	}
	if err := r.disconnectAll(ctx, "close"); err != nil {
		return monitor.StepError("disconnect", err)
	}
	if r.receipts != nil {
		return r.countReceipts(ctx, n, stopFollow)
	}
	return nil
}

// countReceipts waits until every push the stages accepted is settled
// (at most -drain-timeout), reads the receipts left and counts them in
// n: one each is what a correct service gives.
func (r *run) countReceipts(ctx context.Context, n *report.NotifyReport, stopFollow func()) error {
	var accepted int64
	for _, st := range n.Stages {
		accepted += st.Account.Accepted
	}
	m, err := receipts.AwaitSettled(ctx, r.cl.MilestonesURL(), accepted, time.Now().Add(r.cfg.DrainTimeout))
	if err != nil {
		return monitor.StepError("milestones", err)
	}
	stopFollow()
	if err := r.receipts.Drain(ctx); err != nil {
		return monitor.StepError("receipts", err)
	}
	n.Receipts = &report.NotifyReceipts{Accepted: accepted, Tracked: receipts.Received(&m), Settled: m.Terminal,
		Read: int64(len(r.receipts.Receipts()))}
	r.mon.Logf("receipts: %d pushes accepted, %d tracked, %d settled, %d receipts read", accepted, n.Receipts.Tracked,
		n.Receipts.Settled, n.Receipts.Read)
	return nil
}

// pushStage offers rate pushes per second for d (the workers share it),
// the first Warmup left out of the histogram, and waits up to
// DeliveryGrace for them to arrive; during, when set, runs alongside until
// the stage's pushes are answered. It reports what was accepted and
// delivered, how fast.
func (r *run) pushStage(ctx context.Context, name string, rate float64, d time.Duration, during func(stop <-chan struct{})) (report.Stage, error) {
	cfg := &r.cfg
	count := int64(rate * d.Seconds())
	sent0 := r.mon.Last().Sent
	t0 := r.mon.Now()
	r.mon.SetPhase(name, count, func(s report.Sample) int64 { return s.Sent - sent0 })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if during != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			during(stop)
		}()
	}
	workers := float64(len(r.pool.ws))
	cpu0 := probe.CPUSeconds(r.serverPIDs())
	evs, err := r.pool.all(ctx, func(*workerProc) worker.Command {
		return worker.Command{Op: worker.OpSend, Send: &worker.Send{Rate: rate / workers, Duration: d, Pick: appserver.PickRoundRobin,
			Warmup: cfg.Warmup, Grace: cfg.DeliveryGrace}}
	})
	close(stop)
	wg.Wait()
	if err != nil {
		return report.Stage{}, monitor.StepError("send", err)
	}
	st, err := mergeStage(rate, evs)
	if err != nil {
		return st, err
	}
	st.CPU = r.mon.AvgCPU(t0, r.mon.Now())
	if n := st.Delivered * st.Seconds; n > 0 {
		st.CPUPerPush = round2(1e6 * (probe.CPUSeconds(r.serverPIDs()) - cpu0) / n)
	}
	r.mon.Logf("%s: %s/s offered: %s/s accepted, %s/s delivered, p50 %.1f p99 %.1f p99.9 %.1f max %.1f ms, %d lost, errors %s",
		name, report.Num(rate), report.Num(st.Achieved), report.Num(st.Delivered), st.Latency.P50, st.Latency.P99, st.Latency.P999,
		st.Latency.Max, st.Account.Lost, report.CountsOrNone(st.Errors))
	return st, nil
}

// stallStage offers rate again while cfg.Stalls connections stall
// (stall.go), for at least the endpoint's timeout and a second.
func (r *run) stallStage(ctx context.Context, n *report.NotifyReport, rate float64) error {
	cfg := &r.cfg
	limit := cfg.StallTimeout + time.Second
	// The stalled connections stand for an attacker's, whose CPU is not
	// the server's: this process (which holds them, but measures nothing
	// itself) yields the CPU to the server and the workers from here on.
	if err := niceThreads(stallNice); err != nil {
		r.mon.Logf("the stalls' client keeps its priority: %v", err)
	}
	s, err := startStalls(ctx, r.cl.EndpointURL, cfg.Stalls, limit+30*time.Second)
	if err != nil {
		return err
	}
	st, err := r.pushStage(ctx, fmt.Sprintf("%s/s with %d stalled connections", report.Num(rate), cfg.Stalls), rate,
		max(cfg.StageTime, limit), nil)
	ss := report.StallStage{Stage: st}
	if ferr := s.finish(&ss, limit); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	n.Stalled = append(n.Stalled, ss)
	r.mon.Logf("%d stalled connections: %d closed by the endpoint within %s (slowest %.2f s; by kind %v)",
		ss.Stalls, ss.Closed, limit, ss.CloseMaxS, ss.Slowest)
	return nil
}

// mergeStage adds up the workers' results of one rate.
func mergeStage(rate float64, evs []worker.Event) (report.Stage, error) {
	st := report.Stage{Offered: rate, Errors: map[string]int64{}}
	lat, resp := hist.New(), hist.New()
	for _, ev := range evs {
		s := ev.Send
		st.Scheduled += s.Scheduled
		st.Seconds = max(st.Seconds, s.Seconds)
		st.Account.Add(s.Account)
		for k, v := range s.Errors {
			st.Errors[k] += v
		}
		if err := hist.Merge(lat, s.Hist); err != nil {
			return st, err
		}
		if err := hist.Merge(resp, s.Resp); err != nil {
			return st, err
		}
	}
	st.Latency, st.Response = hist.Summarize(lat), hist.Summarize(resp)
	if st.Seconds > 0 {
		st.Achieved = float64(st.Account.Accepted) / st.Seconds
		st.Delivered = float64(st.Account.Delivered) / st.Seconds
	}
	return st, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
