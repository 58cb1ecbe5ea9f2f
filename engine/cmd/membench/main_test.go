package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// TestSmallRun runs the benchmark end to end on 300 connections: the
// autoconnect binary is built and started, the connections are opened and
// measured, and the goroutine count must not grow with them. The RSS
// budget is not asserted: at this size it is a measurement, not a test.
func TestSmallRun(t *testing.T) {
	o, err := parseFlags([]string{"-n", "300", "-hold", "300ms", "-samples", "2", "-warmup", "20", "-concurrency", "16"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := run(ctx, o, testLog{t})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(res.Points) != o.Steps+1 {
		t.Fatalf("%d points, want %d", len(res.Points), o.Steps+1)
	}
	for i, p := range res.Points {
		if want := o.N * i / o.Steps; p.Connections != want {
			t.Errorf("point %d at %d connections, want %d", i, p.Connections, want)
		}
		if p.RSS <= 0 || p.Anon <= 0 || p.Anon > p.RSS || len(p.RSSSamples) != o.Samples {
			t.Errorf("point %d: rss %d anon %d samples %v", i, p.RSS, p.Anon, p.RSSSamples)
		}
		if p.Goroutines <= 0 {
			t.Errorf("point %d: no goroutine count", i)
		}
		// Not growing with connections: at every point, not only the last.
		if p.Goroutines-res.GoroutinesStart > o.GoroutineSlack {
			t.Errorf("goroutines grew from %d to %d at %d connections", res.GoroutinesStart, p.Goroutines, p.Connections)
		}
	}
	if math.IsNaN(res.RSSSlope) || math.IsInf(res.RSSSlope, 0) || math.IsNaN(res.AnonSlope) {
		t.Errorf("slopes not computed: rss %v anon %v", res.RSSSlope, res.AnonSlope)
	}
	if res.GoroutinesGrew {
		t.Errorf("goroutines grew: %d -> %d", res.GoroutinesStart, res.GoroutinesEnd)
	}
	var table bytes.Buffer
	printTable(&table, res)
	t.Logf("\n%s", table.String())
	if !strings.Contains(table.String(), "RESULT connections=300 rss_slope_bytes_per_conn=") {
		t.Errorf("no RESULT line:\n%s", table.String())
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil || back["rss_slope_bytes_per_conn"] == nil || back["connections"] != 300.0 {
		t.Errorf("json result %s (%v)", b, err)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestSlope(t *testing.T) {
	xs := []float64{0, 100, 200, 300, 400}
	ys := []float64{5000, 5000 + 812*100 + 7, 5000 + 812*200 - 7, 5000 + 812*300, 5000 + 812*400}
	if s := slope(xs, ys); math.Abs(s-812) > 0.1 {
		t.Errorf("slope %v, want 812", s)
	}
	if s := slope([]float64{3, 3}, []float64{1, 2}); !math.IsNaN(s) {
		t.Errorf("slope of a vertical line %v, want NaN", s)
	}
}

// TestSchedDetailGoroutines: the fallback goroutine count, for engines
// whose /metrics has no go_goroutines, counts live goroutines in the
// runtime's scheddetail dump and ignores dead and idle ones.
func TestSchedDetailGoroutines(t *testing.T) {
	dump := func(ms int, statuses ...int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "SCHED %dms: gomaxprocs=2 idleprocs=2 threads=5\n", ms)
		b.WriteString("  P0: status=0 schedtick=1 syscalltick=0 m=nil runqsize=0 gfreecnt=0 timerslen=0\n")
		b.WriteString("  M0: p=nil curg=nil mallocing=0 throwing=0 preemptoff= locks=0 dying=0 spinning=false blocked=true lockedg=1\n")
		for i, s := range statuses {
			fmt.Fprintf(&b, "  G%d: status=%d(chan receive) m=nil lockedm=nil\n", i+1, s)
		}
		return b.String()
	}
	e := &engine{heapLive: -1}
	in := dump(0, 4, 4, 2, 6, 6, 11, 3) + // 4 live
		"gc 3 @0.5s 1%: 0.01+1+0.01 ms clock, 0.02+0/1/0+0.02 ms cpu, 12->13->7 MB, 14 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		dump(1000, 4, 0x1004, 1, 6, 0) + // 3 live (a goroutine being scanned counts)
		"autoconnect: some error\n" +
		dump(2000)
	e.readStderr(strings.NewReader(in))
	if e.dumpSeq != 2 || e.dumpLive != 3 {
		t.Errorf("dumps %d, live %d; want 2 complete dumps, 3 live in the last", e.dumpSeq, e.dumpLive)
	}
	if e.gcs != 3 || e.heapLive != 7<<20 {
		t.Errorf("gc %d heap live %d; want gc 3, 7 MiB", e.gcs, e.heapLive)
	}
	if tail := e.stderrTail(); tail != "autoconnect: some error" {
		t.Errorf("stderr tail %q", tail)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-samples", "0"}, {"-n", "3", "-steps", "4"}, {"extra"}, {"-hold", "-1s"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	o, err := parseFlags(nil, io.Discard)
	if err != nil || o.N != 19000 || o.Budget != 1024 || o.Steps != 4 {
		t.Errorf("defaults %+v %v", o, err)
	}
}
