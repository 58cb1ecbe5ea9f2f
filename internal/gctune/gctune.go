// Package gctune moves the Go GC target between two settings as the
// collector's own CPU share rises and falls.
//
// A node holding idle connections wants a low target (gc-percent 25):
// its heap barely changes, so a low target costs nothing and keeps RSS
// near the live heap. The same node under a stream of pushes allocates
// tens of MB/s, and at 25 the collector runs four times as often as at
// 100 (a quarter of the server's CPU at 9,000 pushes/s, docs/benchmarks.md).
// The tuner watches the share of the CPU the collector takes and uses the
// busy target while it is high; when it falls the idle target comes back
// and the memory the busy target let grow is returned to the OS at once.
package gctune

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Config is the tuner's policy. The zero Busy turns it off (Idle alone).
type Config struct {
	// Idle is the GC percent while the collector is quiet.
	Idle int
	// Busy is the GC percent while the collector's share of the CPU is
	// above BusyAbove; 0 keeps Idle always.
	Busy int
	// BusyAbove and IdleBelow are the collector's share of the process's
	// CPU capacity (Cores) over one Window, as it would be at
	// the Idle target, that switch to Busy and back; IdleBelow < BusyAbove
	// so it does not flap. While Busy, the measured share is scaled by
	// Busy/Idle: the collector's work goes as the inverse of the target
	// (6% at 25 and 1.5% at 100 under the same pushes), so a load that
	// raised the target keeps it raised.
	BusyAbove, IdleBelow float64
	// Window is how often the share is measured while the target is
	// raised, and at most how often (when a collection ends) while it is
	// not; one window above BusyAbove raises the target. Short, so a
	// burst (a thousand hellos a second arriving at an idle node) gets
	// the busy target within a fraction of a second rather than after
	// running at the idle one.
	Window time.Duration
	// QuietWindows is how many windows are taken together to lower the
	// target: their combined share must be under IdleBelow. The
	// collector's CPU time advances only when a cycle ends, so under load
	// one short window can read nothing at all.
	QuietWindows int
	// Cores is the CPU capacity the share is taken of; 0: GOMAXPROCS.
	// A process whose GOMAXPROCS counts processors that mostly wait in
	// system calls (procs.ForLoops) names its cores here.
	Cores int
}

// Defaults is the policy the nodes use: idle and busy targets (25 and
// 100 by default), busy once the collector would take more than 3% of
// the CPU at the idle target over a quarter of a second, back when it
// would take under 1% over a second.
func Defaults(idle, busy int) Config {
	return Config{Idle: idle, Busy: busy, BusyAbove: 0.03, IdleBelow: 0.01, Window: 250 * time.Millisecond, QuietWindows: 4}
}

// Tuner applies a Config.
type Tuner struct {
	cfg     Config
	log     *slog.Logger
	samples []metrics.Sample
	busy    bool
	// The windows seen while busy since the last check for lowering:
	// the collector's seconds, the capacity, how many.
	quietGC, quietCap float64
	quietN            int
	setGC             func(int) int
	release           func()
}

// New sets the idle target and returns a tuner to Run.
func New(cfg Config, log *slog.Logger) *Tuner {
	t := &Tuner{cfg: cfg, log: log, setGC: debug.SetGCPercent, release: debug.FreeOSMemory,
		samples: []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}}
	t.setGC(cfg.Idle)
	return t
}

// Run measures until ctx ends; it returns at once when the policy has no
// busy target. While the target is raised it measures every Window. At
// the idle target it measures when a collection ends, at most once a
// Window: only a collection can raise the share, and a node at rest
// collects rarely, so the tuner does not wake it four times a second to
// find nothing.
func (t *Tuner) Run(ctx context.Context) {
	if t.cfg.Busy == 0 || t.cfg.Busy == t.cfg.Idle {
		return
	}
	cycles := gcCycles(ctx)
	tick := time.NewTicker(t.cfg.Window)
	tick.Stop()
	defer tick.Stop()
	gc, at := t.gcSeconds(), time.Now()
	for {
		var ticks <-chan time.Time
		if t.busy {
			ticks = tick.C
		}
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		case <-cycles:
			if t.busy || time.Since(at) < t.cfg.Window {
				continue // a window too short to judge; a later cycle will
			}
		}
		g, now := t.gcSeconds(), time.Now()
		// The runtime's own CPU total advances only when a cycle ends,
		// so the capacity is the wall clock times the cores.
		capacity := now.Sub(at).Seconds() * float64(t.cores())
		was := t.busy
		if capacity > 0 {
			t.observe(g-gc, capacity)
		}
		gc, at = g, now
		switch {
		case t.busy && !was:
			tick.Reset(t.cfg.Window)
		case !t.busy && was:
			tick.Stop()
		}
	}
}

func (t *Tuner) cores() int {
	if t.cfg.Cores > 0 {
		return t.cfg.Cores
	}
	return runtime.GOMAXPROCS(0)
}

// gcCycles signals after each collection (a cleanup on an object made
// unreachable for the next one), until ctx ends.
func gcCycles(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	type sentinel struct{ _ *int } // a pointer: never in the tiny allocator
	var arm func()
	arm = func() {
		runtime.AddCleanup(&sentinel{}, func(ch chan struct{}) {
			select {
			case ch <- struct{}{}:
			default:
			}
			if ctx.Err() == nil {
				arm()
			}
		}, ch)
	}
	arm()
	return ch
}

// gcSeconds is the CPU time the collector has taken (the runtime's
// estimate, brought up to date at the end of each cycle).
func (t *Tuner) gcSeconds() float64 {
	metrics.Read(t.samples)
	return t.samples[0].Value.Float64()
}

// observe switches on one window: the collector's CPU seconds in it and
// the capacity (seconds times cores).
func (t *Tuner) observe(gc, capacity float64) {
	if !t.busy {
		if share := gc / capacity; share > t.cfg.BusyAbove {
			t.busy = true
			t.quietGC, t.quietCap, t.quietN = 0, 0, 0
			t.setGC(t.cfg.Busy)
			t.log.Debug("gc target raised", "gc_percent", t.cfg.Busy, "gc_cpu_share", share)
		}
		return
	}
	t.quietGC += gc
	t.quietCap += capacity
	if t.quietN++; t.quietN < max(t.cfg.QuietWindows, 1) {
		return
	}
	share := t.quietGC / t.quietCap * float64(t.cfg.Busy) / float64(t.cfg.Idle)
	t.quietGC, t.quietCap, t.quietN = 0, 0, 0
	if share < t.cfg.IdleBelow {
		t.busy = false
		t.setGC(t.cfg.Idle)
		// The busy target let the heap grow past what the idle one
		// allows; give the difference back now, not at the scavenger's
		// pace, so an idle node's RSS is its idle size.
		t.release()
		t.log.Debug("gc target lowered", "gc_percent", t.cfg.Idle, "gc_cpu_share", share)
	}
}
