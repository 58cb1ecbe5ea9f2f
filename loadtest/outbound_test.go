package loadtest

import (
	"slices"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/sender/fcmfake"
	"github.com/autopush-go/autopush/loadtest/report"
)

// TestTransitSpread: calls at the gate's pace, some held up on their way
// to the provider: the arrivals bunch above the gate's bound over a
// second, and stay within it over a second and the measured spread.
func TestTransitSpread(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var calls, arrivals []time.Time
	for k := range 300 { // 100/s for 3 s
		c := t0.Add(time.Duration(k) * 10 * time.Millisecond)
		d := 2 * time.Millisecond
		if k < 5 || (k >= 100 && k < 105) {
			d = 45 * time.Millisecond // the first calls of a second held up
		}
		calls, arrivals = append(calls, c), append(arrivals, c.Add(d))
	}
	// A held-up call arrives after later ones: arrivals are in arrival
	// order, not call order.
	arrivals[3], arrivals[6] = arrivals[6], arrivals[3]
	s := transitSpread(calls, arrivals)
	if s < 1 || s > 45-2+1 {
		t.Fatalf("spread %.1f ms, want 1..44 (the delays' 43 and the log's 1 ms)", s)
	}
	rep := &report.SenderReport{ProviderRate: 100, TransitSpreadMs: s}
	rep.CallsMaxAnySecond = fcmfake.MaxInWindow(calls, time.Second)
	rep.MaxAnySecond = fcmfake.MaxInWindow(slices.SortedFunc(slices.Values(arrivals), time.Time.Compare), time.Second)
	if rep.CallsMaxAnySecond != 100 || rep.CallsMaxAnySecond > rep.GateLimit() {
		t.Errorf("calls: at most %d in a second, gate bound %d", rep.CallsMaxAnySecond, rep.GateLimit())
	}
	if rep.MaxAnySecond <= rep.GateLimit()-2 || rep.MaxAnySecond > rep.ArrivalLimit() {
		t.Errorf("arrivals: at most %d in a second; want above the gate's rate and burst %d, within %d", rep.MaxAnySecond, rep.GateLimit()-2, rep.ArrivalLimit())
	}
	if transitSpread(calls[1:], arrivals) != -1 || transitSpread(nil, nil) != -1 {
		t.Errorf("a call that never arrived gives a spread")
	}
}
