package loadtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/apitier/tracking"
	"github.com/autopush-go/autopush/loadtest/ledger"
	"github.com/autopush-go/autopush/loadtest/receipts"
	"github.com/autopush-go/autopush/loadtest/report"
)

// TestProfileCommands: the capacity profile's runs are recorded as the
// commands that repeat them (docs/capacity.md, docs/benchmarks.md).
func TestProfileCommands(t *testing.T) {
	var got []string
	for _, c := range DefaultProfile().configs() {
		got = append(got, strings.TrimPrefix(c.Command, "go run ./loadtest/cmd/loadtest "))
	}
	want := []string{
		"hold -uas 200000 -connect-rate 1500 -steps 5 -settle 15s -hold 1m0s",
		"notify -uas 10000 -rates 100,250,500,750,1000,2000,4000 -stage-time 20s -warmup 5s",
		"stored -engines 2 -push-rate 800",
		"churn -engines 2 -uas 5000 -push-rate 600 -duration 2m50s -session 20s -offline 5s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("commands\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestVerdictReceipts: a delivery run whose pushes all arrived exactly
// once still fails when its receipts or milestones disagree with the
// ledger, naming each disagreement.
func TestVerdictReceipts(t *testing.T) {
	settled := &tracking.Milestones{Counts: map[string]int64{"received": 10, "delivered": 10, "transmitted": 10}, Terminal: 10}
	for _, c := range []struct {
		name string
		rc   receipts.Account
		want []string
	}{
		{"agree", receipts.Account{Tracked: 10, Acked: 10, Read: 10, Delivered: 10, Milestones: settled}, nil},
		{"a second receipt", receipts.Account{Tracked: 10, Acked: 10, Read: 11, Delivered: 10, Duplicated: 1, Milestones: settled},
			[]string{"receipts: 1 second receipts for one push"}},
		{"unsettled", receipts.Account{Tracked: 10, Acked: 10, Read: 10, Delivered: 10,
			Milestones: &tracking.Milestones{Counts: map[string]int64{"received": 10, "delivered": 10, "transmitted": 10}, Terminal: 9, Pending: 1}},
			[]string{"milestones: terminal 9 of 10 received (1 pending) when the wait for them ended"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := c.rc
			r := &run{rep: &report.Report{Delivery: &report.DeliveryReport{Scheduled: 10,
				Account: ledger.Accounting{Sent: 10, Accepted: 10, Delivered: 10}, Receipts: &rc}}}
			r.verdict()
			if r.rep.Pass != (c.want == nil) || !slices.Equal(r.rep.Problems, c.want) {
				t.Errorf("pass %v, problems %q; want %q", r.rep.Pass, r.rep.Problems, c.want)
			}
		})
	}
}
