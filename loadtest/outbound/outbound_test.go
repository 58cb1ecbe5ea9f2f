package outbound

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
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
	// A held-up call arrives after later ones: the k-th arrival is not
	// the k-th call's.
	arrivals = slices.SortedFunc(slices.Values(arrivals), time.Time.Compare)
	s := transitSpread(calls, arrivals)
	if s < 1 || s > 45-2+1 {
		t.Fatalf("spread %.1f ms, want 1..44 (the delays' 43 and the log's 1 ms)", s)
	}
	rep := &report.SenderReport{ProviderRate: 110, Pace: 100, TransitSpreadMs: s}
	rep.CallsMaxAnySecond = fcmfake.MaxInWindow(calls, time.Second)
	rep.MaxAnySecond = fcmfake.MaxInWindow(arrivals, time.Second)
	if rep.CallsMaxAnySecond != 100 || rep.CallsMaxAnySecond > rep.GateLimit() {
		t.Errorf("calls: at most %d in a second, gate bound %d", rep.CallsMaxAnySecond, rep.GateLimit())
	}
	if rep.MaxAnySecond <= rep.GateLimit()-2 || rep.MaxAnySecond > rep.ArrivalLimit() {
		t.Errorf("arrivals: at most %d in a second; want above the gate's pace and burst %d, within %d", rep.MaxAnySecond, rep.GateLimit()-2, rep.ArrivalLimit())
	}
	// The fakes may log receipts handled at once out of order: the
	// report reads them in time order.
	log := make([]receipt, len(arrivals))
	for i, at := range arrivals {
		log[i] = receipt{at: at, key: strconv.Itoa(i)}
	}
	log[0], log[len(log)-1] = log[len(log)-1], log[0]
	got := &report.SenderReport{ProviderRate: 110, Pace: 100}
	providerSide(got, log, map[string]int{}, calls, time.Second, time.Second)
	if got.MaxAnySecond != rep.MaxAnySecond || got.CallsMaxAnySecond != rep.CallsMaxAnySecond || got.TransitSpreadMs != s {
		t.Errorf("from a log out of order: at most %d received, %d called in a second, spread %.1f ms; want %d, %d, %.1f",
			got.MaxAnySecond, got.CallsMaxAnySecond, got.TransitSpreadMs, rep.MaxAnySecond, rep.CallsMaxAnySecond, s)
	}
	if transitSpread(calls[1:], arrivals) != -1 || transitSpread(nil, nil) != -1 {
		t.Errorf("a call that never arrived gives a spread")
	}
}

// TestSchedule: one client at the push rate; with more, the first at
// the push rate and each other at the client rate, merged in time order.
func TestSchedule(t *testing.T) {
	cfg := scenario.Default(scenario.Sender)
	cfg.PushRate, cfg.Duration = 10, 2*time.Second
	if ev := schedule(&cfg); len(ev) != 20 || ev[19].at != 1900*time.Millisecond || ev[19].client != 0 {
		t.Fatalf("one client: %d events, last %+v", len(ev), ev[len(ev)-1])
	}
	cfg.Clients, cfg.ClientRate = 3, 2
	ev := schedule(&cfg)
	per := map[int]int{}
	for i, e := range ev {
		per[e.client]++
		if i > 0 && e.at < ev[i-1].at {
			t.Fatalf("event %d at %s, before %s", i, e.at, ev[i-1].at)
		}
	}
	if per[0] != 20 || per[1] != 4 || per[2] != 4 || len(ev) != 28 {
		t.Fatalf("per client %v of %d", per, len(ev))
	}
}
