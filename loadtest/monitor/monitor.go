// Package monitor follows a load-test run while it goes: its clock (since
// the run's start), its phases, the samples taken every SampleEvery (the
// run's series), the CPU shares of the processes under test, and the
// progress shown on the terminal (a bar redrawn in place, or a line every
// few seconds), which is also the run's log writer so that log lines
// print above the bar.
//
// What a sample holds is the scenario's (Start's sample function); this
// package only keeps and shows them. It never starts a process.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
)

// Monitor is one run's. Goroutine-safe.
type Monitor struct {
	scenario    string
	sampleEvery time.Duration
	started     time.Time
	prog        *progress

	cpu        probe.CPUMeter // Start's sampling goroutine's
	storagePID int            // the CQL server's, when known

	mu     sync.Mutex
	phase  string
	total  int64
	cur    func(report.Sample) int64
	last   report.Sample
	series []report.Sample
}

// New starts following a run of cfg that started at started, showing its
// progress on log; storagePID is the CQL server's process (0: unknown).
func New(log io.Writer, cfg *scenario.Config, started time.Time, storagePID int) *Monitor {
	return &Monitor{scenario: cfg.Scenario, sampleEvery: cfg.SampleEvery, started: started, storagePID: storagePID,
		prog: newProgress(log, cfg.Progress, cfg.SampleEvery)}
}

// SetPhase names what the run is doing, for the series and the progress
// bar: total is the phase's goal and cur reads progress towards it.
func (m *Monitor) SetPhase(name string, total int64, cur func(report.Sample) int64) {
	m.mu.Lock()
	m.phase, m.total, m.cur = name, total, cur
	m.mu.Unlock()
	m.prog.phase(m.scenario + ":" + name)
}

// Phase is the current phase's name.
func (m *Monitor) Phase() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.phase
}

// Start samples every SampleEvery (sample) until the returned stop is
// called; each sample joins the series and the progress display.
func (m *Monitor) Start(sample func() report.Sample) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(m.sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-quit:
				return
			}
			s := sample()
			m.mu.Lock()
			m.series = append(m.series, s)
			m.last = s
			total, cur := m.total, m.cur
			m.mu.Unlock()
			var done int64
			if cur != nil {
				done = cur(s)
			}
			m.prog.update(s, done, total)
		}
	}()
	return func() { close(quit); <-done }
}

// ReadCPU is the CPU shares of the processes since the last reading (the
// CQL server's too, when known): for the sample function's goroutine.
func (m *Monitor) ReadCPU(engines, endpoint, workers []int) probe.CPU {
	return m.cpu.Read(engines, endpoint, workers, m.storagePID)
}

// AvgCPU averages the samples' CPU shares between two run times
// (seconds since the start).
func (m *Monitor) AvgCPU(from, to float64) probe.CPU {
	var c probe.CPU
	n := 0
	for _, s := range m.Series() {
		if s.T > from && s.T <= to+m.sampleEvery.Seconds()/2 {
			c.Machine += s.CPU.Machine
			c.Engines += s.CPU.Engines
			c.Endpoint += s.CPU.Endpoint
			c.Workers += s.CPU.Workers
			c.Storage += s.CPU.Storage
			n++
		}
	}
	if n == 0 {
		return probe.CPU{Storage: -1}
	}
	f := float64(n)
	c = probe.CPU{Machine: round1(c.Machine / f), Engines: round1(c.Engines / f), Endpoint: round1(c.Endpoint / f), Workers: round1(c.Workers / f),
		Storage: round1(c.Storage / f)}
	if m.storagePID == 0 {
		c.Storage = -1
	}
	return c
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// Now is seconds since the run started.
func (m *Monitor) Now() float64 { return time.Since(m.started).Seconds() }

// Started is when the run started.
func (m *Monitor) Started() time.Time { return m.started }

// Series is a copy of the samples so far.
func (m *Monitor) Series() []report.Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]report.Sample(nil), m.series...)
}

// Last is the latest sample.
func (m *Monitor) Last() report.Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Logf prints a line of the run's narrative (above the bar).
func (m *Monitor) Logf(format string, args ...any) {
	m.prog.println(fmt.Sprintf("loadtest: "+format, args...))
}

// Log is the run's log writer: what it writes prints above the bar.
func (m *Monitor) Log() io.Writer { return m.prog }

// StopProgress clears the bar for good. A nil Monitor (the run ended
// before it had one) does nothing.
func (m *Monitor) StopProgress() {
	if m == nil {
		return
	}
	m.prog.stop()
}

// Sleep waits d or until ctx ends (the run interrupted: ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StepError is the run's error for a step that failed with err: the
// step "interrupted" when the run was (context.Canceled).
func StepError(step string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("loadtest: %s: interrupted", step)
	}
	return fmt.Errorf("loadtest: %s: %w", step, err)
}
