package gctune

import (
	"context"
	"io"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// recorder is a tuner whose runtime calls are recorded, not made.
func recorder(cfg Config) (*Tuner, *[]int, *int) {
	var set []int
	released := 0
	t := &Tuner{cfg: cfg, log: quiet(), setGC: func(p int) int { set = append(set, p); return 0 },
		release: func() { released++ }}
	return t, &set, &released
}

func TestObserveSwitchesWithHysteresis(t *testing.T) {
	tu, set, released := recorder(Defaults(25, 100))
	const capacity = 0.5 // a quarter second on 2 cores
	for i, step := range []struct {
		share    float64 // of the window's capacity
		busy     bool
		released int
	}{
		{0.02, false, 0}, // under BusyAbove: stays idle
		{0.06, true, 0},  // the collector busy at 25 for one window: raise
		// Lowering takes four windows together, scaled to the idle target.
		{0, true, 0},      // no cycle ended in this window: not quiet yet
		{0, true, 0},      //
		{0.012, true, 0},  //
		{0, true, 0},      // 0.3% at 100 over four windows is 1.2% at 25: stays raised
		{0.001, true, 0},  //
		{0.001, true, 0},  //
		{0.002, true, 0},  //
		{0.002, false, 1}, // 0.15% at 100 is 0.6% at 25: lowered, memory returned
		{0.009, false, 1}, // under BusyAbove
	} {
		tu.observe(step.share*capacity, capacity)
		if tu.busy != step.busy || *released != step.released {
			t.Fatalf("window %d, share %v: busy %v released %d, want %v %d", i, step.share, tu.busy, *released, step.busy, step.released)
		}
	}
	if got := *set; len(got) != 2 || got[0] != 100 || got[1] != 25 {
		t.Fatalf("targets set %v, want [100 25]", got)
	}
}

func TestRunWithoutBusyTargetReturns(t *testing.T) {
	tu, _, _ := recorder(Defaults(25, 0))
	done := make(chan struct{})
	go func() { tu.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run with Busy 0 did not return")
	}
}

var sink [][]byte

// TestRaisesUnderAllocationAndLowersAfter runs the real tuner on this
// process: a loop allocating garbage makes the collector busy at 25 and
// the runtime's target becomes 100; when it stops the target is 25 again.
func TestRaisesUnderAllocationAndLowersAfter(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	live := make([][]byte, 2048) // a live heap for the collector to mark
	for i := range live {
		live[i] = make([]byte, 1024)
	}
	cfg := Defaults(25, 100)
	cfg.Window = 100 * time.Millisecond
	tu := New(cfg, quiet())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tu.Run(ctx)
	stop := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			b := make([]byte, 4096)
			if i%1024 == 0 {
				sink = append(sink[:0], b)
			}
		}
	}()
	waitPercent(t, 100)
	close(stop)
	waitPercent(t, 25)
	_ = live
}

// waitPercent waits for the runtime's GC target to become p.
func waitPercent(t *testing.T, p int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		cur := int(s[0].Value.Uint64())
		if cur == p {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GC target %d after 60s, want %d", cur, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
