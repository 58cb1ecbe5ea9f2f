package receipts

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/apitier/tracking"
	"github.com/autopush-go/autopush/internal/receiptwire"
	"github.com/autopush-go/autopush/loadtest/ledger"
)

// ledgerOf is a ledger of n accepted pushes, at loc(i), the ones in acked
// acked by their user agent, plus one refused push (no Location).
func ledgerOf(n int, acked ...int) ledger.Fates {
	var l ledger.Ledger
	for i := range n {
		seq := l.Add(int32(i))
		l.Answered(seq, 201, loc(i))
		if slices.Contains(acked, i) {
			l.Receive(seq, int32(i), 1)
			l.Ack(seq, 1)
		}
	}
	l.Answered(l.Add(0), 503, "")
	return l.Fates()
}

func loc(i int) string { return fmt.Sprintf("http://127.0.0.1:1/m/msg%d", i) }

func delivered(id string, i int) receiptwire.Receipt {
	return receiptwire.Receipt{ID: id, Location: loc(i), State: StateDelivered, Delivered: true, At: 1}
}

func notDelivered(id string, i int, state, reason string) receiptwire.Receipt {
	return receiptwire.Receipt{ID: id, Location: loc(i), State: state, Reason: reason, At: 1}
}

// settled is the milestones of a service that settled n pushes, d of
// them delivered.
func settled(n, d int64) *tracking.Milestones {
	return &tracking.Milestones{Counts: map[string]int64{"received": n, "delivered": d, "transmitted": d}, Terminal: n}
}

// TestCompareAgrees: a receipt per push, delivered exactly for the acked
// ones, read twice over (a lost ack) and across two ledgers: no problem,
// and each count right.
func TestCompareAgrees(t *testing.T) {
	a, b := ledgerOf(3, 0, 1), ledger.Fates{Acked: []string{loc(10)}}
	rs := []receiptwire.Receipt{delivered("r0", 0), delivered("r1", 1), notDelivered("r2", 2, StateExpired, ""), delivered("r10", 10),
		delivered("r0", 0)}
	got := Compare([]ledger.Fates{a, b}, rs)
	got.Milestones = settled(4, 3)
	want := Account{Tracked: 4, Acked: 3, Read: 4, Delivered: 3, NotDelivered: map[string]int64{"expired": 1}, Milestones: got.Milestones}
	if !equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if p := got.Problems(); len(p) != 0 {
		t.Errorf("problems %q", p)
	}
}

// TestCompareDisagrees: each way receipts can contradict the ledger is
// counted under its own name and fails the run.
func TestCompareDisagrees(t *testing.T) {
	for _, c := range []struct {
		name     string
		fates    ledger.Fates
		receipts []receiptwire.Receipt
		count    func(Account) int64
		problem  string
	}{
		{"acked push without a receipt", ledgerOf(2, 0, 1), []receiptwire.Receipt{delivered("r0", 0)},
			func(a Account) int64 { return a.MissingDelivered }, "acked pushes without a receipt"},
		{"acked push receipted expired", ledgerOf(1, 0), []receiptwire.Receipt{notDelivered("r0", 0, StateExpired, "")},
			func(a Account) int64 { return a.AckedNotDelivered }, "receipted as not delivered"},
		{"delivered receipt, never acked", ledgerOf(1), []receiptwire.Receipt{delivered("r0", 0)},
			func(a Account) int64 { return a.DeliveredNotAcked }, "no user agent acked"},
		{"two receipts for one push", ledgerOf(1, 0), []receiptwire.Receipt{delivered("r0", 0), delivered("r0b", 0)},
			func(a Account) int64 { return a.Duplicated }, "second receipts"},
		{"delivered, then expired", ledgerOf(1, 0), []receiptwire.Receipt{delivered("r0", 0), notDelivered("r0b", 0, StateExpired, "")},
			func(a Account) int64 { return a.Duplicated }, "second receipts"},
		{"receipt for no accepted push", ledgerOf(1, 0), []receiptwire.Receipt{delivered("r0", 0), delivered("rx", 7)},
			func(a Account) int64 { return a.Unknown }, "no accepted push"},
		{"dropped without a reason", ledgerOf(1), []receiptwire.Receipt{notDelivered("r0", 0, StateDropped, "")},
			func(a Account) int64 { return a.Malformed }, "malformed"},
		{"delivered flag on an expired receipt", ledgerOf(1), []receiptwire.Receipt{{ID: "r0", Location: loc(0), State: StateExpired, Delivered: true}},
			func(a Account) int64 { return a.Malformed }, "malformed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := Compare([]ledger.Fates{c.fates}, c.receipts)
			a.Milestones = settled(a.Tracked, a.Delivered+a.DeliveredNotAcked)
			if n := c.count(a); n != 1 {
				t.Errorf("counted %d, want 1: %+v", n, a)
			}
			if p := a.Problems(); len(p) != 1 || !strings.Contains(p[0], c.problem) {
				t.Errorf("problems %q, want one about %q", p, c.problem)
			}
		})
	}
}

// TestComparePending: a push never acked with no receipt is pending, not
// a problem of the receipts; a not-delivered one is counted by state and
// reason.
func TestComparePending(t *testing.T) {
	a := Compare([]ledger.Fates{ledgerOf(3)}, []receiptwire.Receipt{notDelivered("r1", 1, StateDropped, "topic_replaced")})
	if a.Pending != 2 || a.NotDelivered["dropped:topic_replaced"] != 1 || a.Outcomes() != "dropped:topic_replaced 1" {
		t.Errorf("%+v", a)
	}
	a.Milestones = &tracking.Milestones{Counts: map[string]int64{"received": 3}, Terminal: 1, Pending: 2}
	if p := a.Problems(); len(p) != 1 || !strings.Contains(p[0], "terminal 1 of 3") {
		t.Errorf("problems %q, want the unsettled milestones", p)
	}
}

// TestMilestonesConserved: the milestone counts must match the ledgers
// and add up.
func TestMilestonesConserved(t *testing.T) {
	a := Compare([]ledger.Fates{ledgerOf(2, 0, 1)}, []receiptwire.Receipt{delivered("r0", 0), delivered("r1", 1)})
	for _, c := range []struct {
		m    *tracking.Milestones
		want string
	}{
		{nil, "never read"},
		{settled(3, 2), "received 3, but 2"},
		{&tracking.Milestones{Counts: map[string]int64{"received": 2, "delivered": 2, "transmitted": 2}, Terminal: 1}, "terminal 1 of 2"},
		{&tracking.Milestones{Counts: map[string]int64{"received": 2, "delivered": 1, "transmitted": 1}, Terminal: 2}, "delivered 1, but 2"},
		{&tracking.Milestones{Counts: map[string]int64{"received": 2, "delivered": 2, "transmitted": 1}, Terminal: 2}, "transmitted 1, fewer"},
	} {
		a.Milestones = c.m
		if p := a.Problems(); len(p) != 1 || !strings.Contains(p[0], c.want) {
			t.Errorf("milestones %+v: problems %q, want one about %q", c.m, p, c.want)
		}
	}
}

func equal(a, b Account) bool {
	na, nb := a.NotDelivered, b.NotDelivered
	a.NotDelivered, b.NotDelivered = nil, nil
	return maps.Equal(na, nb) && fmt.Sprint(a) == fmt.Sprint(b)
}
