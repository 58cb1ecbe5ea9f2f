package hist

import (
	"fmt"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds, 1 µs to 10 minutes, with three
// significant digits.
const (
	lowest  = 1
	highest = 600_000_000
	digits  = 3
)

// New is an empty latency histogram.
func New() *hdrhistogram.Histogram { return hdrhistogram.New(lowest, highest, digits) }

// Encode is the compressed form a worker reports a histogram in (nil for
// an empty one).
func Encode(h *hdrhistogram.Histogram) []byte {
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		// Encoding an in-memory histogram into a buffer cannot fail.
		panic(fmt.Sprintf("loadtest: encode histogram: %v", err))
	}
	return b
}

// Merge adds an encoded histogram into h.
func Merge(h *hdrhistogram.Histogram, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	d, err := hdrhistogram.Decode(b)
	if err != nil {
		return fmt.Errorf("loadtest: decode histogram: %w", err)
	}
	h.Merge(d)
	return nil
}

// Latency summarises a histogram, in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

// Summarize is h's percentiles, in milliseconds.
func Summarize(h *hdrhistogram.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	v := h.ValueAtPercentiles([]float64{50, 90, 99, 99.9})
	return Latency{
		Count: h.TotalCount(),
		P50:   ms(v[50]), P90: ms(v[90]), P99: ms(v[99]), P999: ms(v[99.9]),
		Max:  ms(h.Max()),
		Mean: h.Mean() / 1000,
	}
}

// Recorder collects one kind of latency in a worker: an interval
// histogram the stats report drains every second, and the current stage's
// (notify's), which counts only pushes scheduled inside the stage's
// measured window. Goroutine-safe.
type Recorder struct {
	mu       sync.Mutex
	interval *hdrhistogram.Histogram
	stage    *hdrhistogram.Histogram
	from, to int64 // the stage's measured window of scheduled times
}

// NewRecorder is a Recorder with nothing recorded.
func NewRecorder() *Recorder { return &Recorder{interval: New(), stage: New()} }

// Record adds one latency of a push scheduled at, observed at now (both
// readings of the worker's Clock).
func (r *Recorder) Record(at, now int64) {
	us := max((now-at)/1000, lowest)
	us = min(us, highest)
	r.mu.Lock()
	r.interval.RecordValue(us)
	if at >= r.from && at < r.to {
		r.stage.RecordValue(us)
	}
	r.mu.Unlock()
}

// TakeInterval returns the encoded interval histogram and starts a new one.
func (r *Recorder) TakeInterval() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := Encode(r.interval)
	r.interval.Reset()
	return b
}

// StartStage resets the stage histogram and its window of scheduled times
// [from, to).
func (r *Recorder) StartStage(from, to int64) {
	r.mu.Lock()
	r.stage.Reset()
	r.from, r.to = from, to
	r.mu.Unlock()
}

// TakeStage returns the encoded stage histogram and closes the window.
func (r *Recorder) TakeStage() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := Encode(r.stage)
	r.stage.Reset()
	r.from, r.to = 0, 0
	return b
}

// Clock is a worker's clock: nanoseconds since its epoch, monotonic. A
// push's scheduled time and its arrival are readings of the same Clock, so
// their difference is its latency.
type Clock struct{ epoch time.Time }

// NewClock starts a clock at 0.
func NewClock() Clock { return Clock{epoch: time.Now()} }

// Now is the time on the clock.
func (c Clock) Now() int64 { return int64(time.Since(c.epoch)) }

// Wall is a reading as wall time, for logs.
func (c Clock) Wall(at int64) string {
	return c.epoch.Add(time.Duration(at)).Format("15:04:05.000000")
}
