package loadtest

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/loadtest/agent"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/monitor"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/worker"
)

// broadcast connects every user agent (each following Broadcasts ids of
// the run's Megaphone), then offers PushRate for StageTime twice: once
// with no change (the baseline), once while the Megaphone changes the
// versions Changes times, evenly spaced after the warm-up. Every user
// agent must end up with the last version, and be sent no version twice;
// a change reaches it once, unless a newer one overtook it first (then
// it gets only the newer one, as a client should). The two stages' push
// latency says whether a fan-out stalls deliveries.
func (r *run) broadcast(ctx context.Context) error {
	cfg := &r.cfg
	if err := r.connectEveryone(ctx); err != nil {
		return err
	}
	b := &report.BroadcastReport{IDs: cfg.Broadcasts, Changes: cfg.Changes, PollSeconds: cfg.BroadcastPoll.Seconds()}
	r.rep.Broadcast = b
	// What the hellos were told is not a change: count from here.
	if _, err := r.takeBroadcasts(ctx, 0); err != nil {
		return monitor.StepError("broadcasts", err)
	}
	b.UAs = r.rep.Connect.Connected
	var err error
	start, err := r.serverView(ctx)
	if err != nil {
		return monitor.StepError("node metrics", err)
	}
	if b.Baseline, err = r.pushStage(ctx, "no change", cfg.PushRate, cfg.StageTime, nil); err != nil {
		return err
	}
	before, err := r.serverView(ctx)
	if err != nil {
		return monitor.StepError("node metrics", err)
	}
	b.DeliverP99Baseline = before.deliver.since(start.deliver).bound(.99)
	spacing := (cfg.StageTime - cfg.Warmup) / time.Duration(cfg.Changes+1)
	var last atomic.Int64 // the instant of the last version made
	if b.During, err = r.pushStage(ctx, "changes", cfg.PushRate, cfg.StageTime, func(stop <-chan struct{}) {
		next := time.Now().Add(cfg.Warmup)
		for range cfg.Changes {
			next = next.Add(spacing)
			select {
			case <-stop:
				return
			case <-time.After(time.Until(next)):
			}
			v, at := r.cl.Megaphone.Change()
			last.Store(at)
			r.mon.Logf("broadcast version now %s", v)
		}
	}); err != nil {
		return err
	}
	// The last change's arrivals: within a poll and a fan-out of it.
	b.Expected = int64(cfg.Changes) * int64(b.UAs)
	h := hist.New()
	deadline := time.Now().Add(2*cfg.BroadcastPoll + 30*time.Second)
	for {
		got, err := r.takeBroadcasts(ctx, last.Load())
		if err != nil {
			return monitor.StepError("broadcasts", err)
		}
		b.Received += got.Received
		b.Repeated += got.Repeated
		b.Ready, b.Current = got.Ready, got.Current
		if err := hist.Merge(h, got.Hist); err != nil {
			return err
		}
		if b.Current >= b.Ready || time.Now().After(deadline) {
			break
		}
		if err := monitor.Sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	b.Arrival = hist.Summarize(h)
	after, err := r.serverView(ctx)
	if err != nil {
		return monitor.StepError("node metrics", err)
	}
	fan := after.fanOut.since(before.fanOut)
	if b.FanOutCount = int64(fan.count); b.FanOutCount > 0 {
		b.FanOutMean = fan.sum / fan.count
	}
	b.FanOutMax = fan.bound(1)
	b.DeliverP99During = after.deliver.since(before.deliver).bound(.99)
	r.mon.Logf("broadcast: %s of %s connected user agents have the last version; %s of %s arrivals, %d repeated; change -> arrival p99 %.1f ms; push p99 %.1f ms without a change, %.1f ms during the changes",
		report.Num(b.Current), report.Num(b.Ready), report.Num(b.Received), report.Num(b.Expected), b.Repeated, b.Arrival.P99,
		b.Baseline.Latency.P99, b.During.Latency.P99)
	if err := r.disconnectAll(ctx, "close"); err != nil {
		return monitor.StepError("disconnect", err)
	}
	return nil
}

// takeBroadcasts sums what the workers' user agents received since the
// last call.
func (r *run) takeBroadcasts(ctx context.Context, current int64) (agent.BroadcastResult, error) {
	evs, err := r.pool.all(ctx, func(*workerProc) worker.Command {
		return worker.Command{Op: worker.OpBroadcasts, Current: current}
	})
	if err != nil {
		return agent.BroadcastResult{}, err
	}
	h := hist.New()
	var sum agent.BroadcastResult
	for _, ev := range evs {
		sum.Received += ev.Broadcasts.Received
		sum.Repeated += ev.Broadcasts.Repeated
		sum.Ready += ev.Broadcasts.Ready
		sum.Current += ev.Broadcasts.Current
		if err := hist.Merge(h, ev.Broadcasts.Hist); err != nil {
			return sum, err
		}
	}
	sum.Hist = hist.Encode(h)
	return sum, nil
}

// promHist is one Prometheus histogram summed over the processes that
// serve it: its sum, count and cumulative buckets.
type promHist struct {
	sum, count float64
	buckets    map[float64]float64 // le -> cumulative count
}

// scrapeHist reads the histogram name (its series whose labels contain
// match, "" for any) from every url and adds them up.
func scrapeHist(ctx context.Context, urls []string, name, match string) (promHist, error) {
	h := promHist{buckets: map[float64]float64{}}
	for _, u := range urls {
		m, err := promtext.Scrape(ctx, nil, u)
		if err != nil {
			return h, err
		}
		for series, v := range m {
			labels, ok := strings.CutPrefix(series, name)
			if !ok || !strings.Contains(labels, match) {
				continue
			}
			switch {
			case strings.HasPrefix(labels, "_sum"):
				h.sum += v
			case strings.HasPrefix(labels, "_count"):
				h.count += v
			case strings.HasPrefix(labels, "_bucket{"):
				_, le, _ := strings.Cut(labels, `le="`)
				le, _, _ = strings.Cut(le, `"`)
				bound := math.Inf(1)
				if le != "+Inf" {
					if bound, err = strconv.ParseFloat(le, 64); err != nil {
						return h, fmt.Errorf("loadtest: %s: bucket %q", u, series)
					}
				}
				h.buckets[bound] += v
			}
		}
	}
	return h, nil
}

// since is what h observed after before.
func (h promHist) since(before promHist) promHist {
	d := promHist{sum: h.sum - before.sum, count: h.count - before.count, buckets: map[float64]float64{}}
	for le, n := range h.buckets {
		d.buckets[le] = n - before.buckets[le]
	}
	return d
}

// bound is the smallest bucket bound under which a fraction q of the
// observations fell (0 with none): "the p99 was at most this".
func (h promHist) bound(q float64) float64 {
	best := math.Inf(1)
	for le, n := range h.buckets {
		if h.count > 0 && n >= q*h.count && le < best {
			best = le
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}

// serverView is what the nodes' own histograms say about a stretch of
// the run: the engines' fan-outs, and the endpoint's calls to deliver a
// push at an engine (PUT /push: the engine's loop writes the
// notification before it answers, so a stalled loop shows there).
type serverView struct{ fanOut, deliver promHist }

func (r *run) serverView(ctx context.Context) (serverView, error) {
	var v serverView
	var err error
	if v.fanOut, err = scrapeHist(ctx, r.cl.MetricsURLs, "autoconnect_broadcast_fanout_seconds", ""); err != nil {
		return v, err
	}
	v.deliver, err = scrapeHist(ctx, []string{r.cl.APIMetricsURL}, "autoendpoint_node_call_seconds", `call="push"`)
	return v, err
}
