package loadtest

import (
	"slices"
	"testing"
	"time"

	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/tools/cql/localcluster"
)

// TestClusterFaults is the fault scenario's small form (make faults is
// the full one): its own three Cassandra nodes, two engines, two
// endpoints behind nginx, a few hundred user agents; one phase per fault.
// Every push answered 201 arrives (but for the engine killed outright,
// which may take its unacked deliveries with it), none twice after its
// ack, every refusal is 503 errno 201 with Retry-After, no server process
// exits on its own, and after the 30 s outage the service is whole again
// within 10 s of the store's return (report.FaultPhase.Problems).
func TestClusterFaults(t *testing.T) {
	localcluster.SkipUnlessGated(t, "make faults")
	cfg := smallConfig(t, scenario.Faults)
	cfg.CQLHosts, cfg.Engines = nil, 2 // its own cluster, whatever CQL_HOSTS says
	cfg.UAs, cfg.PushRate = 300, 50
	cfg.FaultLead, cfg.FaultAfter, cfg.DownTime = 3*time.Second, 10*time.Second, 5*time.Second
	cfg.Quiet, cfg.DrainTimeout = time.Second, time.Minute
	rep := runScenarioWithin(t, cfg, 15*time.Minute)
	f := rep.Faults
	if f == nil || len(f.Phases) != len(scenario.FaultNames) {
		t.Fatalf("faults report %+v: want one phase per fault %v", f, scenario.FaultNames)
	}
	for i, p := range f.Phases {
		if p.Fault != scenario.FaultNames[i] || p.Target == "" || p.Scheduled == 0 || p.Account.Accepted == 0 {
			t.Errorf("phase %d: %+v", i, p)
		}
		// The faults hit: user agents lost their connections to the
		// killed and the restarted engines; the outage refused pushes.
		switch p.Fault {
		case scenario.FaultEngineKill, scenario.FaultRoll:
			if p.Dropped == 0 {
				t.Errorf("%s: no connection dropped", p.Fault)
			}
		case scenario.FaultOutage:
			if p.Errors["HTTP 503 errno 201"] == 0 || p.DownSeconds < cfg.Outage.Seconds() {
				t.Errorf("outage: down %.1f s, refusals %v: want 503s for at least %s", p.DownSeconds, p.Errors, cfg.Outage)
			}
		}
		t.Logf("%s: %s", p.Fault, phaseLine(p))
	}
	if !slices.ContainsFunc(f.Phases, func(p report.FaultPhase) bool { return p.Account.Delivered > 0 }) {
		t.Error("nothing delivered in any phase")
	}
}

func phaseLine(p report.FaultPhase) string {
	return report.Num(p.Account.Accepted) + " accepted, lost " + report.Num(p.Account.Lost) +
		", dup after ack " + report.Num(p.Account.DuplicatedAfterAck) + ", refusals " + report.CountsOrNone(p.Errors)
}
