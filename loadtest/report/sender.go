package report

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/probe"
)

// SenderReport is the sender scenario: the outbound sender under POST
// /push load above its provider's rate limit, seen from both sides.
type SenderReport struct {
	// Provider is swrve (POST /push) or fcm (WebPush POSTs to bridged
	// phones, sent through the FCM bridge).
	Provider string `json:"provider"`
	Phones   int    `json:"phones,omitempty"` // fcm: the bridged phones pushed to
	// POST /push, offered open loop.
	Offered     float64          `json:"offered_per_s"`
	Scheduled   int64            `json:"scheduled"`
	Accepted    int64            `json:"accepted"`
	PostSeconds float64          `json:"post_seconds"`
	Achieved    float64          `json:"accepted_per_s"`
	Errors      map[string]int64 `json:"errors,omitempty"`
	// Response is from each POST's scheduled time to its answer.
	Response    hist.Latency `json:"post_latency"`
	WentPending int64        `json:"went_pending"` // accepted PENDING: the queue was full
	// TooMany are the POSTs answered 429: a client over its rate quota.
	TooMany int64 `json:"too_many"`
	// Clients are each client's POSTs and pushes in a flood run (more
	// than one client: the first floods).
	Clients []ClientReport `json:"clients,omitempty"`

	// The provider's side: sends the fake received, per second since the
	// first, and the measured window (seconds since the first send).
	// ProviderRate is the account's limit (never exceeded in any second),
	// Pace the sender's configured calls a second (1 / its delay).
	ProviderRate float64      `json:"configured_rate_per_s"`
	Pace         float64      `json:"configured_pace_per_s"`
	PerSecond    []int        `json:"provider_per_second"`
	Window       [2]int       `json:"window_s"`
	Measured     float64      `json:"measured_rate_per_s"`
	RateError    float64      `json:"rate_error"` // (measured - pace) / pace
	WindowMin    int          `json:"window_min_per_s"`
	WindowMax    int          `json:"window_max_per_s"`
	QueueMin     int          `json:"window_queue_min"` // the sender's queue, sampled in the window
	Latency      hist.Latency `json:"provider_latency"` // the fake's answer times
	Received     int64        `json:"provider_received"`
	Distinct     int64        `json:"provider_received_distinct"` // pushes received at least once
	// CallsMaxAnySecond is the most provider calls the sender made in any
	// one second (a sliding window over its attempts' called times): at
	// most GateLimit.
	CallsMaxAnySecond int `json:"calls_max_any_second"`
	// MaxAnySecond is the most sends the provider received in any one
	// second (a sliding window over arrival times): at most ProviderRate,
	// the account's limit, and at most ArrivalLimit, the gate's bound
	// widened by the calls' measured transit spread.
	MaxAnySecond int `json:"provider_max_any_second"`
	// TransitSpreadMs is how much the time from a call to its arrival
	// varied (the k-th arrival against the k-th call, plus the 1 ms of
	// the attempt log's resolution; -1 when calls and arrivals do not
	// pair up). A call held up on its way lets a second of arrivals hold
	// the calls of a second and this much.
	TransitSpreadMs float64 `json:"transit_spread_ms"`
	// Duplicates are receipts beyond the attempts a push's log shows;
	// Retried pushes had more than one attempt (a timeout, a 5xx).
	Duplicates int   `json:"duplicates"`
	Retried    int64 `json:"retried"`

	// The pool: its bound, the most sends in flight seen by the sender's
	// gauge (sampled) and by the fake (exact; the reader's own send when
	// the pool is full adds one), and the reader's own sends.
	PoolSize       int   `json:"pool_size"`
	PoolBusyMax    int   `json:"pool_busy_max"`
	ProviderMaxNow int   `json:"provider_max_in_flight"`
	CallerRuns     int64 `json:"caller_runs"`

	// At the end: every accepted push by state.
	States       map[string]int64 `json:"states"`
	Sent         int64            `json:"sent"`          // accepted pushes found SENT
	DrainSeconds float64          `json:"drain_seconds"` // last POST to the last push SENT

	Samples []SenderSample `json:"samples"`
	CPU     probe.CPU      `json:"cpu_percent"` // average while POSTs were offered
}

// ClientReport is one push API client of a flood run.
type ClientReport struct {
	Name     string  `json:"name"`
	Flooding bool    `json:"flooding"`
	Offered  float64 `json:"offered_per_s"`
	Posted   int64   `json:"posted"`
	Accepted int64   `json:"accepted"`
	TooMany  int64   `json:"too_many"` // answered 429
	Failed   int64   `json:"failed"`   // any other error
	Sent     int64   `json:"sent"`     // accepted and found SENT
	// ToProvider is from each accepted push's due POST to its first
	// receipt at the provider.
	ToProvider hist.Latency `json:"post_to_provider"`
}

// SenderSample is the sender at one sample: its gauges and the fake's
// requests in flight.
type SenderSample struct {
	T                float64 `json:"t"`
	QueueSize        int     `json:"queue_size"`
	PoolBusy         int     `json:"pool_busy"`
	ProviderInFlight int     `json:"provider_in_flight"`
	Received         int64   `json:"provider_received"`
}

func (r *Report) printSender(w io.Writer) {
	s := r.Sender
	what := "POST /push"
	if s.Phones > 0 {
		what = fmt.Sprintf("WebPush POST to %s bridged phones", Num(int64(s.Phones)))
	}
	fmt.Fprintf(w, "%s: %s offered at %s/s for %.1fs: %s accepted (%s/s), %s went PENDING; errors: %s; cpu%% machine/-/endpoint/load tester (the fake and the POSTs)/storage %s\n",
		what, Num(s.Scheduled), Num(s.Offered), s.PostSeconds, Num(s.Accepted), Num(s.Achieved), Num(s.WentPending), CountsOrNone(s.Errors), s.CPU)
	fmt.Fprintf(w, "POST latency from its scheduled time (ms): p50 %.2f p90 %.2f p99 %.2f p99.9 %.2f max %.2f\n",
		s.Response.P50, s.Response.P90, s.Response.P99, s.Response.P999, s.Response.Max)
	judged := ""
	if !s.PaceJudged() {
		judged = " (not judged: pushes accepted below the pace)"
	}
	fmt.Fprintf(w, "provider %s: paced at %s/s under its %s/s limit; measured %.2f/s over seconds %d-%d of sending (%+.2f%% of the pace%s), per second %d..%d, queue at least %d in the window\n",
		s.Provider, Num(s.Pace), Num(s.ProviderRate), s.Measured, s.Window[0], s.Window[1], 100*s.RateError, judged, s.WindowMin, s.WindowMax, s.QueueMin)
	fmt.Fprintf(w, "in any sliding second: the provider received at most %d (limit %s; gate bound %d with the calls' %.0f ms of transit spread), the sender called at most %d times (gate bound %d)\n",
		s.MaxAnySecond, Num(s.ProviderRate), s.ArrivalLimit(), s.TransitSpreadMs, s.CallsMaxAnySecond, s.GateLimit())
	fmt.Fprintf(w, "provider answer time (ms): p50 %.0f p99 %.0f max %.0f; pool bound %d, busy at most %d (sampled), provider in flight at most %d, caller runs %d\n",
		s.Latency.P50, s.Latency.P99, s.Latency.Max, s.PoolSize, s.PoolBusyMax, s.ProviderMaxNow, s.CallerRuns)
	fmt.Fprintf(w, "accounting: accepted %s, SENT %s, received by the provider %s (%s distinct), retried %d, DUPLICATES %d (receipts beyond a push's attempts); states %s; last SENT %.1fs after the last POST\n",
		Num(s.Accepted), Num(s.Sent), Num(s.Received), Num(s.Distinct), s.Retried, s.Duplicates, CountsOrNone(s.States), s.DrainSeconds)
	for _, c := range s.Clients {
		what := "posting"
		if c.Flooding {
			what = "flooding"
		}
		fmt.Fprintf(w, "%s (%s at %s/s): posted %s, accepted %s, 429 %s, other errors %s, SENT %s; POST to provider (ms) p50 %.0f p99 %.0f max %.0f\n",
			c.Name, what, Num(c.Offered), Num(c.Posted), Num(c.Accepted), Num(c.TooMany), Num(c.Failed), Num(c.Sent),
			c.ToProvider.P50, c.ToProvider.P99, c.ToProvider.Max)
	}
}

// callsIn is the most calls the sender's gate plans in any window of w:
// the pace over w and its burst of one call; and the pace over 1 ms, the
// attempt log's resolution. (Calls made up to 20 ms after their planned
// time show in the transit spread.)
func (s *SenderReport) callsIn(w time.Duration) int {
	return int(math.Ceil(s.Pace*w.Seconds())) + 1 + int(math.Ceil(s.Pace/1000))
}

// GateLimit is the most calls the sender may make in any one second.
func (s *SenderReport) GateLimit() int { return s.callsIn(time.Second) }

// ArrivalLimit is the most sends the provider may receive in any one
// second: the gate's bound over a second and the measured transit spread
// (the arrivals of one second are calls made within that much longer).
func (s *SenderReport) ArrivalLimit() int {
	spread := max(s.TransitSpreadMs, 0)
	return s.callsIn(time.Second + time.Duration(spread*float64(time.Millisecond)))
}

// PaceJudged says whether the run can judge the sender's pace: only
// when pushes were accepted faster than the pace, so that a backlog
// waited for the provider the whole window (a flood run whose flooder
// meets its rate quota accepts less, and the provider's rate then is the
// accepted rate, not the pace).
func (s *SenderReport) PaceJudged() bool { return s.Achieved > s.Pace }

// senderProblems are what fails a sender run.
func (s *SenderReport) problems(tolerance float64) []string {
	var p []string
	if s.Accepted+s.TooMany < s.Scheduled {
		p = append(p, fmt.Sprintf("only %d of %d pushes accepted, %d over a quota (errors: %s)", s.Accepted, s.Scheduled, s.TooMany, CountsOrNone(s.Errors)))
	}
	if s.PaceJudged() && math.Abs(s.RateError) > tolerance {
		p = append(p, fmt.Sprintf("provider rate %.2f/s is %+.2f%% from the configured pace %.0f/s (tolerance %.2f%%)",
			s.Measured, 100*s.RateError, s.Pace, 100*tolerance))
	}
	if float64(s.MaxAnySecond) > s.ProviderRate {
		p = append(p, fmt.Sprintf("the provider received %d sends in one second, above the account's limit %.0f/s", s.MaxAnySecond, s.ProviderRate))
	}
	if s.PoolBusyMax > s.PoolSize || s.ProviderMaxNow > s.PoolSize+1 {
		p = append(p, fmt.Sprintf("pool above its bound %d: busy %d, provider in flight %d (bound + the reader)",
			s.PoolSize, s.PoolBusyMax, s.ProviderMaxNow))
	}
	if s.CallsMaxAnySecond > s.GateLimit() {
		p = append(p, fmt.Sprintf("the sender called the provider %d times in one second, above the gate's bound %d",
			s.CallsMaxAnySecond, s.GateLimit()))
	}
	if s.MaxAnySecond > s.ArrivalLimit() {
		p = append(p, fmt.Sprintf("the provider received %d sends in one second, above the gate's bound over a second and the calls' %.0f ms of transit spread (%d)",
			s.MaxAnySecond, s.TransitSpreadMs, s.ArrivalLimit()))
	}
	if s.Sent != s.Accepted || s.Received < s.Accepted || s.Distinct != s.Accepted || s.Duplicates > 0 {
		p = append(p, fmt.Sprintf("%d accepted, %d SENT, %d received by the provider (%d distinct), %d duplicates",
			s.Accepted, s.Sent, s.Received, s.Distinct, s.Duplicates))
	}
	return p
}

func (s *SenderReport) resultFields() string {
	return fmt.Sprintf(" provider=%s accepted=%d sent=%d duplicates=%d calls_max_any_second=%d max_any_second=%d limit_per_s=%.0f transit_spread_ms=%.0f provider_rate_per_s=%.2f rate_error_pct=%.3f pool_size=%d pool_busy_max=%d provider_max_in_flight=%d post_p50_ms=%.2f post_p99_ms=%.2f",
		s.Provider, s.Accepted, s.Sent, s.Duplicates, s.CallsMaxAnySecond, s.MaxAnySecond, s.ProviderRate, s.TransitSpreadMs, s.Measured, 100*s.RateError, s.PoolSize, s.PoolBusyMax, s.ProviderMaxNow, s.Response.P50, s.Response.P99)
}

// senderCharts draws the provider's rate against its limit, the pool and
// queue, and the POST latency over time.
func senderCharts(r *Report) string {
	s := r.Sender
	rate := line{name: "provider sends per second", color: palette[0]}
	for i, n := range s.PerSecond {
		rate.pts = append(rate.pts, [2]float64{float64(i), float64(n)})
	}
	marks := []mark{{float64(s.Window[0]), "window"}, {float64(s.Window[1]), "window end"}}
	out := "<h2>Provider sends per second (seconds since the first send)</h2>\n" +
		chart{title: "sends per second", xlabel: "seconds since the first send", lines: []line{rate}, marks: marks,
			hline: s.ProviderRate, hlabel: fmt.Sprintf("limit %.0f/s (pace %.0f/s)", s.ProviderRate, s.Pace)}.svg()
	busy := line{name: "pool busy (sender gauge)", color: palette[0]}
	inflight := line{name: "provider in flight (fake)", color: palette[1]}
	queue := line{name: "queue", color: palette[2]}
	for _, x := range s.Samples {
		busy.pts = append(busy.pts, [2]float64{x.T, float64(x.PoolBusy)})
		inflight.pts = append(inflight.pts, [2]float64{x.T, float64(x.ProviderInFlight)})
		queue.pts = append(queue.pts, [2]float64{x.T, float64(x.QueueSize)})
	}
	out += "<h2>Sending pool and queue over time</h2>\n" +
		chart{title: "sends in flight", xlabel: "seconds", lines: []line{busy, inflight}, marks: phaseMarks(r),
			hline: float64(s.PoolSize), hlabel: fmt.Sprintf("pool bound %d", s.PoolSize)}.svg() +
		chart{title: "pushes queued", xlabel: "seconds", lines: []line{queue}, marks: phaseMarks(r)}.svg()
	p50 := line{name: "p50", color: palette[0]}
	p99 := line{name: "p99", color: palette[3]}
	for _, x := range r.Series {
		if x.Response != nil {
			p50.pts = append(p50.pts, [2]float64{x.T, math.Max(x.Response.P50, 0.01)})
			p99.pts = append(p99.pts, [2]float64{x.T, math.Max(x.Response.P99, 0.01)})
		}
	}
	if len(p50.pts) > 0 {
		out += "<h2>POST /push latency over time (scheduled time to answer, per interval)</h2>\n" +
			chart{title: "ms (log scale)", xlabel: "seconds", logY: true, lines: []line{p50, p99}, marks: phaseMarks(r)}.svg()
	}
	return out
}
