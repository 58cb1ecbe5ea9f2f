package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/autopush-go/autopush/loadtest/hist"
)

// BroadcastReport is the broadcast scenario: one push stage without a
// broadcast change (the baseline) and one while the versions change, and
// how the changes reached the user agents.
type BroadcastReport struct {
	UAs         int     `json:"uas"`          // connected when the changes began
	IDs         int     `json:"ids"`          // broadcast ids each follows
	Changes     int     `json:"changes"`      // version changes made during the second stage
	PollSeconds float64 `json:"poll_seconds"` // the engines' megaphone-poll-interval
	Baseline    Stage   `json:"baseline"`     // pushes, no change
	During      Stage   `json:"during"`       // pushes while the versions changed
	// Expected is Changes × UAs: every change reaching every user agent
	// once. Received counts those that did (fewer when a newer version
	// overtook an older one before a user agent's turn: it then gets only
	// the newer), Repeated a version sent to a user agent that already
	// had it. Current is how many of the Ready (connected) user agents
	// have the last version at the end.
	Expected int64 `json:"expected"`
	Received int64 `json:"received"`
	Repeated int64 `json:"repeated"`
	Ready    int64 `json:"ready"`
	Current  int64 `json:"current"`
	// Arrival is from the change at the Megaphone to a user agent's
	// receipt: up to a poll interval of waiting, then the fan-out.
	Arrival hist.Latency `json:"arrival"`
	// FanOut is the engines' own autoconnect_broadcast_fanout_seconds over
	// the changes: the mean, and the bucket bound the slowest one fell in
	// (a change's fan-out runs from its poll to its last client).
	FanOutMean  float64 `json:"fanout_mean_seconds"`
	FanOutMax   float64 `json:"fanout_max_bucket_seconds"`
	FanOutCount int64   `json:"fanouts"`
	// DeliverP99 is the bucket bound under which 99% of the endpoint's
	// calls to deliver a push at an engine (autoendpoint_node_call_seconds
	// {call="push"}) answered in each stage: the server's side of the
	// push latency, without the load generator's.
	DeliverP99Baseline float64 `json:"deliver_p99_bucket_seconds_baseline"`
	DeliverP99During   float64 `json:"deliver_p99_bucket_seconds_during"`
}

// Problems are what makes the run fail: a change that did not reach
// every user agent once, a push lost or duplicated. The latency of the
// two stages is reported, not judged: it depends on the machine.
func (b *BroadcastReport) Problems() []string {
	var p []string
	if b.Current < b.Ready || b.Ready < int64(b.UAs) || b.Received > b.Expected || b.Repeated > 0 {
		p = append(p, fmt.Sprintf("broadcast changes: %d of %d connected user agents (of %d) have the last version; %d arrivals of at most %d, %d repeated",
			b.Current, b.Ready, b.UAs, b.Received, b.Expected, b.Repeated))
	}
	for _, s := range []Stage{b.Baseline, b.During} {
		if !s.Account.Exact() {
			p = append(p, fmt.Sprintf("pushes: %d lost, %d duplicated after ack, %d bad content", s.Account.Lost,
				s.Account.DuplicatedAfterAck, s.Account.BadContent+s.Account.Misrouted+s.Account.Unknown))
		}
	}
	return p
}

func (r *Report) printBroadcast(w io.Writer) {
	b := r.Broadcast
	fmt.Fprintf(w, "broadcast: %s connected user agents following %d id(s), %d changes polled every %.1fs, pushes offered at %s/s\n",
		Num(b.UAs), b.IDs, b.Changes, b.PollSeconds, Num(b.Baseline.Offered))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "push stage\taccepted/s\tdelivered/s\tp50\tp90\tp99\tp99.9\tmax\tlost\tcpu% machine/engines/endpoint/workers/storage\terrors\t")
	for _, s := range []struct {
		name string
		st   Stage
	}{{"no change", b.Baseline}, {"during changes", b.During}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%s\t%s\t\n", s.name, Num(s.st.Achieved), Num(s.st.Delivered),
			s.st.Latency.P50, s.st.Latency.P90, s.st.Latency.P99, s.st.Latency.P999, s.st.Latency.Max, s.st.Account.Lost, s.st.CPU,
			CountsOrNone(s.st.Errors))
	}
	tw.Flush()
	fmt.Fprintf(w, "the endpoint's deliver calls to the engines (PUT /push), p99 at most: %s without a change, %s during the changes\n",
		secs(b.DeliverP99Baseline), secs(b.DeliverP99During))
	fmt.Fprintf(w, "changes: %s of %s connected user agents have the last version; %s of %s arrivals (fewer: a newer version overtook an older one), %d repeated; change -> arrival (ms) p50 %.1f p99 %.1f max %.1f; engines' fan-out %d times, mean %.3fs, slowest under %.3gs\n",
		Num(b.Current), Num(b.Ready), Num(b.Received), Num(b.Expected), b.Repeated, b.Arrival.P50, b.Arrival.P99, b.Arrival.Max, b.FanOutCount, b.FanOutMean, b.FanOutMax)
}

func (r *Report) broadcastResult() string {
	b := r.Broadcast
	return fmt.Sprintf(" current=%d ready=%d received=%d expected=%d repeated=%d arrival_p99_ms=%.1f fanout_mean_s=%.3f push_p99_ms_baseline=%.1f push_p99_ms_during=%.1f deliver_p99_le_s_baseline=%g deliver_p99_le_s_during=%g",
		b.Current, b.Ready, b.Received, b.Expected, b.Repeated, b.Arrival.P99, b.FanOutMean, b.Baseline.Latency.P99, b.During.Latency.P99,
		b.DeliverP99Baseline, b.DeliverP99During)
}

// secs shows a bucket bound in seconds as ms below a second.
func secs(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%g ms", s*1000)
	}
	return fmt.Sprintf("%g s", s)
}
