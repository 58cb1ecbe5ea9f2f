// Command membench measures the connection node's memory per idle
// connection: it starts the autoconnect binary as a child process on the
// embedded store, opens N websocket connections to it from this process
// (hello plus one register each, then idle), and prints the engine's
// user-space RSS per connection and its goroutine count.
//
//	go run ./engine/cmd/membench -n 19000
//
// Budget (the engine's memory issue): at most 1 KiB of RSS per connection,
// and a goroutine count that does not grow with connections. The figure is
// the least-squares slope of RSS over the measurement points (0, N/steps,
// ..., N connections), so the process's fixed cost does not count. The
// exit status is 0 within budget, 1 over it, 2 when the benchmark itself
// failed.
//
// Where the numbers come from, all read from outside the engine:
//   - RSS: /proc/<pid>/smaps_rollup (Rss, and Anonymous, the heap and
//     other private memory; the rest is file-backed, mostly the binary);
//   - goroutines: go_goroutines on the engine's /metrics when it exports
//     it, else the runtime's GODEBUG=scheddetail=1 dump on the child's
//     stderr (live goroutines, runtime system goroutines included);
//   - live heap: the runtime's GODEBUG=gctrace=1 line of the last GC
//     (whole MB; Go collects only when it allocates, and at least every two
//     minutes).
//
// AUTOCONNECT__* variables in membench's environment override the
// engine's settings (for instance AUTOCONNECT__STORAGE=scylla with
// AUTOCONNECT__CQL_HOSTS, AUTOCONNECT__CQL_KEYSPACE and
// AUTOCONNECT__CQL_CONSISTENCY=ONE, to keep the embedded store's memtables
// out of the measured process).
//
// The Go runtime cannot be made to collect from outside, so each point is
// measured after -hold of idleness, as the median of -samples samples one
// second apart.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"
)

// Point is the engine measured at one number of connections.
type Point struct {
	Connections int     `json:"connections"`
	RSS         int64   `json:"rss_bytes"`       // median of the samples
	Anon        int64   `json:"anon_bytes"`      // Anonymous, median
	File        int64   `json:"file_bytes"`      // RSS - Anonymous
	RSSSamples  []int64 `json:"rss_samples"`     // every sample, bytes
	HeapLive    int64   `json:"heap_live_bytes"` // marked live by the last GC (gctrace, whole MB); -1 before the first
	GCs         int     `json:"gcs"`             // GC cycles so far
	Goroutines  int     `json:"goroutines"`
	// From the engine's /metrics (go_memstats_*) when GoStats; the last
	// sample's. OtherAnon is approximate: /metrics and smaps_rollup are
	// not read at the same instant.
	GoStats      bool  `json:"go_stats"`
	HeapInuse    int64 `json:"heap_inuse_bytes"`    // spans in use: live objects and garbage not yet collected
	HeapResident int64 `json:"heap_resident_bytes"` // heap_inuse + heap_idle - heap_released: the Go heap's share of RSS
	HeapObjects  int64 `json:"heap_objects"`        // allocated objects
	StackInuse   int64 `json:"stack_inuse_bytes"`   // goroutine stacks
	OtherAnon    int64 `json:"other_anon_bytes"`    // Anon - HeapResident - StackInuse: cgo allocations (Pebble's memtables, block cache), runtime metadata
}

// Result is what one run measured.
type Result struct {
	Connections    int     `json:"connections"`
	Points         []Point `json:"points"`
	RSSSlope       float64 `json:"rss_slope_bytes_per_conn"`
	AnonSlope      float64 `json:"anon_slope_bytes_per_conn"`
	HeapSlope      float64 `json:"heap_live_slope_bytes_per_conn"` // NaN without GC data
	InuseSlope     float64 `json:"heap_inuse_slope_bytes_per_conn"`
	ResidentSlope  float64 `json:"heap_resident_slope_bytes_per_conn"`
	OtherAnonSlope float64 `json:"other_anon_slope_bytes_per_conn"`
	ObjectsSlope   float64 `json:"heap_objects_slope_per_conn"`
	GOGC           string  `json:"engine_gogc"`

	GoroutinesStart  int       `json:"goroutines_start"`
	GoroutinesEnd    int       `json:"goroutines_end"`
	GoroutineSource  string    `json:"goroutine_source"`
	Budget           int       `json:"budget"`
	GoroutineSlack   int       `json:"goroutine_slack"`
	OverBudget       bool      `json:"over_budget"`
	GoroutinesGrew   bool      `json:"goroutines_grew"`
	Pass             bool      `json:"pass"`
	SetupSeconds     float64   `json:"setup_seconds"` // opening all N connections
	Hold             string    `json:"hold"`
	Samples          int       `json:"samples"`
	Warmup           int       `json:"warmup"`
	EngineMaxConns   int       `json:"engine_max_connections"`
	EngineEventLoops string    `json:"engine_event_loops"`
	Autoconnect      string    `json:"autoconnect"`
	GoVersion        string    `json:"go_version"`
	Started          time.Time `json:"started"`
}

// MarshalJSON writes a NaN slope (no data) as null.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	num := func(f float64) *float64 {
		if math.IsNaN(f) {
			return nil
		}
		return &f
	}
	return json.Marshal(struct {
		plain
		HeapSlope      *float64 `json:"heap_live_slope_bytes_per_conn"`
		InuseSlope     *float64 `json:"heap_inuse_slope_bytes_per_conn"`
		ResidentSlope  *float64 `json:"heap_resident_slope_bytes_per_conn"`
		OtherAnonSlope *float64 `json:"other_anon_slope_bytes_per_conn"`
		ObjectsSlope   *float64 `json:"heap_objects_slope_per_conn"`
	}{plain(r), num(r.HeapSlope), num(r.InuseSlope), num(r.ResidentSlope), num(r.OtherAnonSlope), num(r.ObjectsSlope)})
}

// slope is the least-squares slope of ys over xs; NaN when xs are all
// equal.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / d
}

func printTable(w io.Writer, r *Result) {
	fmt.Fprintf(w, "membench: %d idle connections (hello + 1 register each), engine %s\n", r.Connections, r.Autoconnect)
	fmt.Fprintf(w, "setup %.1fs, warm-up %d, hold %s, %d samples per point, engine GOGC %s, goroutines from %s\n\n",
		r.SetupSeconds, r.Warmup, r.Hold, r.Samples, r.GOGC, r.GoroutineSource)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "connections\trss KiB\tanon KiB\tfile KiB\tGo heap resident KiB\theap in use KiB\tlive heap MiB\tstacks KiB\tother anon KiB\theap objects\tGCs\tgoroutines\t")
	for _, p := range r.Points {
		opt := func(v int64, shift uint) string {
			if !p.GoStats {
				return "-"
			}
			return strconv.FormatInt(v>>shift, 10)
		}
		live := "-"
		if p.HeapLive >= 0 {
			live = strconv.FormatInt(p.HeapLive>>20, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t\n", p.Connections, p.RSS>>10, p.Anon>>10, p.File>>10,
			opt(p.HeapResident, 10), opt(p.HeapInuse, 10), live, opt(p.StackInuse, 10), opt(p.OtherAnon, 10),
			opt(p.HeapObjects, 0), p.GCs, p.Goroutines)
	}
	tw.Flush()
	f := func(v float64) string {
		if math.IsNaN(v) {
			return "n/a"
		}
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	fmt.Fprintf(w, "\nslopes (least squares over the points), per connection:\n"+
		"  rss %s B = anon %s B (+ file-backed)\n"+
		"  anon: Go heap resident %s B (in use %s B, live at last GC %s B), other anon %s B\n"+
		"  heap objects %s\n",
		f(r.RSSSlope), f(r.AnonSlope), f(r.ResidentSlope), f(r.InuseSlope), f(r.HeapSlope), f(r.OtherAnonSlope), f(r.ObjectsSlope))
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
		if r.OverBudget {
			verdict += " rss_over_budget"
		}
		if r.GoroutinesGrew {
			verdict += " goroutines_grew"
		}
	}
	fmt.Fprintf(w, "RESULT connections=%d rss_slope_bytes_per_conn=%.0f anon_slope_bytes_per_conn=%.0f goroutines_start=%d goroutines_end=%d budget=%d %s\n",
		r.Connections, r.RSSSlope, r.AnonSlope, r.GoroutinesStart, r.GoroutinesEnd, r.Budget, verdict)
}
