package report

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// writeHTML draws the report as one self-contained page: inline SVG charts
// (no scripts, no external files), figs (figures(r), also written as
// files) among them, and the text summary.
func writeHTML(w io.Writer, r *Report, figs []figure) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<!doctype html><html><head><meta charset="utf-8"><title>loadtest %s</title><style>
body{font:14px system-ui,sans-serif;margin:24px;max-width:1100px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
pre{background:#f6f6f6;padding:12px;overflow-x:auto;font-size:12px}
svg{background:#fff;border:1px solid #ddd;margin:6px 0}
.pass{color:#080}.fail{color:#b00}
</style></head><body>`, html.EscapeString(r.Scenario))
	verdict := `<span class="pass">PASS</span>`
	if !r.Pass {
		verdict = `<span class="fail">FAIL</span>: ` + html.EscapeString(strings.Join(r.Problems, "; "))
	}
	fmt.Fprintf(&b, "<h1>loadtest %s — %s</h1>\n<p><code>%s</code><br>%s</p>\n", html.EscapeString(r.Scenario), verdict,
		html.EscapeString(r.Command), html.EscapeString(r.Started.Format("2006-01-02 15:04:05 MST")))
	var sum bytes.Buffer
	files := r.Files
	r.Files = nil
	r.PrintSummary(&sum)
	r.Files = files
	fmt.Fprintf(&b, "<pre>%s</pre>\n", html.EscapeString(strings.TrimSpace(sum.String())))

	if c := latencyOverTime(r); c != "" {
		b.WriteString("<h2>Delivery latency over time (scheduled send to arrival, per interval)</h2>\n" + c)
	}
	for _, f := range figs {
		b.WriteString("<h2>" + html.EscapeString(f.heading) + "</h2>\n" + f.svg)
	}
	if r.Sender != nil {
		b.WriteString(senderCharts(r))
	} else {
		b.WriteString("<h2>Connections, engine memory and goroutines over time</h2>\n" + connsOverTime(r))
	}
	if hasPushes(r) {
		b.WriteString("<h2>Push throughput over time</h2>\n" + throughputOverTime(r))
	}
	b.WriteString("</body></html>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// figure is a chart a reader may want on its own (docs/benchmarks.md
// shows them): Write saves each as <scenario>-<name>.svg beside the page.
type figure struct {
	name, heading, svg string
}

// figures are the run's latency ladder and its memory against
// connections, when it has them.
func figures(r *Report) []figure {
	var fs []figure
	if r.Notify != nil && len(r.Notify.Stages) > 0 {
		fs = append(fs, figure{"latency-by-rate", "Latency against offered rate", latencyByRate(r.Notify)})
	}
	if r.Hold != nil && len(r.Hold.Points) > 1 {
		fs = append(fs,
			figure{"memory", "Engine memory against connections (measured points and the fitted slope)", memoryAgainstConns(r.Hold)},
			figure{"memory-per-connection", "Engine memory per connection against connections", perConnAgainstConns(r.Hold)})
	}
	return fs
}

func hasPushes(r *Report) bool {
	for _, s := range r.Series {
		if s.Sent > 0 {
			return true
		}
	}
	return false
}

// line is one plotted series.
type line struct {
	name  string
	color string
	pts   [][2]float64
	dots  bool // points, not a line
}

var palette = []string{"#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd", "#8c564b"}

func latencyOverTime(r *Report) string {
	names := []string{"p50", "p90", "p99", "p99.9", "max"}
	ls := make([]line, len(names))
	for i, n := range names {
		ls[i] = line{name: n, color: palette[i]}
	}
	for _, s := range r.Series {
		if s.Latency == nil {
			continue
		}
		for i, v := range []float64{s.Latency.P50, s.Latency.P90, s.Latency.P99, s.Latency.P999, s.Latency.Max} {
			ls[i].pts = append(ls[i].pts, [2]float64{s.T, math.Max(v, 0.01)})
		}
	}
	if len(ls[0].pts) == 0 {
		return ""
	}
	return chart{title: "latency, ms (log scale)", xlabel: "seconds", logY: true, lines: ls, marks: phaseMarks(r)}.svg()
}

func latencyByRate(n *NotifyReport) string {
	names := []string{"p50", "p90", "p99", "p99.9", "max"}
	ls := make([]line, len(names))
	for i, nm := range names {
		ls[i] = line{name: nm, color: palette[i]}
	}
	for _, s := range n.Stages {
		for i, v := range []float64{s.Latency.P50, s.Latency.P90, s.Latency.P99, s.Latency.P999, s.Latency.Max} {
			ls[i].pts = append(ls[i].pts, [2]float64{s.Offered, math.Max(v, 0.01)})
		}
	}
	c := chart{title: "latency, ms (log scale)", xlabel: "offered pushes per second", logY: true, lines: ls}
	if n.P99Limit > 0 {
		c.hline, c.hlabel = n.P99Limit, fmt.Sprintf("%.0f ms", n.P99Limit)
	}
	return c.svg()
}

func memoryAgainstConns(h *HoldReport) string {
	meas := line{name: "engines' RSS, MiB", color: palette[0], dots: true}
	anon := line{name: "engines' anon RSS, MiB", color: palette[1], dots: true}
	for _, p := range h.Points {
		meas.pts = append(meas.pts, [2]float64{float64(p.Connections), float64(p.Engine.RSS) / (1 << 20)})
		anon.pts = append(anon.pts, [2]float64{float64(p.Connections), float64(p.Engine.Anon) / (1 << 20)})
	}
	ls := []line{meas, anon}
	if s := float64(h.RSSPerConn); !math.IsNaN(s) {
		last := h.Points[len(h.Points)-1]
		y1 := float64(last.Engine.RSS) / (1 << 20)
		x0 := float64(h.Points[0].Connections)
		y0 := y1 - s*(float64(last.Connections)-x0)/(1<<20)
		ls = append(ls, line{name: fmt.Sprintf("slope %.0f B/conn", s), color: palette[3],
			pts: [][2]float64{{x0, y0}, {float64(last.Connections), y1}}})
	}
	return chart{title: "MiB", xlabel: "connections", lines: ls}.svg()
}

func perConnAgainstConns(h *HoldReport) string {
	avg := line{name: "engines' RSS / connections (fixed cost included)", color: palette[0], dots: true}
	for _, p := range h.Points {
		if p.Connections > 0 {
			avg.pts = append(avg.pts, [2]float64{float64(p.Connections), float64(p.Engine.RSS) / float64(p.Connections)})
		}
	}
	ls := []line{avg}
	if s := float64(h.RSSPerConn); !math.IsNaN(s) && len(avg.pts) > 0 {
		x0, x1 := avg.pts[0][0], avg.pts[len(avg.pts)-1][0]
		ls = append(ls, line{name: fmt.Sprintf("marginal (slope) %.0f B", s), color: palette[3], pts: [][2]float64{{x0, s}, {x1, s}}})
	}
	c := chart{title: "bytes per connection", xlabel: "connections", lines: ls, hline: 1024, hlabel: "budget 1 KiB"}
	return c.svg()
}

func connsOverTime(r *Report) string {
	conns := line{name: "user agents connected", color: palette[0]}
	rss := line{name: "engines' RSS, MiB", color: palette[2]}
	for _, s := range r.Series {
		conns.pts = append(conns.pts, [2]float64{s.T, float64(s.Connected)})
		rss.pts = append(rss.pts, [2]float64{s.T, float64(s.Engine.RSS) / (1 << 20)})
	}
	gor := line{name: "engines' goroutines", color: palette[4]}
	for _, s := range r.Series {
		if s.Engine.Goroutines >= 0 {
			gor.pts = append(gor.pts, [2]float64{s.T, float64(s.Engine.Goroutines)})
		}
	}
	return chart{title: "user agents connected", xlabel: "seconds", lines: []line{conns}, marks: phaseMarks(r)}.svg() +
		chart{title: "engines' RSS, MiB", xlabel: "seconds", lines: []line{rss}, marks: phaseMarks(r)}.svg() +
		chart{title: "engines' goroutines (all engines)", xlabel: "seconds", lines: []line{gor}, marks: phaseMarks(r)}.svg()
}

func throughputOverTime(r *Report) string {
	sent := line{name: "POSTs started/s", color: palette[0]}
	acc := line{name: "accepted/s", color: palette[1]}
	recv := line{name: "received/s", color: palette[2]}
	for i := 1; i < len(r.Series); i++ {
		a, b := r.Series[i-1], r.Series[i]
		dt := b.T - a.T
		if dt <= 0 {
			continue
		}
		sent.pts = append(sent.pts, [2]float64{b.T, float64(b.Sent-a.Sent) / dt})
		acc.pts = append(acc.pts, [2]float64{b.T, float64(b.Accepted-a.Accepted) / dt})
		recv.pts = append(recv.pts, [2]float64{b.T, float64(b.Received-a.Received) / dt})
	}
	return chart{title: "per second", xlabel: "seconds", lines: []line{sent, acc, recv}, marks: phaseMarks(r)}.svg()
}

// mark is a labelled vertical line (a phase starting).
type mark struct {
	x     float64
	label string
}

func phaseMarks(r *Report) []mark {
	var ms []mark
	prev := ""
	for _, s := range r.Series {
		if s.Phase != prev {
			ms = append(ms, mark{s.T, s.Phase})
			prev = s.Phase
		}
	}
	return ms
}

// chart is one SVG line chart.
type chart struct {
	title, xlabel string
	logY          bool
	lines         []line
	marks         []mark
	hline         float64 // a horizontal reference line when > 0
	hlabel        string
}

const (
	chartW, chartH         = 1000, 320
	padL, padR, padT, padB = 70, 20, 30, 60
)

func (c chart) svg() string {
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, l := range c.lines {
		for _, p := range l.pts {
			xmin, xmax = math.Min(xmin, p[0]), math.Max(xmax, p[0])
			ymin, ymax = math.Min(ymin, p[1]), math.Max(ymax, p[1])
		}
	}
	if math.IsInf(xmin, 0) {
		return "<p>(no data)</p>\n"
	}
	if c.hline > 0 {
		ymax = math.Max(ymax, c.hline*1.1)
	}
	if !c.logY {
		ymin = math.Min(ymin, 0)
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	var ylo, yhi float64
	var yticks []float64
	if c.logY {
		ylo, yhi = math.Floor(math.Log10(ymin)), math.Ceil(math.Log10(ymax))
		if yhi == ylo {
			yhi++
		}
		for e := ylo; e <= yhi; e++ {
			for _, m := range []float64{1, 2, 5} {
				if v := m * math.Pow(10, e); math.Log10(v) <= yhi {
					yticks = append(yticks, v)
				}
			}
		}
	} else {
		yticks = niceTicks(ymin, ymax)
		ylo, yhi = yticks[0], yticks[len(yticks)-1]
	}
	xticks := niceTicks(xmin, xmax)
	xlo, xhi := xticks[0], xticks[len(xticks)-1]
	px := func(x float64) float64 { return padL + (x-xlo)/(xhi-xlo)*(chartW-padL-padR) }
	py := func(y float64) float64 {
		if c.logY {
			y = math.Log10(math.Max(y, 1e-9))
		}
		return chartH - padB - (y-ylo)/(yhi-ylo)*(chartH-padT-padB)
	}
	var b strings.Builder
	// The white ground and the font are the chart's own, so a chart
	// written as a file (figures) reads the same on any page.
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-size="11" font-family="sans-serif">`+
		`<rect width="100%%" height="100%%" fill="#fff"/>`, chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">%s</text>`, padL, html.EscapeString(c.title))
	for _, t := range yticks {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`,
			padL, chartW-padR, y, y, padL-6, y+4, tickLabel(t))
	}
	for _, t := range xticks {
		x := px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`,
			x, x, padT, chartH-padB, x, chartH-padB+16, tickLabel(t))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, (chartW+padL)/2, chartH-padB+32, html.EscapeString(c.xlabel))
	for _, m := range c.marks {
		x := px(m.x)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#bbb" stroke-dasharray="3,3"/><text x="%.1f" y="%d" fill="#888" transform="rotate(-90 %.1f %d)">%s</text>`,
			x, x, padT, chartH-padB, x+3, padT+4, x+3, padT+4, html.EscapeString(m.label))
	}
	if c.hline > 0 {
		y := py(c.hline)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#b00" stroke-dasharray="6,4"/><text x="%d" y="%.1f" fill="#b00" text-anchor="end">%s</text>`,
			padL, chartW-padR, y, y, chartW-padR-4, y-4, html.EscapeString(c.hlabel))
	}
	lx := padL
	for _, l := range c.lines {
		if l.dots {
			for _, p := range l.pts {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`, px(p[0]), py(p[1]), l.color)
			}
		} else if len(l.pts) > 0 {
			b.WriteString(`<polyline fill="none" stroke-width="1.6" stroke="` + l.color + `" points="`)
			for _, p := range l.pts {
				fmt.Fprintf(&b, "%.1f,%.1f ", px(p[0]), py(p[1]))
			}
			b.WriteString(`"/>`)
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`,
			lx, chartH-18, l.color, lx+14, chartH-9, html.EscapeString(l.name))
		lx += 34 + 6*len(l.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceTicks spans [lo, hi] with about 6 round steps.
func niceTicks(lo, hi float64) []float64 {
	span := hi - lo
	step := math.Pow(10, math.Floor(math.Log10(span/6)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= 7 {
			step *= m
			break
		}
	}
	start := math.Floor(lo/step) * step
	var out []float64
	for v := start; v < hi+step*0.999; v += step {
		out = append(out, v)
	}
	if len(out) < 2 {
		out = append(out, start+step)
	}
	return out
}

func tickLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%gk", v/1e3)
	case a >= 1 || a == 0:
		return fmt.Sprintf("%g", math.Round(v*100)/100)
	}
	return fmt.Sprintf("%.2g", v)
}
