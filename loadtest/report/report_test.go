package report

import (
	"math"
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
