package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/autopush-go/autopush/loadtest/ledger"
)

// Config.Validate and its parts: the settings each scenario needs, and
// their bounds.

// minPayload is the plaintext header every push carries.
const minPayload = ledger.PayloadHeader

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	switch {
	case !slices.Contains(Names, c.Scenario):
		return fmt.Errorf("loadtest: unknown scenario %q (one of %s)", c.Scenario, strings.Join(Names, ", "))
	case c.UAs < 1 || c.Channels < 1:
		return errors.New("loadtest: -uas and -channels must be at least 1")
	case c.PerEngine < 1 || c.PerWorker < 1 || c.Loops < 1 || c.Engines < 0 || c.Workers < 0:
		return errors.New("loadtest: -per-engine, -per-worker and -loops must be at least 1; -engines and -workers not negative")
	case c.SourceIPs < 1 || c.SourceIPs > 250:
		return errors.New("loadtest: -source-ips must be 1..250 (127.0.0.2 .. 127.0.0.251)")
	case c.ConnectRate <= 0 || c.MaxPending < 1 || c.ConnectTimeout <= 0 || c.ConnectRetries < 0:
		return errors.New("loadtest: -connect-rate, -max-pending and -connect-timeout must be positive, -connect-retries not negative")
	case c.PingInterval < 0 || c.EnginePingInterval < 0 || c.SampleEvery <= 0:
		return errors.New("loadtest: -ping-interval and -engine-ping-interval must not be negative, -sample-every must be positive")
	case c.Single && (len(c.CQLHosts) > 0 || c.Engines > 1 || c.UAs > c.PerEngine):
		return errors.New("loadtest: hold -single: the single-node server is one process on the embedded store: no -cql-hosts, one engine, -uas at most -per-engine")
	case c.Scenario == Hold && (c.Steps < 1 || c.Samples < 1 || c.Settle < 0 || c.Hold < 0 || c.Budget < 0):
		return errors.New("loadtest: hold: -steps and -samples must be at least 1, -settle, -hold and -budget not negative")
	case c.Scenario == Notify && (len(c.Rates) == 0 || slices.ContainsFunc(c.Rates, func(r float64) bool { return r <= 0 })):
		return errors.New("loadtest: notify: -rates must list positive rates")
	case c.Profile != "" && (c.ProfileTime < time.Second || c.ProfileTime > 120*time.Second):
		return errors.New("loadtest: -profile-time must be 1s to 2m (the servers' pprof bound)")
	case c.StallP99Factor < 0:
		return errors.New("loadtest: notify: -stall-p99-factor must not be negative")
	case c.Stalls < 0 || c.Stalls > 0 && c.StallTimeout < time.Second:
		return errors.New("loadtest: notify: -stalls must not be negative, -stall-timeout at least 1s")
	case c.Scenario == Notify && (c.StageTime <= c.Warmup || c.Warmup < 0 || c.DeliveryGrace <= 0 || c.MinStages < 1):
		return errors.New("loadtest: notify: -stage-time must exceed -warmup, -grace must be positive, -min-stages at least 1")
	case c.Scenario == Stored && c.Messages < 1:
		return errors.New("loadtest: stored: -messages must be at least 1")
	case (c.Scenario == Stored || c.Scenario == Churn) && (c.PushRate <= 0 || c.DrainTimeout <= 0 || c.Quiet < 0):
		return errors.New("loadtest: -push-rate and -drain-timeout must be positive, -quiet not negative")
	case c.Scenario == Churn && (c.Duration <= 0 || c.SessionMean <= 0 || c.OfflineMean <= 0):
		return errors.New("loadtest: churn: -duration, -session and -offline must be positive")
	case c.Scenario == Sender:
		return c.validateSender()

	case c.Sends() && (c.PayloadSize < minPayload || c.PayloadSize > ledger.MaxPayload):
		return fmt.Errorf("loadtest: -payload must be %d..%d bytes", minPayload, ledger.MaxPayload)
	case c.Sends() && (c.TTL < 1 || c.AppServerConns < 1 || c.MaxInFlight < 1 || c.PushTimeout <= 0 || c.VAPIDReuse < 0):
		return errors.New("loadtest: -ttl, -appserver-conns, -max-in-flight and -push-timeout must be positive, -vapid-reuse not negative")
	case c.Broadcasts < 0 || c.Broadcasts > 100 || c.Broadcasts > 0 && c.BroadcastPoll < 100*time.Millisecond:
		return errors.New("loadtest: -broadcasts must be 0..100, -broadcast-poll at least 100ms")
	case c.Scenario == Broadcast && (c.Broadcasts < 1 || c.Changes < 1 || c.PushRate <= 0 || c.StageTime <= c.Warmup || c.Warmup < 0 || c.DeliveryGrace <= 0):
		return errors.New("loadtest: broadcast: -broadcasts, -changes and -push-rate must be positive, -stage-time must exceed -warmup, -grace must be positive")
	case c.Scenario == Broadcast && (c.StageTime-c.Warmup)/time.Duration(c.Changes+1) < 2*c.BroadcastPoll:
		return errors.New("loadtest: broadcast: the changes must be at least 2 × -broadcast-poll apart: fewer -changes or a longer -stage-time")
	case !slices.Contains([]string{"auto", "bar", "lines", "off"}, c.Progress):
		return errors.New("loadtest: -progress must be auto, bar, lines or off")
	case c.Out == "":
		return errors.New("loadtest: -out is required")
	}
	// A push reaches its user agent through the store the endpoint and
	// every engine share (the router record names the engine; a stored
	// message waits there), so the scenarios that send need one store.
	// hold sends none and no engine reads another's records: each engine
	// may have an embedded store of its own (cluster: data-<i>).
	if c.Scenario == Faults {
		return c.validateFaults()
	}
	if len(c.CQLHosts) == 0 && c.Scenario != Hold {
		if c.Engines > 1 {
			return fmt.Errorf("loadtest: %s sends pushes, so several engines need shared storage: set -cql-hosts or CQL_HOSTS "+
				"(tools/cql/start.sh starts a local Cassandra); the embedded store is one process's", c.Scenario)
		}
		if c.UAs > c.PerEngine {
			return fmt.Errorf("loadtest: %d user agents exceed one engine's %d: set -cql-hosts or CQL_HOSTS "+
				"(tools/cql/start.sh starts a local Cassandra) so several engines share storage", c.UAs, c.PerEngine)
		}
	}
	return nil
}

// validateFaults checks the faults scenario's settings.
func (c *Config) validateFaults() error {
	switch {
	case c.CQLNodes < 3 || c.CQLNodes > 9:
		return errors.New("loadtest: faults: -cql-nodes must be 3..9 (a quorum must survive one node down)")
	case c.EngineCount() < 2 || c.Endpoints < 2:
		return errors.New("loadtest: faults: -engines and -endpoints must be at least 2 (one is killed while the others serve)")
	case len(c.FaultList) == 0:
		return errors.New("loadtest: faults: -faults lists none")
	case c.FaultAfter < 5*time.Second || c.FaultLead < 0 || c.DownTime <= 0 || c.Outage <= 0:
		return errors.New("loadtest: faults: -down-time and -outage must be positive, -fault-after at least 5s, -fault-lead not negative")
	case c.PushRate <= 0 || c.DrainTimeout <= 0 || c.Quiet < 0 || c.SessionMean <= 0 || c.OfflineMean <= 0:
		return errors.New("loadtest: faults: -push-rate, -drain-timeout, -session and -offline must be positive, -quiet not negative")
	}
	for _, f := range c.FaultList {
		if !slices.Contains(FaultNames, f) {
			return fmt.Errorf("loadtest: faults: unknown fault %q (one of %s)", f, strings.Join(FaultNames, ", "))
		}
	}
	return nil
}

// validateSender checks the sender scenario's settings: the offered
// pushes must outlast the measured window at the provider's rate, or the
// window would see the queue run dry.
func (c *Config) validateSender() error {
	switch {
	case c.PushRate <= 0 || c.Duration <= 0 || c.ProviderRate <= 0 || c.ProviderDelay <= 0 || c.AverageLatency <= 0 || c.Measure <= 0 || c.Warmup < 0:
		return errors.New("loadtest: sender: -push-rate, -duration, -provider-rate, -provider-delay, -average-latency and -measure must be positive, -warmup not negative")
	case c.Pace() > 0.95*c.ProviderRate:
		return fmt.Errorf("loadtest: sender: -provider-delay %s paces %.0f/s, over 95%% of -provider-rate (the sender refuses it)", c.ProviderDelay, c.Pace())
	case c.RateTolerance <= 0 || c.RateTolerance >= 1:
		return errors.New("loadtest: sender: -rate-tolerance must be in (0, 1)")
	case c.Provider != "swrve" && c.Provider != "fcm":
		return fmt.Errorf("loadtest: sender: -provider %q is not swrve or fcm", c.Provider)
	case c.Provider == "fcm" && c.Devices < 1:
		return errors.New("loadtest: sender: -devices must be positive")
	case c.Clients < 1 || c.Clients > 100 || c.ClientRate <= 0 || c.FloodQuota < 0:
		return errors.New("loadtest: sender: -clients must be 1..100, -client-rate positive, -flood-quota not negative")
	case c.Clients > 1 && c.Provider != "swrve":
		return errors.New("loadtest: sender: -clients above 1 posts to POST /push: -provider swrve")
	case c.AppServerConns < 1 || c.MaxInFlight < 1 || c.PushTimeout <= 0 || c.DrainTimeout <= 0:
		return errors.New("loadtest: sender: -appserver-conns, -max-in-flight, -push-timeout and -drain-timeout must be positive")
	case c.Progress != "auto" && c.Progress != "bar" && c.Progress != "lines" && c.Progress != "off" || c.Out == "":
		return errors.New("loadtest: -progress must be auto, bar, lines or off, and -out is required")
	}
	if _, err := c.ProviderLatencyFunc(); err != nil {
		return err
	}
	if c.PushRate <= c.Pace() {
		return fmt.Errorf("loadtest: sender: -push-rate (%.0f/s) must be above the pace (%.0f/s): the sender is measured with its queue full",
			c.PushRate, c.Pace())
	}
	pushes := c.PushRate * c.Duration.Seconds()
	if need := c.Pace() * (c.Warmup + c.Measure).Seconds() * 1.05; pushes < need {
		return fmt.Errorf("loadtest: sender: %.0f pushes (-push-rate × -duration) run out before the window ends: "+
			"the provider sends %.0f/s for -warmup + -measure (%s), %.0f pushes and 5%% more; offer more",
			pushes, c.Pace(), c.Warmup+c.Measure, need/1.05)
	}
	return nil
}
