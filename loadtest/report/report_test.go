package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/scenario"
)

func TestSlope(t *testing.T) {
	xs := []float64{0, 100, 200, 300}
	ys := []float64{5000, 5000 + 900*100 + 3, 5000 + 900*200 - 3, 5000 + 900*300}
	if s := slope(xs, ys); math.Abs(s-900) > 0.1 {
		t.Errorf("slope %v", s)
	}
	if !math.IsNaN(slope([]float64{1, 1}, []float64{1, 2})) {
		t.Error("vertical slope is not NaN")
	}
	xs = []float64{0, 100, 200, 300, 400}
	ys = []float64{5000, 5000 + 812*100 + 7, 5000 + 812*200 - 7, 5000 + 812*300, 5000 + 812*400}
	if s := slope(xs, ys); math.Abs(s-812) > 0.1 {
		t.Errorf("slope %v, want 812", s)
	}
	if s := slope([]float64{3, 3}, []float64{1, 2}); !math.IsNaN(s) {
		t.Errorf("slope of a vertical line %v, want NaN", s)
	}
	h := &HoldReport{Points: []MemPoint{{Connections: 0}, {Connections: 100}}}
	h.Points[1].Engine.RSS = 100 * 1000
	h.Slopes()
	if float64(h.RSSPerConn) != 1000 {
		t.Errorf("two points: %v", h.RSSPerConn)
	}
}

// TestHoldBreakdown: every figure is fitted over the points after the
// first; the live heap over those that have it; a figure a point lacks
// has no slope.
func TestHoldBreakdown(t *testing.T) {
	h := &HoldReport{}
	for i, n := range []int{0, 100, 200, 300} {
		e := probe.EngineSample{Goroutines: 85, HeapInuse: 999, HeapResident: int64(1000 + 600*n), StackInuse: 50, HeapObjects: int64(5 * n),
			HeapLive: -1, GCs: i}
		e.RSS, e.Anon = int64(30000+900*n+i*7), int64(7000+900*n)
		if i >= 2 {
			e.HeapLive = int64(550 * n)
		}
		if i == 3 {
			e.HeapInuse = -1 // a failed scrape
		}
		h.Points = append(h.Points, MemPoint{Connections: n, Engine: e})
	}
	h.Slopes()
	if math.Abs(float64(h.AnonPerConn)-900) > 0.01 || math.Abs(float64(h.ResidentPerConn)-600) > 0.01 ||
		math.Abs(float64(h.OtherAnonPerConn)-300) > 0.01 || math.Abs(float64(h.ObjectsPerConn)-5) > 0.01 ||
		math.Abs(float64(h.HeapLivePerConn)-550) > 0.01 || !math.IsNaN(float64(h.HeapPerConn)) {
		t.Errorf("slopes %+v", h)
	}
	r := &Report{Hold: h, Config: scenario.Default(scenario.Hold), Cluster: ClusterInfo{Engines: 1}}
	var b strings.Builder
	r.printBreakdown(&b)
	for _, want := range []string{"Go heap resident KiB", "other anon 300 B", "live at last GC 550 B", "heap objects 5",
		"budget: rss 900 B per connection, at most 1,024 B: PASS; goroutines 85 -> 85, at most 8 more per engine: PASS"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("breakdown lacks %q:\n%s", want, b.String())
		}
	}
	r.Config.UAs = 5000
	h.Points[3].Engine.Goroutines = 85 + 9
	h.Slopes()
	if !h.GoroutinesGrew(1) || h.GoroutinesGrew(2) || !strings.Contains(r.budgetLine(), "not checked below 10,000 user agents; goroutines 85 -> 94, at most 8 more per engine: FAIL") {
		t.Errorf("budget %q", r.budgetLine())
	}
}

func TestChartSVG(t *testing.T) {
	c := chart{title: "t", xlabel: "x", logY: true, lines: []line{{name: "p99", color: "#000", pts: [][2]float64{{0, 0.5}, {10, 80}}}},
		marks: []mark{{5, "phase"}}, hline: 50, hlabel: "50 ms"}
	svg := c.svg()
	if !strings.HasPrefix(svg, "<svg") || strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") || !strings.Contains(svg, "polyline") {
		t.Errorf("svg:\n%s", svg)
	}
	if got := (chart{}).svg(); !strings.Contains(got, "no data") {
		t.Errorf("empty chart: %s", got)
	}
	for _, r := range [][2]float64{{0, 1}, {0, 200000}, {3.5, 3.50001}, {-5, 5}} {
		ticks := niceTicks(r[0], r[1])
		if len(ticks) < 2 || ticks[0] > r[0] || ticks[len(ticks)-1] < r[1]*0.999 || len(ticks) > 12 {
			t.Errorf("ticks of %v: %v", r, ticks)
		}
	}
}

func TestNum(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 200000: "200,000", -1234567: "-1,234,567", 12.6: "13"} {
		if got := Num(in); got != want {
			t.Errorf("num(%v) = %s, want %s", in, got, want)
		}
	}
}

// A sender run judges the pace only when pushes were accepted faster than
// it: a flood run whose flooder meets its quota feeds the provider less
// than the pace, and that is not the sender falling short.
func TestPaceJudgedOnlyWithABacklog(t *testing.T) {
	short := func(achieved float64) bool {
		s := &SenderReport{Pace: 250, ProviderRate: 300, Achieved: achieved, Measured: 157.5, RateError: 157.5/250 - 1,
			Accepted: 10, Sent: 10, Received: 10, Distinct: 10, Scheduled: 10, TransitSpreadMs: -1}
		for _, p := range s.problems(0.01) {
			if strings.Contains(p, "from the configured pace") {
				return true
			}
		}
		return false
	}
	if !short(510) {
		t.Error("accepted at 510/s, provider fed 157.5/s of a 250/s pace: not reported")
	}
	if short(215) {
		t.Error("accepted at 215/s (below the 250/s pace): the provider's 157.5/s reported as the sender's shortfall")
	}
}

// TestKernelSlopes: the kernel's figures are fitted per connection as the
// engines' are (over the points after the first); the slab caches that
// grew at least CacheSlopeMin bytes a connection are listed, largest
// first, and a cache a point lacks is not; points without the kernel's
// figures give none.
func TestKernelSlopes(t *testing.T) {
	h := &HoldReport{}
	for i, n := range []int64{0, 1000, 2000, 3000} {
		k := probe.Kernel{MemTotal: 24 << 30, MemFree: 20<<30 - 9000*n, Slab: 600<<20 + 7000*n + int64(i%2)*50,
			SReclaimable: 500<<20 + 2000*n, SUnreclaim: 100<<20 + 5000*n, KernelStack: 4 << 20, PageTables: 6<<20 + 100*n,
			TCPInuse: 100 + 2*n, TCPMem: 52 << 12,
			Slabs: map[string]probe.SlabCache{"TCP": {Objects: 118 + 2*n, Size: 2368}, "filp": {Objects: 1200 + 2*n, Size: 192},
				"kmalloc-8": {Objects: 2048 + n, Size: 8}, "noise": {Objects: 500, Size: 64}}}
		if i > 0 {
			k.Slabs["tw_sock_TCP"] = probe.SlabCache{Objects: 10 + 5*n, Size: 256}
		}
		h.Points = append(h.Points, MemPoint{Connections: int(n), Kernel: k})
		h.Points[i].Engine.RSS, h.Points[i].Engine.Anon = 1000*n, 1000*n
	}
	delete(h.Points[2].Kernel.Slabs, "tw_sock_TCP")
	h.Slopes()
	k := h.Kernel
	near := func(s Slope, want float64) bool { return math.Abs(float64(s)-want) < 0.1 }
	if k == nil || !near(k.Slab, 7000) || !near(k.SReclaimable, 2000) || !near(k.SUnreclaim, 5000) || !near(k.KernelStack, 0) ||
		!near(k.PageTables, 100) || !near(k.TCPMem, 0) || !near(k.Total, 7100) || !near(k.Used, 9000) || !near(k.TCPSockets, 2) {
		t.Fatalf("kernel slopes %+v", k)
	}
	if len(k.Caches) != 2 || k.Caches[0].Name != "TCP" || !near(k.Caches[0].Objects, 2) || !near(k.Caches[0].Bytes, 4736) ||
		k.Caches[1].Name != "filp" || !near(k.Caches[1].Bytes, 384) {
		t.Errorf("caches %+v; want TCP then filp (kmalloc-8 8 B, noise flat, tw_sock_TCP missing a point)", k.Caches)
	}
	r := &Report{Hold: h, Config: scenario.Default(scenario.Hold), Cluster: ClusterInfo{Engines: 1}}
	var b strings.Builder
	r.printKernel(&b)
	for _, want := range []string{"kernel per connection (both ends are on this machine: the worker's socket and the engine's): 7,100 B = slab 7,000 B (reclaimable 2,000, unreclaimable 5,000)",
		"tcp sockets 2.00 per connection", "TCP 2.00 × = 4,736 B, filp 2.00 × = 384 B", "machine used 9,000 B"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	h.Points[1].Kernel = probe.Kernel{}
	if h.Slopes(); h.Kernel != nil {
		t.Errorf("a point without the kernel's figures: %+v", h.Kernel)
	}
}

// Write saves the latency ladder and the memory charts as SVG files a
// page can show (docs/benchmarks.md): each a whole SVG document with its
// own white ground, the same chart the HTML page holds; a run with
// neither writes none.
func TestWriteFigures(t *testing.T) {
	n := &NotifyReport{P99Limit: 50}
	for i, rate := range []float64{1000, 2000, 4000} {
		s := Stage{Offered: rate}
		s.Latency.P50, s.Latency.P99, s.Latency.Max = float64(2+i), float64(10*(i+1)), float64(40*(i+1))
		n.Stages = append(n.Stages, s)
	}
	h := &HoldReport{}
	for _, c := range []int{0, 1000, 2000, 3000} {
		p := MemPoint{Connections: c}
		p.Engine.RSS, p.Engine.Anon = int64(30<<20+900*c), int64(7<<20+880*c)
		h.Points = append(h.Points, p)
	}
	h.Slopes()
	dir := t.TempDir()
	r := &Report{Scenario: "ladder", Notify: n, Hold: h, Config: scenario.Default(scenario.Hold), Pass: true}
	files, err := r.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "ladder.html"))
	if err != nil {
		t.Fatal(err)
	}
	var svgs []string
	for _, f := range files {
		if strings.HasSuffix(f, ".svg") {
			svgs = append(svgs, filepath.Base(f))
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				XMLName xml.Name
				Rects   []struct {
					Fill string `xml:"fill,attr"`
				} `xml:"rect"`
			}
			if err := xml.Unmarshal(b, &doc); err != nil || doc.XMLName.Local != "svg" || len(doc.Rects) == 0 || doc.Rects[0].Fill != "#fff" {
				t.Errorf("%s: not an SVG document on a white ground (%v): %.200s", f, err, b)
			}
			if !bytes.Contains(page, b) {
				t.Errorf("%s is not the chart the page shows", f)
			}
		}
	}
	var back Report
	if b, err := os.ReadFile(filepath.Join(dir, "ladder.json")); err != nil || json.Unmarshal(b, &back) != nil || !slices.Equal(back.Files, files) {
		t.Errorf("the JSON report lists %v, Write returned %v (%v)", back.Files, files, err)
	}
	want := []string{"ladder-latency-by-rate.svg", "ladder-memory.svg", "ladder-memory-per-connection.svg"}
	if !slices.Equal(svgs, want) {
		t.Errorf("figures written: %v, want %v", svgs, want)
	}
	r = &Report{Scenario: "notify", Config: scenario.Default(scenario.Hold), Pass: true}
	if files, err := r.Write(t.TempDir()); err != nil || len(files) != 2 {
		t.Errorf("a run with no ladder and no hold: %v %v, want its JSON and HTML only", files, err)
	}
}
