package loadtest

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/loadtest/agent"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/worker"
)

// broadcast connects every user agent (each following Broadcasts ids of
// the run's Megaphone), then offers PushRate for StageTime twice: once
// with no change (the baseline), once while the Megaphone changes the
// versions Changes times, evenly spaced after the warm-up. Every change
// must reach every user agent exactly once; the two stages' push latency
// says whether a fan-out stalls deliveries.
func (r *run) broadcast(ctx context.Context) error {
	cfg := &r.cfg
	if err := r.connectEveryone(ctx); err != nil {
		return err
	}
	b := &report.BroadcastReport{IDs: cfg.Broadcasts, Changes: cfg.Changes, PollSeconds: cfg.BroadcastPoll.Seconds()}
	r.rep.Broadcast = b
	// What the hellos were told is not a change: count from here.
	if _, err := r.takeBroadcasts(ctx); err != nil {
		return errRun("broadcasts", err)
	}
	b.UAs = r.rep.Connect.Connected
	var err error
	if b.Baseline, err = r.pushStage(ctx, "no change", cfg.PushRate, nil); err != nil {
		return err
	}
	fan0, err := r.fanOutTotals(ctx)
	if err != nil {
		return errRun("engine metrics", err)
	}
	spacing := (cfg.StageTime - cfg.Warmup) / time.Duration(cfg.Changes+1)
	if b.During, err = r.pushStage(ctx, "changes", cfg.PushRate, func(stop <-chan struct{}) {
		next := time.Now().Add(cfg.Warmup)
		for range cfg.Changes {
			next = next.Add(spacing)
			select {
			case <-stop:
				return
			case <-time.After(time.Until(next)):
			}
			r.logf("broadcast version now %s", r.cl.megaphone.change())
		}
	}); err != nil {
		return err
	}
	// The last change's arrivals: within a poll and a fan-out of it.
	b.Expected = int64(cfg.Changes) * int64(b.UAs)
	h := hist.New()
	deadline := time.Now().Add(2*cfg.BroadcastPoll + 30*time.Second)
	for {
		got, err := r.takeBroadcasts(ctx)
		if err != nil {
			return errRun("broadcasts", err)
		}
		b.Received += got.Received
		b.Repeated += got.Repeated
		if err := hist.Merge(h, got.Hist); err != nil {
			return err
		}
		if b.Received >= b.Expected || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	b.Arrival = hist.Summarize(h)
	fan1, err := r.fanOutTotals(ctx)
	if err != nil {
		return errRun("engine metrics", err)
	}
	if b.FanOutCount = int64(fan1.count - fan0.count); b.FanOutCount > 0 {
		b.FanOutMean = (fan1.sum - fan0.sum) / float64(b.FanOutCount)
	}
	b.FanOutMax = fan1.slowestBound(fan0)
	r.logf("broadcast: %s of %s arrivals, %d repeated; change -> arrival p99 %.1f ms; push p99 %.1f ms without a change, %.1f ms during the changes",
		report.Num(b.Received), report.Num(b.Expected), b.Repeated, b.Arrival.P99, b.Baseline.Latency.P99, b.During.Latency.P99)
	if err := r.disconnectAll(ctx, "close"); err != nil {
		return errRun("disconnect", err)
	}
	return nil
}

// takeBroadcasts sums what the workers' user agents received since the
// last call.
func (r *run) takeBroadcasts(ctx context.Context) (agent.BroadcastResult, error) {
	evs, err := r.pool.all(ctx, func(*workerProc) worker.Command { return worker.Command{Op: worker.OpBroadcasts} })
	if err != nil {
		return agent.BroadcastResult{}, err
	}
	h := hist.New()
	var sum agent.BroadcastResult
	for _, ev := range evs {
		sum.Received += ev.Broadcasts.Received
		sum.Repeated += ev.Broadcasts.Repeated
		if err := hist.Merge(h, ev.Broadcasts.Hist); err != nil {
			return sum, err
		}
	}
	sum.Hist = hist.Encode(h)
	return sum, nil
}

// fanOut is the engines' autoconnect_broadcast_fanout_seconds, summed.
type fanOut struct {
	sum, count float64
	buckets    map[float64]float64 // le -> cumulative count
}

const fanOutMetric = "autoconnect_broadcast_fanout_seconds"

func (r *run) fanOutTotals(ctx context.Context) (fanOut, error) {
	f := fanOut{buckets: map[float64]float64{}}
	for _, u := range r.cl.metricsURLs {
		m, err := promtext.Scrape(ctx, nil, u)
		if err != nil {
			return f, err
		}
		f.sum += m[fanOutMetric+"_sum"]
		f.count += m[fanOutMetric+"_count"]
		for series, v := range m {
			le, ok := strings.CutPrefix(series, fanOutMetric+`_bucket{le="`)
			if !ok {
				continue
			}
			bound := math.Inf(1)
			if le = strings.TrimSuffix(le, `"}`); le != "+Inf" {
				if bound, err = strconv.ParseFloat(le, 64); err != nil {
					return f, fmt.Errorf("loadtest: %s: bucket %q", u, series)
				}
			}
			f.buckets[bound] += v
		}
	}
	return f, nil
}

// slowestBound is the smallest bucket bound holding every fan-out since
// before: the slowest one took at most that long.
func (f fanOut) slowestBound(before fanOut) float64 {
	best := math.Inf(1)
	for le, n := range f.buckets {
		if n-before.buckets[le] >= f.count-before.count && le < best {
			best = le
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}
