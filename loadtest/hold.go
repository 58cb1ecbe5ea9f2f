package loadtest

import (
	"context"
	"math"
	"time"
)

// hold opens the user agents in Steps equal steps, measures the engines
// after each once they have been idle for Settle, then holds everyone for
// Hold. Memory per connection is the slope over the steps, so each
// engine's fixed cost does not count.
func (r *run) hold(ctx context.Context) error {
	cfg := &r.cfg
	h := &HoldReport{}
	r.rep.Hold = h
	conn := &ConnectReport{Target: cfg.UAs, Offered: cfg.ConnectRate}
	r.rep.Connect = conn
	hs := newHist()

	r.setPhase("baseline", 0, nil)
	rampStart := r.now()
	if err := sleep(ctx, min(cfg.Settle, 2*time.Second)); err != nil {
		return err
	}
	p, err := r.measure(ctx)
	if err != nil {
		return errRun("measure", err)
	}
	h.Points = append(h.Points, p)
	r.logf("%s", pointLine(p))
	for step := 1; step <= cfg.Steps; step++ {
		target := cfg.UAs * step / cfg.Steps
		r.setPhase("connect", int64(target), func(s Sample) int64 { return int64(s.Connected) })
		start := time.Now()
		evs, err := r.pool.all(ctx, func(wp *workerProc) command {
			return command{Op: opConnect, Connect: &connectArgs{
				Rate: cfg.ConnectRate / float64(len(r.pool.ws)),
				Upto: max(1, ceilDiv(wp.uas*step, cfg.Steps)),
			}}
		})
		if err != nil {
			return errRun("connect", err)
		}
		conn.Seconds += time.Since(start).Seconds()
		conn.Connected = 0
		for _, ev := range evs {
			conn.Connected += ev.Connect.Connected
			conn.Attempts += ev.Connect.Attempts
			conn.Failures += ev.Connect.Failures
			if err := mergeEncoded(hs, ev.Connect.Handshake); err != nil {
				return err
			}
		}
		r.setPhase("settle", 0, nil)
		if err := sleep(ctx, cfg.Settle); err != nil {
			return err
		}
		p, err := r.measure(ctx)
		if err != nil {
			return errRun("measure", err)
		}
		h.Points = append(h.Points, p)
		r.logf("%s", pointLine(p))
	}
	conn.Handshake = summarize(hs)
	conn.CPU = r.avgCPU(rampStart, r.now())
	if conn.Seconds > 0 {
		conn.Achieved = float64(conn.Attempts-conn.Failures) / conn.Seconds
	}

	r.setPhase("hold", 0, nil)
	held := time.Now()
	if err := sleep(ctx, cfg.Hold); err != nil {
		return err
	}
	h.HeldSeconds = time.Since(held).Seconds()
	end := r.pool.counters()
	h.ConnectedEnd, h.DroppedDuringRun = end.Connected, end.Dropped
	h.slopes()
	return nil
}

// measure takes Samples samples of every engine one second apart and keeps
// each engine's median RSS (the Go runtime cannot be made to collect from
// outside, so one sample can catch a heap about to shrink).
func (r *run) measure(ctx context.Context) (MemPoint, error) {
	n := max(r.cfg.Samples, 1)
	per := make([][]EngineSample, len(r.cl.engines))
	var workers []int64
	for i := range n {
		if i > 0 {
			if err := sleep(ctx, time.Second); err != nil {
				return MemPoint{}, err
			}
		}
		for e, s := range r.engineSamples() {
			per[e] = append(per[e], s)
		}
		ws := r.pool.counters()
		workers = append(workers, ws.RSS)
	}
	ws := r.pool.counters()
	p := MemPoint{Connections: ws.Connected, WorkerRSS: median(workers)}
	for _, samples := range per {
		p.PerEngine = append(p.PerEngine, medianSample(samples))
	}
	p.Engine = sumEngines(p.PerEngine)
	return p, nil
}

// medianSample is the sample of median RSS (its other figures come with
// it, so they belong together).
func medianSample(ss []EngineSample) EngineSample {
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

func pointLine(p MemPoint) string {
	return "memory at " + num(p.Connections) + " connections: engines rss " + num(p.Engine.RSS>>10) + " KiB, anon " +
		num(p.Engine.Anon>>10) + " KiB, goroutines " + optNum(p.Engine.Goroutines)
}

// slopes fits memory against connections over the points with
// connections (the first step also absorbs one-time set-up, such as
// storage pools and tables growing; the zero point is kept when there is
// only one step).
func (h *HoldReport) slopes() {
	pts := h.Points
	if len(pts) > 2 {
		pts = pts[1:]
	}
	var xs, rss, anon, heap []float64
	heapOK := true
	for _, p := range pts {
		xs = append(xs, float64(p.Connections))
		rss = append(rss, float64(p.Engine.RSS))
		anon = append(anon, float64(p.Engine.Anon))
		heap = append(heap, float64(p.Engine.HeapInuse))
		heapOK = heapOK && p.Engine.HeapInuse >= 0
	}
	h.RSSPerConn, h.AnonPerConn = Slope(slope(xs, rss)), Slope(slope(xs, anon))
	h.HeapPerConn = Slope(math.NaN())
	if heapOK {
		h.HeapPerConn = Slope(slope(xs, heap))
	}
	var workers []float64
	for _, p := range pts {
		workers = append(workers, float64(p.WorkerRSS))
	}
	h.WorkerRSSPerUA = Slope(slope(xs, workers))
	first, last := h.Points[0], h.Points[len(h.Points)-1]
	h.GoroutinesStart, h.GoroutinesEnd = first.Engine.Goroutines, last.Engine.Goroutines
}
