package report

import (
	"math"
	"strings"
	"testing"
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
	h := &HoldReport{Points: []MemPoint{{Connections: 0}, {Connections: 100}}}
	h.Points[1].Engine.RSS = 100 * 1000
	h.Slopes()
	if float64(h.RSSPerConn) != 1000 {
		t.Errorf("two points: %v", h.RSSPerConn)
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
