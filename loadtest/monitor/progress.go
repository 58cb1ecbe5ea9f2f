package monitor

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/autopush-go/autopush/loadtest/report"
)

// progress shows the run while it goes: on a terminal a bar redrawn in
// place, otherwise a line every few seconds. It is also the run's log
// writer, so log lines print above the bar instead of through it.
// Goroutine-safe.
type progress struct {
	w       io.Writer
	mode    string // bar, lines or off
	every   time.Duration
	mu      sync.Mutex
	name    string
	started time.Time
	shown   bool // a bar is on the current line
	lastOut time.Time
	prev    report.Sample
}

const barWidth = 24

func newProgress(w io.Writer, mode string, sampleEvery time.Duration) *progress {
	if mode == "auto" {
		mode = "lines"
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				mode = "bar"
			}
		}
	}
	return &progress{w: w, mode: mode, every: max(5*time.Second, sampleEvery), started: time.Now()}
}

// phase starts a new phase: the bar restarts.
func (p *progress) phase(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	p.name = name
	p.lastOut = time.Time{}
}

// update draws the latest sample; done of total (total 0: no bar).
func (p *progress) update(s report.Sample, done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == "off" {
		return
	}
	line := p.render(s, done, total)
	p.prev = s
	switch p.mode {
	case "bar":
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
		p.shown = true
	case "lines":
		if time.Since(p.lastOut) >= p.every {
			fmt.Fprintln(p.w, line)
			p.lastOut = time.Now()
		}
	}
}

func (p *progress) render(s report.Sample, done, total int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] ", p.name)
	if total > 0 {
		frac := min(max(float64(done)/float64(total), 0), 1)
		full := int(frac * barWidth)
		b.WriteString(strings.Repeat("█", full) + strings.Repeat("░", barWidth-full))
		fmt.Fprintf(&b, " %3.0f%% %s/%s", frac*100, report.Num(done), report.Num(total))
	}
	dt := s.T - p.prev.T
	rate := func(now, before int64) string {
		if dt <= 0 || p.prev.T == 0 {
			return "-"
		}
		return report.Num(float64(now-before) / dt)
	}
	sender := s.Engine.RSS == 0 && s.EndpointRSS > 0 // the sender scenario: no engines, no user agents
	if !sender {
		fmt.Fprintf(&b, " | ua %s", report.Num(s.Connected))
	}
	if s.Connects > 0 {
		fmt.Fprintf(&b, " +%s/s", rate(s.Connects, p.prev.Connects))
	}
	if s.ConnectFail > 0 || s.Dropped > 0 {
		fmt.Fprintf(&b, " fail %s drop %s", report.Num(s.ConnectFail), report.Num(s.Dropped))
	}
	if s.Sent > 0 {
		fmt.Fprintf(&b, " | push %s/s recv %s/s err %s", rate(s.Sent, p.prev.Sent), rate(s.Received, p.prev.Received), report.Num(s.PostErrors))
	}
	if s.Latency != nil {
		fmt.Fprintf(&b, " p99 %.1fms", s.Latency.P99)
	}
	if sender {
		if s.Response != nil {
			fmt.Fprintf(&b, " POST p99 %.1fms", s.Response.P99)
		}
		fmt.Fprintf(&b, " | endpoint %.0f MiB | %s", float64(s.EndpointRSS)/(1<<20), time.Since(p.started).Round(time.Second))
		return b.String()
	}
	fmt.Fprintf(&b, " | engines %.0f MiB", float64(s.Engine.RSS)/(1<<20))
	if s.Connected > 0 {
		fmt.Fprintf(&b, " (%.0f B/ua)", float64(s.Engine.RSS)/float64(s.Connected))
	}
	el := time.Since(p.started).Round(time.Second)
	fmt.Fprintf(&b, " | %s", el)
	return b.String()
}

// Write prints log lines above the bar.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	return p.w.Write(b)
}

func (p *progress) println(s string) { p.Write([]byte(s + "\n")) }

func (p *progress) clearLocked() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// stop clears the bar for good.
func (p *progress) stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	p.mode = "off"
}
