package loadtest

import (
	"fmt"
	"sync"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds, 1 µs to 10 minutes, with three
// significant digits.
const (
	histLowest  = 1
	histHighest = 600_000_000
	histDigits  = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histLowest, histHighest, histDigits) }

// encodeHist is the compressed form a worker reports a histogram in.
func encodeHist(h *hdrhistogram.Histogram) []byte {
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

// mergeEncoded adds an encoded histogram into h.
func mergeEncoded(h *hdrhistogram.Histogram, b []byte) error {
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

func summarize(h *hdrhistogram.Histogram) Latency {
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

// recorder collects one kind of latency in a worker: an interval
// histogram the stats report drains every second, and the current stage's
// (notify's), which counts only pushes scheduled inside the stage's
// measured window. Goroutine-safe.
type recorder struct {
	mu       sync.Mutex
	interval *hdrhistogram.Histogram
	stage    *hdrhistogram.Histogram
	from, to int64 // the stage's measured window of scheduled times
}

func newRecorder() *recorder { return &recorder{interval: newHist(), stage: newHist()} }

// record adds one latency of a push scheduled at, observed at now (both
// nanoseconds on the worker's clock).
func (r *recorder) record(at, now int64) {
	us := max((now-at)/1000, histLowest)
	us = min(us, histHighest)
	r.mu.Lock()
	r.interval.RecordValue(us)
	if at >= r.from && at < r.to {
		r.stage.RecordValue(us)
	}
	r.mu.Unlock()
}

// takeInterval returns the encoded interval histogram and starts a new one.
func (r *recorder) takeInterval() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := encodeHist(r.interval)
	r.interval.Reset()
	return b
}

// startStage resets the stage histogram and its window.
func (r *recorder) startStage(from, to int64) {
	r.mu.Lock()
	r.stage.Reset()
	r.from, r.to = from, to
	r.mu.Unlock()
}

// takeStage returns the encoded stage histogram and closes the window.
func (r *recorder) takeStage() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := encodeHist(r.stage)
	r.stage.Reset()
	r.from, r.to = 0, 0
	return b
}
