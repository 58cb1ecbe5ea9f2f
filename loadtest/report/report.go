package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/ledger"
	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/receipts"
	"github.com/autopush-go/autopush/loadtest/scenario"
)

// Report is everything one run measured; it is written as <scenario>.json
// and drawn as <scenario>.html.
type Report struct {
	Scenario string          `json:"scenario"`
	Command  string          `json:"command"`
	Commit   string          `json:"commit"` // of the working tree the load tester ran in
	Started  time.Time       `json:"started"`
	Seconds  float64         `json:"seconds"`
	Machine  probe.Machine   `json:"machine"`
	Config   scenario.Config `json:"config"`
	Cluster  ClusterInfo     `json:"cluster"`
	// Series is one sample per SampleEvery: connections, engine memory,
	// counters and the latency of the interval.
	Series   []Sample        `json:"series"`
	Connect  *ConnectReport  `json:"connect,omitempty"`
	Hold     *HoldReport     `json:"hold,omitempty"`
	Notify   *NotifyReport   `json:"notify,omitempty"`
	Delivery *DeliveryReport `json:"delivery,omitempty"`
	// Broadcast is the broadcast scenario's (broadcast.go).
	Broadcast *BroadcastReport `json:"broadcast,omitempty"`
	Sender    *SenderReport    `json:"sender,omitempty"`
	Faults    *FaultsReport    `json:"faults,omitempty"`
	Reasons   map[string]int64 `json:"reasons,omitempty"` // why handshakes failed and connections dropped
	Pass      bool             `json:"pass"`
	Problems  []string         `json:"problems,omitempty"`
	Files     []string         `json:"files,omitempty"`
}

// ClusterInfo describes the system under test in the report.
type ClusterInfo struct {
	Storage     string   `json:"storage"`
	Engines     int      `json:"engines"`
	EngineKind  string   `json:"engine_kind"` // autoconnect, or autopush (engine and endpoint in one process)
	EnginePIDs  []int    `json:"engine_pids"`
	EngineAddrs []string `json:"engine_addrs"`
	Endpoint    string   `json:"endpoint_url,omitempty"`
	Keyspace    string   `json:"keyspace,omitempty"`
	CQLHosts    []string `json:"cql_hosts,omitempty"`
	Workers     int      `json:"workers"`
}

// Sample is the run at one instant. Counters are cumulative; latencies
// cover the interval since the previous sample.
type Sample struct {
	T           float64            `json:"t"` // seconds since the run started
	Phase       string             `json:"phase"`
	Connected   int                `json:"connected"` // user agents ready
	Connecting  int                `json:"connecting"`
	Connects    int64              `json:"connects"`
	ConnectFail int64              `json:"connect_failures"`
	Dropped     int64              `json:"dropped"`
	Engine      probe.EngineSample `json:"engine"` // summed over the engines
	EndpointRSS int64              `json:"endpoint_rss_bytes,omitempty"`
	WorkerRSS   int64              `json:"worker_rss_bytes"`
	CPU         probe.CPU          `json:"cpu_percent"`
	Sent        int64              `json:"sent"`
	Accepted    int64              `json:"accepted"`
	PostErrors  int64              `json:"post_errors"`
	Received    int64              `json:"received"`
	Acked       int64              `json:"acked"`
	Latency     *hist.Latency      `json:"latency,omitempty"`    // delivery, this interval
	Response    *hist.Latency      `json:"response,omitempty"`   // POST answer, this interval
	Lag         *hist.Latency      `json:"sender_lag,omitempty"` // the application server's, scheduled to actual send (key named before loadtest/appserver)
	Handshake   *hist.Latency      `json:"handshake,omitempty"`
}

// ConnectReport is the first ramp: every user agent connecting.
type ConnectReport struct {
	Target    int          `json:"target"`
	Connected int          `json:"connected"`
	Attempts  int64        `json:"attempts"`
	Failures  int64        `json:"failures"`
	Seconds   float64      `json:"seconds"`
	Offered   float64      `json:"offered_per_s"`
	Achieved  float64      `json:"achieved_per_s"`
	Handshake hist.Latency `json:"handshake"`   // connect to the last register reply
	CPU       probe.CPU    `json:"cpu_percent"` // average over the ramp
}

// Slope is a fitted slope; NaN (too few points) is null in JSON.
type Slope float64

// MarshalJSON writes NaN as null.
func (s Slope) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(s))
}

// UnmarshalJSON reads null as NaN.
func (s *Slope) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = Slope(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(s))
}

// NotifyReport is the latency ladder.
type NotifyReport struct {
	UAs       int     `json:"uas"`
	Stages    []Stage `json:"stages"`
	P99Limit  float64 `json:"p99_limit_ms"`
	CrossedAt float64 `json:"p99_crossed_at_per_s"` // first offered rate whose p99 passed the limit; 0: none
	// Stalled holds, with -stalls, each rate run again while connections
	// to the push API stall (Stages holds the same rates without them).
	Stalled []StallStage `json:"stalled,omitempty"`
	// Receipts, with -receipts, counts the receipts of the stages' pushes.
	Receipts *NotifyReceipts `json:"receipts,omitempty"`
}

// NotifyReceipts counts, for notify -receipts, the pushes the stages
// accepted, those the service tracked and settled (its milestones) and
// the distinct receipts read: all four equal when nothing was lost.
type NotifyReceipts struct {
	Accepted int64 `json:"accepted"`
	Tracked  int64 `json:"tracked"`
	Settled  int64 `json:"settled"`
	Read     int64 `json:"read"`
}

// Problems: every push accepted tracked, settled and receipted once.
func (rc *NotifyReceipts) Problems() []string {
	if rc.Tracked == rc.Accepted && rc.Settled == rc.Accepted && rc.Read == rc.Accepted {
		return nil
	}
	return []string{fmt.Sprintf("receipts: %d pushes accepted, %d tracked, %d settled, %d receipts read: want all equal",
		rc.Accepted, rc.Tracked, rc.Settled, rc.Read)}
}

// Quiet is the stage at rate offered without stalls.
func (n *NotifyReport) Quiet(offered float64) (Stage, bool) {
	for _, s := range n.Stages {
		if s.Offered == offered {
			return s, true
		}
	}
	return Stage{}, false
}

// StallStage is one rate offered while connections to the push API stall.
type StallStage struct {
	Stage
	Stalls    int                `json:"stalls"`
	Closed    int                `json:"closed"`          // closed by the endpoint within the limit
	LimitS    float64            `json:"close_limit_s"`   // the endpoint's timeout + 1 s
	CloseMaxS float64            `json:"close_max_s"`     // from connect to the endpoint's close
	Slowest   map[string]float64 `json:"slowest_close_s"` // by how they stalled: header, header+0, body, chunk, 1 byte/s
}

// Stage is one offered rate.
type Stage struct {
	Offered   float64           `json:"offered_per_s"`
	Scheduled int64             `json:"scheduled"`
	Seconds   float64           `json:"seconds"`
	Achieved  float64           `json:"accepted_per_s"`
	Delivered float64           `json:"delivered_per_s"`
	Latency   hist.Latency      `json:"latency"`  // scheduled send to arrival, after the warm-up
	Response  hist.Latency      `json:"response"` // scheduled send to the POST's answer
	Account   ledger.Accounting `json:"account"`
	Errors    map[string]int64  `json:"errors,omitempty"`
	CPU       probe.CPU         `json:"cpu_percent"` // average over the stage
	// CPUPerPush is the servers' CPU (engines and endpoint, user +
	// system, from /proc) over the stage, microseconds per push
	// delivered; the load tester's scrapes of their /metrics included.
	CPUPerPush float64 `json:"server_cpu_us_per_push"`
}

// DeliveryReport is stored's or churn's exactly-once accounting.
type DeliveryReport struct {
	UAs         int              `json:"uas"`
	Scheduled   int64            `json:"scheduled"`
	Offered     float64          `json:"offered_per_s"`
	SendSeconds float64          `json:"send_seconds"`
	Achieved    float64          `json:"accepted_per_s"`
	Errors      map[string]int64 `json:"errors,omitempty"`
	// Latency of first arrivals from the scheduled send (for stored it
	// includes the time the push waited in storage).
	Latency      hist.Latency `json:"latency"`
	DrainSeconds float64      `json:"drain_seconds"` // reconnect start to the last first arrival
	DrainRate    float64      `json:"drain_per_s"`
	// Stalled pushes were accepted but still not acked when the drain
	// ended, with every user agent connected for DrainTimeout: those that
	// arrived later did so only after a further reconnect.
	Stalled int               `json:"stalled"`
	Account ledger.Accounting `json:"account"`
	// Churn: connections made and closed while pushes flowed.
	ChurnConnects int64     `json:"churn_connects,omitempty"`
	ChurnCloses   int64     `json:"churn_closes,omitempty"`
	ChurnRate     float64   `json:"churn_connects_per_s,omitempty"`
	SendCPU       probe.CPU `json:"send_cpu_percent"`  // average while pushes were sent
	DrainCPU      probe.CPU `json:"drain_cpu_percent"` // average while draining
	// Response is the POSTs' latency, scheduled send to the endpoint's
	// answer: what the push path costs the application server.
	Response hist.Latency `json:"response"`
	// Receipts, with -receipts: the receipts read against the ledgers,
	// and the milestones.
	Receipts *receipts.Account `json:"receipts,omitempty"`
}

// Write saves the report as JSON and HTML in dir and returns the paths.
func (r *Report) Write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("loadtest: report dir: %w", err)
	}
	jsonPath := filepath.Join(dir, r.Scenario+".json")
	htmlPath := filepath.Join(dir, r.Scenario+".html")
	r.Files = []string{jsonPath, htmlPath}
	figs := figures(r)
	for _, fig := range figs {
		r.Files = append(r.Files, filepath.Join(dir, r.Scenario+"-"+fig.name+".svg"))
	}
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return nil, fmt.Errorf("loadtest: report: %w", err)
	}
	if err := os.WriteFile(jsonPath, b, 0o644); err != nil {
		return nil, fmt.Errorf("loadtest: report: %w", err)
	}
	f, err := os.Create(htmlPath)
	if err != nil {
		return nil, fmt.Errorf("loadtest: report: %w", err)
	}
	defer f.Close()
	if err := writeHTML(f, r, figs); err != nil {
		return nil, fmt.Errorf("loadtest: report: %w", err)
	}
	for i, fig := range figs {
		if err := os.WriteFile(r.Files[2+i], []byte(fig.svg), 0o644); err != nil {
			return nil, fmt.Errorf("loadtest: report: %w", err)
		}
	}
	return r.Files, nil
}

// PrintSummary writes the human summary and the RESULT line.
func (r *Report) PrintSummary(w io.Writer) {
	fmt.Fprintf(w, "\n== %s: %s\n", r.Scenario, r.Command)
	fmt.Fprintf(w, "machine: %s, %d CPUs, %s RAM, %s, %s; load %s -> %s\n", r.Machine.CPU, r.Machine.CPUs,
		gib(r.Machine.MemTotal), r.Machine.Kernel, r.Machine.Go, r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd)
	if r.Sender != nil {
		fmt.Fprintf(w, "system: autoendpoint with its sender workers on %s storage; a fake %s (%s latency) in the load tester\n",
			r.Cluster.Storage, r.Sender.Provider, r.Config.ProviderLatency)
	} else {
		fmt.Fprintf(w, "system: %d %s process(es) on %s storage, %d worker process(es), sources 127.0.0.2-%d\n",
			r.Cluster.Engines, r.Cluster.EngineKind, r.Cluster.Storage, r.Cluster.Workers, 1+r.Config.SourceIPs)
	}
	if c := r.Connect; c != nil {
		fmt.Fprintf(w, "connect: %s of %s user agents in %.1fs (%s/s achieved, %s/s offered), %s attempts, %s failures; handshake p50 %.1f ms p99 %.1f ms max %.1f ms; cpu%% machine/engines/endpoint/workers %s\n",
			Num(c.Connected), Num(c.Target), c.Seconds, Num(c.Achieved), Num(c.Offered), Num(c.Attempts), Num(c.Failures),
			c.Handshake.P50, c.Handshake.P99, c.Handshake.Max, c.CPU)
	}
	if len(r.Reasons) > 0 {
		fmt.Fprintf(w, "failures and drops by reason: %s\n", Counts(r.Reasons))
	}
	switch {
	case r.Hold != nil:
		r.printHold(w)
	case r.Notify != nil:
		r.printNotify(w)
	case r.Delivery != nil:
		r.printDelivery(w)
	case r.Broadcast != nil:
		r.printBroadcast(w)
	case r.Sender != nil:
		r.printSender(w)
	case r.Faults != nil:
		r.printFaults(w)
	}
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL: " + strings.Join(r.Problems, "; ")
	}
	fmt.Fprintf(w, "%s\n", r.resultLine()+" "+verdict)
	if len(r.Files) > 0 {
		fmt.Fprintf(w, "report: %s\n", strings.Join(r.Files, " "))
	}
}

func (r *Report) printNotify(w io.Writer) {
	n := r.Notify
	fmt.Fprintf(w, "notify: %s connected user agents; latency from scheduled send to arrival (ms), after a %s warm-up per rate\n",
		Num(n.UAs), r.Config.Warmup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "offered/s\taccepted/s\tdelivered/s\tp50\tp90\tp99\tp99.9\tmax\tPOST p99\tlost\tcpu% machine/engines/endpoint/workers/storage\tserver µs/push\terrors\t")
	for _, s := range n.Stages {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%s\t%.0f\t%s\t\n", Num(s.Offered), Num(s.Achieved), Num(s.Delivered),
			s.Latency.P50, s.Latency.P90, s.Latency.P99, s.Latency.P999, s.Latency.Max, s.Response.P99, s.Account.Lost, s.CPU, s.CPUPerPush, CountsOrNone(s.Errors))
	}
	tw.Flush()
	if rc := n.Receipts; rc != nil {
		fmt.Fprintf(w, "receipts: %s pushes accepted, %s tracked, %s settled, %s receipts read\n",
			Num(rc.Accepted), Num(rc.Tracked), Num(rc.Settled), Num(rc.Read))
	}
	if n.CrossedAt > 0 {
		fmt.Fprintf(w, "p99 passes %.0f ms at %s/s offered\n", n.P99Limit, Num(n.CrossedAt))
	} else if n.P99Limit > 0 {
		fmt.Fprintf(w, "p99 stayed within %.0f ms at every rate\n", n.P99Limit)
	}
}

func (r *Report) printDelivery(w io.Writer) {
	d := r.Delivery
	a := d.Account
	fmt.Fprintf(w, "%s: %s pushes to %s user agents, offered %s/s: %s accepted in %.1fs (%s/s); cpu%% %s; errors: %s\n",
		r.Scenario, Num(d.Scheduled), Num(d.UAs), Num(d.Offered), Num(a.Accepted), d.SendSeconds, Num(d.Achieved), d.SendCPU, CountsOrNone(d.Errors))
	if r.Scenario == scenario.Churn {
		fmt.Fprintf(w, "churn: %s connects and %s closes while pushes flowed (%s connects/s)\n",
			Num(d.ChurnConnects), Num(d.ChurnCloses), Num(d.ChurnRate))
	}
	fmt.Fprintf(w, "drain: %s delivered, last first arrival %.1fs after the reconnect began (%s/s); STALLED %d (not delivered to their connected user agent within %s); cpu%% %s\n",
		Num(a.Delivered), d.DrainSeconds, Num(d.DrainRate), d.Stalled, r.Config.DrainTimeout, d.DrainCPU)
	fmt.Fprintf(w, "latency scheduled send -> first arrival (ms): p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f\n",
		d.Latency.P50, d.Latency.P90, d.Latency.P99, d.Latency.P999, d.Latency.Max)
	fmt.Fprintf(w, "push answer scheduled send -> response (ms): p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f\n",
		d.Response.P50, d.Response.P90, d.Response.P99, d.Response.P999, d.Response.Max)
	fmt.Fprintf(w, "accounting: accepted %s, delivered %s, LOST %d, DUPLICATED AFTER ACK %d, unacked %d; redelivered before any ack %d, after an unverified ack %d; bad content %d, misrouted %d, unknown %d; delivered despite an error answer %d\n",
		Num(a.Accepted), Num(a.Delivered), a.Lost, a.DuplicatedAfterAck, a.Unacked, a.RedeliveredUnacked, a.RedeliveredAckUnverified,
		a.BadContent, a.Misrouted, a.Unknown, a.DeliveredDespiteError)
	if rc := d.Receipts; rc != nil {
		fmt.Fprintf(w, "receipts: %s tracked pushes on %d subscription(s), %s acked by their user agent; %s receipts read: %s delivered, not delivered: %s; PENDING %d; "+
			"acked without a receipt %d, acked but receipted not delivered %d, delivered not acked %d, DUPLICATED %d, unknown %d, malformed %d; read errors: %s\n",
			Num(rc.Tracked), rc.Subscriptions, Num(rc.Acked), Num(rc.Read), Num(rc.Delivered), rc.Outcomes(), rc.Pending,
			rc.MissingDelivered, rc.AckedNotDelivered, rc.DeliveredNotAcked, rc.Duplicated, rc.Unknown, rc.Malformed, CountsOrNone(rc.ReadErrors))
		if m := rc.Milestones; m != nil {
			fmt.Fprintf(w, "milestones: received %s, terminal %s, pending %d; %s\n", Num(receipts.Received(m)), Num(m.Terminal), m.Pending, CountsOrNone(m.Counts))
		}
	}
}

// SenderProblems are what fails a sender run, given the rate tolerance.
func (r *Report) SenderProblems(tolerance float64) []string { return r.Sender.problems(tolerance) }

// everyNth picks about n samples spread over the series, the last
// included.
func everyNth(ss []Sample, n int) []Sample {
	if len(ss) <= n {
		return ss
	}
	var out []Sample
	step := float64(len(ss)-1) / float64(n-1)
	for i := range n {
		out = append(out, ss[int(float64(i)*step+0.5)])
	}
	return out
}

// resultLine is one grep-able line of the headline figures.
func (r *Report) resultLine() string {
	b := &strings.Builder{}
	if r.Sender != nil { // no user agents, no engines
		fmt.Fprintf(b, "RESULT scenario=%s storage=%s", r.Scenario, r.Cluster.Storage)
	} else {
		fmt.Fprintf(b, "RESULT scenario=%s uas=%d engines=%d storage=%s", r.Scenario, r.Config.UAs, r.Cluster.Engines, r.Cluster.Storage)
	}
	if c := r.Connect; c != nil {
		fmt.Fprintf(b, " connected=%d connect_per_s=%.0f connect_failures=%d", c.Connected, c.Achieved, c.Failures)
	}
	switch {
	case r.Hold != nil:
		fmt.Fprintf(b, " rss_bytes_per_conn=%.0f anon_bytes_per_conn=%.0f goroutines_start=%d goroutines_end=%d",
			float64(r.Hold.RSSPerConn), float64(r.Hold.AnonPerConn), r.Hold.GoroutinesStart, r.Hold.GoroutinesEnd)
		if k := r.Hold.Kernel; k != nil {
			fmt.Fprintf(b, " kernel_bytes_per_conn=%.0f", float64(k.Total))
		}
		fmt.Fprintf(b, " dropped=%d idle_cpu_percent=%.2f", r.Hold.DroppedDuringRun, r.Hold.IdleCPU)
	case r.Notify != nil:
		for _, s := range r.Notify.Stages {
			fmt.Fprintf(b, " rate%.0f_p99_ms=%.1f rate%.0f_cpu_us=%.0f", s.Offered, s.Latency.P99, s.Offered, s.CPUPerPush)
		}
		fmt.Fprintf(b, " p99_crossed_at=%.0f", r.Notify.CrossedAt)
	case r.Delivery != nil:
		a := r.Delivery.Account
		fmt.Fprintf(b, " accepted=%d delivered=%d lost=%d duplicated_after_ack=%d drain_per_s=%.0f accepted_per_s=%.0f response_p99_ms=%.1f",
			a.Accepted, a.Delivered, a.Lost, a.DuplicatedAfterAck, r.Delivery.DrainRate, r.Delivery.Achieved, r.Delivery.Response.P99)
		if rc := r.Delivery.Receipts; rc != nil {
			fmt.Fprintf(b, " receipts_read=%d receipts_delivered=%d receipts_pending=%d receipts_duplicated=%d", rc.Read, rc.Delivered, rc.Pending, rc.Duplicated)
			if m := rc.Milestones; m != nil {
				fmt.Fprintf(b, " milestones_received=%d milestones_terminal=%d", receipts.Received(m), m.Terminal)
			}
		}
	case r.Broadcast != nil:
		b.WriteString(r.broadcastResult())
	case r.Sender != nil:
		b.WriteString(r.Sender.resultFields())
	case r.Faults != nil:
		b.WriteString(r.Faults.resultFields())
	}
	return b.String()
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

func f0(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return Num(math.Round(v))
}

// OptNum is Num, or "-" for an unknown (negative) figure.
func OptNum(v int) string {
	if v < 0 {
		return "-"
	}
	return Num(v)
}

func optMiB(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(v)/(1<<20))
}

// Num formats an integer-valued number with thousands separators.
func Num[T int | int64 | float64](v T) string {
	s := fmt.Sprintf("%.0f", float64(v))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Counts formats a map of counts, largest first.
func Counts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return int(m[b] - m[a])
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %s", k, Num(m[k])))
	}
	return strings.Join(parts, ", ")
}

// CountsOrNone is Counts, or "none".
func CountsOrNone(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	return Counts(m)
}
