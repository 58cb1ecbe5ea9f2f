package receipts

import (
	"fmt"
	"sort"

	"github.com/autopush-go/autopush/apitier/tracking"
	"github.com/autopush-go/autopush/internal/receiptwire"
	"github.com/autopush-go/autopush/loadtest/ledger"
)

// Receipt states (docs/receipts.md).
const (
	StateDelivered = "delivered"
	StateExpired   = "expired"
	StateDropped   = "dropped"
	StateErrored   = "errored"
)

// Received is the count of tracked pushes the service took, of m (GET
// /__milestones__).
func Received(m *tracking.Milestones) int64 { return m.Counts["received"] }

// Account is the receipts read, counted against the ledgers. The first
// group is what a correct service gives; the second must stay 0.
type Account struct {
	Subscriptions int   `json:"subscriptions"`
	Tracked       int64 `json:"tracked"` // pushes accepted (201), each naming a receipt subscription
	Acked         int64 `json:"acked"`   // of those, acked by their user agent
	Read          int64 `json:"read"`    // distinct receipts read
	// Delivered: delivered receipts of acked pushes (want Acked).
	Delivered int64 `json:"delivered"`
	// NotDelivered: receipts of pushes never acked, by state (and
	// reason: "dropped:topic_replaced").
	NotDelivered map[string]int64 `json:"not_delivered,omitempty"`
	// Pending: pushes never acked that have no receipt: not settled yet.
	Pending int64 `json:"pending"`

	// MissingDelivered: acked pushes with no receipt at all.
	MissingDelivered int64 `json:"missing_delivered"`
	// AckedNotDelivered: acked pushes whose receipt says not delivered.
	AckedNotDelivered int64 `json:"acked_not_delivered"`
	// DeliveredNotAcked: delivered receipts of pushes no user agent acked.
	DeliveredNotAcked int64 `json:"delivered_not_acked"`
	// Duplicated: receipts beyond the first for one push.
	Duplicated int64 `json:"duplicated"`
	// Unknown: receipts naming no push the ledgers saw accepted.
	Unknown int64 `json:"unknown"`
	// Malformed: receipts with an unknown state, a dropped one without
	// its reason, or a delivered flag that contradicts the state.
	Malformed int64 `json:"malformed"`

	// ReadErrors are the failed GETs and acks by cause (each retried).
	ReadErrors map[string]int64 `json:"read_errors,omitempty"`
	// Milestones as read once every tracked push settled (or the wait
	// for it ended).
	Milestones *tracking.Milestones `json:"milestones,omitempty"`
}

// Compare counts receipts (distinct by ID: a receipt read again before
// its ack is the same receipt) against the ledgers' fates.
func Compare(fates []ledger.Fates, receipts []receiptwire.Receipt) Account {
	acked := map[string]bool{} // by Location; false: accepted, never acked
	for _, f := range fates {
		for _, loc := range f.Acked {
			acked[loc] = true
		}
		for _, loc := range f.NotAcked {
			acked[loc] = false
		}
	}
	a := Account{Tracked: int64(len(acked)), NotDelivered: map[string]int64{}}
	for _, ok := range acked {
		if ok {
			a.Acked++
		}
	}
	seen := map[string]bool{}  // receipt ids
	byLoc := map[string]bool{} // pushes with a receipt
	for _, r := range receipts {
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		a.Read++
		if malformed(r) {
			a.Malformed++
		}
		wasAcked, known := acked[r.Location]
		switch {
		case !known:
			a.Unknown++
			continue
		case byLoc[r.Location]:
			a.Duplicated++
			continue
		}
		byLoc[r.Location] = true
		switch {
		case wasAcked && r.State == StateDelivered:
			a.Delivered++
		case wasAcked:
			a.AckedNotDelivered++
		case r.State == StateDelivered:
			a.DeliveredNotAcked++
		default:
			a.NotDelivered[outcome(r)]++
		}
	}
	for loc, ok := range acked {
		switch {
		case byLoc[loc]:
		case ok:
			a.MissingDelivered++
		default:
			a.Pending++
		}
	}
	return a
}

// outcome names a not-delivered receipt: its state, and its reason when
// the state has several.
func outcome(r receiptwire.Receipt) string {
	if r.Reason != "" {
		return r.State + ":" + r.Reason
	}
	return r.State
}

func malformed(r receiptwire.Receipt) bool {
	switch r.State {
	case StateDelivered, StateExpired, StateErrored:
		return r.Delivered != (r.State == StateDelivered)
	case StateDropped:
		return r.Delivered || r.Reason == ""
	}
	return true
}

// Problems are what fails a run: a receipt the ledgers contradict, a
// push with two, an acked push without its delivered receipt, and
// milestone counts that do not add up (received must be the pushes
// accepted, terminal must reach received, and delivered must be the
// delivered receipts). Pending pushes are not a problem here: the
// ledger's own accounting fails a run whose pushes were not acked, and
// their milestones do not add up.
func (a *Account) Problems() []string {
	var p []string
	for _, c := range []struct {
		n    int64
		what string
	}{
		{a.MissingDelivered, "acked pushes without a receipt"},
		{a.AckedNotDelivered, "acked pushes receipted as not delivered"},
		{a.DeliveredNotAcked, "delivered receipts for pushes no user agent acked"},
		{a.Duplicated, "second receipts for one push"},
		{a.Unknown, "receipts for no accepted push"},
		{a.Malformed, "malformed receipts (state, reason or delivered flag)"},
	} {
		if c.n > 0 {
			p = append(p, fmt.Sprintf("receipts: %d %s", c.n, c.what))
		}
	}
	m := a.Milestones
	if m == nil {
		return append(p, "milestones: never read")
	}
	if Received(m) != a.Tracked {
		p = append(p, fmt.Sprintf("milestones: received %d, but %d tracked pushes were accepted", Received(m), a.Tracked))
	}
	if m.Terminal != Received(m) {
		p = append(p, fmt.Sprintf("milestones: terminal %d of %d received (%d pending) when the wait for them ended",
			m.Terminal, Received(m), m.Pending))
	}
	if d := a.Delivered + a.DeliveredNotAcked; m.Counts[StateDelivered] != d {
		p = append(p, fmt.Sprintf("milestones: delivered %d, but %d delivered receipts were read", m.Counts[StateDelivered], d))
	}
	// Every message a user agent acked was written to it first: counted
	// even when its ack's settle raced ahead of the record.
	if m.Counts["transmitted"] < m.Counts[StateDelivered] {
		p = append(p, fmt.Sprintf("milestones: transmitted %d, fewer than the %d delivered", m.Counts["transmitted"], m.Counts[StateDelivered]))
	}
	return p
}

// Outcomes lists NotDelivered as "state N, ...", sorted ("none" when
// empty).
func (a *Account) Outcomes() string {
	if len(a.NotDelivered) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(a.NotDelivered))
	for k := range a.NotDelivered {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %d", k, a.NotDelivered[k])
	}
	return s
}
