package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/autopush-go/autopush/loadtest/ledger"
	"github.com/autopush-go/autopush/loadtest/scenario"
)

// FaultsReport is the faults scenario's: one phase per fault.
type FaultsReport struct {
	UAs       int          `json:"uas"`
	Offered   float64      `json:"offered_per_s"`
	CQLNodes  int          `json:"cql_nodes"`
	Engines   int          `json:"engines"`
	Endpoints int          `json:"endpoints"`
	Phases    []FaultPhase `json:"phases"`
}

// FaultPhase is what one fault did to the pushes flowing meanwhile.
type FaultPhase struct {
	Fault  string `json:"fault"`
	Target string `json:"target"` // what was killed or restarted
	// Scheduled pushes of the phase, and their accounting once everyone
	// reconnected and drained after it.
	Scheduled int64             `json:"scheduled"`
	Account   ledger.Accounting `json:"account"`
	Stalled   int               `json:"stalled"`
	// Errors are the refusals application servers saw, by status and
	// errno (a 503 without Retry-After says so).
	Errors map[string]int64 `json:"errors,omitempty"`
	// Dropped connections and failed handshakes during the phase.
	Dropped     int64 `json:"dropped"`
	ConnectFail int64 `json:"connect_failures"`
	// DownSeconds is from the fault to the moment what it took away was
	// back (restarted and answering); RecoverySeconds from then until
	// pushes were accepted without error and every user agent was
	// connected again, to the sampling interval (-1: not within the
	// phase).
	DownSeconds     float64 `json:"down_seconds"`
	RecoverySeconds float64 `json:"recovery_seconds"`
	// Exited lists server processes that exited without being told to.
	Exited []string `json:"exited,omitempty"`
}

// LossAllowed tells whether the fault may lose accepted pushes: only an
// engine killed outright, which takes the deliveries its user agents had
// not acked yet with it (each one is listed as LOST in the worker logs).
func (p FaultPhase) LossAllowed() bool { return p.Fault == scenario.FaultEngineKill }

// RecoveryBound is the longest recovery accepted after the fault, 0: any
// (reported only). The outage's is the promise: the service is
// back within 10 s of the store's return.
func (p FaultPhase) RecoveryBound() float64 {
	if p.Fault == scenario.FaultOutage {
		return 10
	}
	return 0
}

// Problems are what fails the phase.
func (p FaultPhase) Problems() []string {
	var out []string
	a := p.Account
	if a.Lost > 0 && !p.LossAllowed() {
		out = append(out, fmt.Sprintf("%s: %d pushes answered 201 never delivered", p.Fault, a.Lost))
	}
	if a.DuplicatedAfterAck > 0 {
		out = append(out, fmt.Sprintf("%s: %d duplicated after ack", p.Fault, a.DuplicatedAfterAck))
	}
	if a.BadContent+a.Misrouted+a.Unknown > 0 {
		out = append(out, fmt.Sprintf("%s: %d bad, misrouted or unknown arrivals", p.Fault, a.BadContent+a.Misrouted+a.Unknown))
	}
	if p.Stalled > 0 {
		out = append(out, fmt.Sprintf("%s: %d pushes stalled after the drain", p.Fault, p.Stalled))
	}
	for k, v := range p.Errors {
		if k != "HTTP 503 errno 201" {
			out = append(out, fmt.Sprintf("%s: %d pushes refused with %s (only 503 errno 201 with Retry-After is expected)", p.Fault, v, k))
		}
	}
	if p.RecoverySeconds < 0 {
		out = append(out, fmt.Sprintf("%s: not recovered within the phase", p.Fault))
	} else if b := p.RecoveryBound(); b > 0 && p.RecoverySeconds > b {
		out = append(out, fmt.Sprintf("%s: recovered %.1f s after the fault ended, over %.0f s", p.Fault, p.RecoverySeconds, b))
	}
	for _, e := range p.Exited {
		out = append(out, fmt.Sprintf("%s: %s exited on its own", p.Fault, e))
	}
	return out
}

func (r *Report) printFaults(w io.Writer) {
	f := r.Faults
	fmt.Fprintf(w, "faults: %d Cassandra nodes, %d engines, %d endpoints behind nginx; %s user agents, %s pushes/s offered\n",
		f.CQLNodes, f.Engines, f.Endpoints, Num(f.UAs), Num(f.Offered))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\ttarget\tpushes\taccepted\tlost\tdup after ack\tdropped\tdown s\trecovery s\trefusals\t")
	for _, p := range f.Phases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%.1f\t%.1f\t%s\t\n", p.Fault, p.Target, Num(p.Scheduled), Num(p.Account.Accepted),
			p.Account.Lost, p.Account.DuplicatedAfterAck, p.Dropped, p.DownSeconds, p.RecoverySeconds, CountsOrNone(p.Errors))
	}
	tw.Flush()
}

func (f *FaultsReport) resultFields() string {
	b := &strings.Builder{}
	for _, p := range f.Phases {
		name := strings.ReplaceAll(p.Fault, "-", "_")
		fmt.Fprintf(b, " %s_lost=%d %s_dup=%d %s_recovery_s=%.1f", name, p.Account.Lost, name, p.Account.DuplicatedAfterAck, name, p.RecoverySeconds)
	}
	return b.String()
}
