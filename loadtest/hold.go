package loadtest

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/autopush-go/autopush/loadtest/agent"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/monitor"
	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/loadtest/worker"
)

// hold opens the user agents in Steps equal steps, measures the engines
// after each once they have been idle for Settle, then holds everyone for
// Hold. Memory per connection is the slope over the steps, so each
// engine's fixed cost does not count.
func (r *run) hold(ctx context.Context) error {
	cfg := &r.cfg
	h := &report.HoldReport{}
	r.rep.Hold = h
	conn := &report.ConnectReport{Target: cfg.UAs, Offered: cfg.ConnectRate}
	r.rep.Connect = conn
	hs := hist.New()

	r.mon.SetPhase("baseline", 0, nil)
	rampStart := r.mon.Now()
	if err := monitor.Sleep(ctx, min(cfg.Settle, 2*time.Second)); err != nil {
		return err
	}
	p, err := r.measure(ctx)
	if err != nil {
		return monitor.StepError("measure", err)
	}
	h.Points = append(h.Points, p)
	r.mon.Logf("%s", pointLine(p))
	for step := 1; step <= cfg.Steps; step++ {
		target := cfg.UAs * step / cfg.Steps
		r.mon.SetPhase("connect", int64(target), func(s report.Sample) int64 { return int64(s.Connected) })
		start := time.Now()
		var evs []worker.Event
		err := r.withProfile(fmt.Sprintf("connect-%d", step), func() (err error) {
			evs, err = r.pool.all(ctx, func(wp *workerProc) worker.Command {
				return worker.Command{Op: worker.OpConnect, Connect: &agent.Connect{
					Rate: cfg.ConnectRate / float64(len(r.pool.ws)),
					Upto: max(1, scenario.CeilDiv(wp.uas*step, cfg.Steps)),
				}}
			})
			return err
		})
		if err != nil {
			return monitor.StepError("connect", err)
		}
		conn.Seconds += time.Since(start).Seconds()
		conn.Connected = 0
		for _, ev := range evs {
			conn.Connected += ev.Connect.Connected
			conn.Attempts += ev.Connect.Attempts
			conn.Failures += ev.Connect.Failures
			if err := hist.Merge(hs, ev.Connect.Handshake); err != nil {
				return err
			}
		}
		r.mon.SetPhase("settle", 0, nil)
		if err := monitor.Sleep(ctx, cfg.Settle); err != nil {
			return err
		}
		p, err := r.measure(ctx)
		if err != nil {
			return monitor.StepError("measure", err)
		}
		h.Points = append(h.Points, p)
		r.mon.Logf("%s", pointLine(p))
	}
	conn.Handshake = hist.Summarize(hs)
	conn.CPU = r.mon.AvgCPU(rampStart, r.mon.Now())
	if conn.Seconds > 0 {
		conn.Achieved = float64(conn.Attempts-conn.Failures) / conn.Seconds
	}

	r.mon.SetPhase("hold", 0, nil)
	held := time.Now()
	cpu0 := probe.CPUSeconds(r.enginePIDs())
	if err := monitor.Sleep(ctx, cfg.Hold); err != nil {
		return err
	}
	h.HeldSeconds = time.Since(held).Seconds()
	h.IdleCPU = round2(100 * (probe.CPUSeconds(r.enginePIDs()) - cpu0) / h.HeldSeconds)
	end := r.pool.counters()
	h.ConnectedEnd, h.DroppedDuringRun, h.Pings = end.Connected, end.Dropped, end.Pings
	if end.Connected > 0 {
		h.IdleCPUPer10k = round2(h.IdleCPU * 10000 / float64(end.Connected))
	}
	h.EnginePings = probe.SumEngines(r.engineSamples()).Pings
	for _, p := range append(slices.Clone(r.cl.Engines), r.pool.procs()...) {
		if n, err := probe.Maps(p.PID()); err == nil {
			h.MostMaps = max(h.MostMaps, n)
		}
	}
	h.Slopes()
	return nil
}

// measure takes Samples samples of every engine one second apart and keeps
// each engine's median RSS (the Go runtime cannot be made to collect from
// outside, so one sample can catch a heap about to shrink).
func (r *run) measure(ctx context.Context) (report.MemPoint, error) {
	n := max(r.cfg.Samples, 1)
	per := make([][]probe.EngineSample, len(r.cl.Engines))
	var workers []int64
	var kernel []probe.Kernel
	for i := range n {
		if i > 0 {
			if err := monitor.Sleep(ctx, time.Second); err != nil {
				return report.MemPoint{}, err
			}
		}
		for e, s := range r.engineSamples() {
			per[e] = append(per[e], s)
		}
		ws := r.pool.counters()
		workers = append(workers, ws.RSS)
		k, err := probe.ReadKernel(nil)
		if err != nil {
			return report.MemPoint{}, err
		}
		kernel = append(kernel, k)
	}
	ws := r.pool.counters()
	p := report.MemPoint{Connections: ws.Connected, WorkerRSS: median(workers), Kernel: medianKernel(kernel)}
	for _, samples := range per {
		p.PerEngine = append(p.PerEngine, medianSample(samples))
	}
	p.Engine = probe.SumEngines(p.PerEngine)
	return p, nil
}

// medianSample is the sample of median RSS (its other figures come with
// it, so they belong together).
func medianSample(ss []probe.EngineSample) probe.EngineSample {
	rss := make([]int64, len(ss))
	for i, s := range ss {
		rss[i] = s.RSS
	}
	m := median(rss)
	for _, s := range ss {
		if s.RSS == m {
			return s
		}
	}
	return ss[len(ss)-1]
}

// medianKernel is the sample of median kernel total.
func medianKernel(ks []probe.Kernel) probe.Kernel {
	s := slices.Clone(ks)
	slices.SortFunc(s, func(a, b probe.Kernel) int { return cmp.Compare(a.Total(), b.Total()) })
	return s[len(s)/2]
}

func pointLine(p report.MemPoint) string {
	return "memory at " + report.Num(p.Connections) + " connections: engines rss " + report.Num(p.Engine.RSS>>10) + " KiB, anon " +
		report.Num(p.Engine.Anon>>10) + " KiB, goroutines " + report.OptNum(p.Engine.Goroutines) +
		"; kernel slab " + report.Num(p.Kernel.Slab>>10) + " KiB, tcp sockets " + report.Num(p.Kernel.TCPInuse)
}

func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }
