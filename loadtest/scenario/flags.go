package scenario

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/autopush-go/autopush/internal/settings"
)

// ParseFlags fills a scenario's Default config from command-line flags; only
// the fields whose `for` tag names the scenario (or "all") are flags, so
// each scenario's -help lists what it reads. It returns flag.ErrHelp after
// printing usage for -h.
func ParseFlags(scenario string, args []string, usage io.Writer) (Config, error) {
	cfg := Default(scenario)
	fs := flag.NewFlagSet("loadtest "+scenario, flag.ContinueOnError)
	fs.SetOutput(usage)
	settings.Flags(fs, &cfg, ReadBy(scenario))
	for old, name := range formerNames {
		if f := fs.Lookup(name); f != nil {
			fs.Var(f.Value, old, "former name of -"+name)
		}
	}
	fs.Usage = func() {
		fmt.Fprintf(usage, "usage: loadtest %s [flags]\n\n%s\n\nflags:\n", scenario, scenarioHelp[scenario])
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("loadtest %s: unexpected arguments %q", scenario, fs.Args())
	}
	return cfg, cfg.Validate()
}

// formerNames are flags' earlier names, still read so that older command
// lines run: the "sender" they named was the application server the load
// tester plays, not the outbound sender of the sender scenario.
var formerNames = map[string]string{
	"sender-conns":      "appserver-conns",
	"fresh-sender-keys": "fresh-appserver-keys",
}

// ReadBy selects the Config fields scenario reads (for settings.Flags and
// settings.Describe): those whose `for` tag names it or "all".
func ReadBy(scenario string) func(reflect.StructTag) bool {
	return func(tag reflect.StructTag) bool {
		for s := range strings.SplitSeq(tag.Get("for"), ",") {
			if s == "all" || s == scenario {
				return true
			}
		}
		return false
	}
}

// scenarioHelp is the paragraph each scenario's -help starts with.
var scenarioHelp = map[string]string{
	Hold: `hold: -uas idle user agents (hello, -channels registered, then idle
with {} pings every -ping-interval), opened at -connect-rate in -steps
equal steps. After each step and -settle of idleness the engines' RSS is
sampled (/proc/<pid>/status, and go_goroutines from their /metrics); the
least-squares slope over the steps is the engines' user-space bytes per
connection; the machine's kernel memory (/proc/meminfo, /proc/net/sockstat,
/proc/slabinfo) is read beside it and fitted the same way. Then everyone
stays connected for -hold, answering the engines' pings (sent after
-engine-ping-interval of silence) and having their own {} answered. On
the embedded store (no -cql-hosts) each engine has a store of its own.
Before it starts, the run checks the kernel settings it needs (files,
ports, backlogs, conntrack) and says what to raise. With -broadcasts,
every user agent also follows that many broadcast ids (as Firefox does),
served by the run's own Megaphone.`,
	Notify: `notify: -uas connected user agents; senders POST VAPID-signed,
aes128gcm-encrypted pushes to them at each of -rates (open loop: the
schedule never waits for replies) for -stage-time. User agents decrypt,
check and ack. Latency runs from a push's scheduled send time to its
receipt at the user agent (HDR histogram: p50, p90, p99, p99.9, max).
Stops after the first rate whose p99 passes -p99-limit (once -min-stages
ran). With -receipts every push is tracked and asks for a receipt, read
and acked while the stages run: each stage's server CPU per push is then
a tracked push's, and every accepted push must get one receipt.`,
	Stored: `stored: -uas user agents register and go offline; -messages pushes
are sent to them at -push-rate and stored; then everyone reconnects (to
the next engine, when there are several) and drains. Every push answered
201 must arrive exactly once and never after its ack; -verify-reconnect
reconnects everyone once more and expects nothing. Lost pushes are logged
with their message id in the worker logs. With -receipts every push asks
for a delivery receipt (docs/receipts.md), read while the run goes: each
acked push must get exactly one, delivered, and no other push a delivered
one; the milestones must add up (received = accepted = terminal).`,
	Churn: `churn: -uas user agents connect and disconnect (exponential online
time with mean -session, offline -offline, reconnecting to a random
engine) while pushes flow at -push-rate for -duration to random user
agents, online or not. Then everyone reconnects and drains, with the same
exactly-once accounting as stored, and the same -receipts checks.`,
	Broadcast: `broadcast: -uas connected user agents each follow -broadcasts ids
of the run's own Megaphone (127.0.0.1), which the engines poll every
-broadcast-poll. Pushes flow at -push-rate for -stage-time twice: with no
broadcast change, then while the Megaphone changes the versions -changes
times. Reported: both stages' push latency, the endpoint's deliver-call
p99 (the server's side), the engines' fan-out time, and how long a change
took to reach the user agents; every connected one must end with the last
version and never be sent one twice. Needs -cql-hosts (CQL_HOSTS).`,
	Faults: `faults: the replicated cluster through its faults. The run starts
its own -cql-nodes Cassandra nodes on 127.0.0.1..n (keyspace replicated on
every node, the tiers at LOCAL_QUORUM), -engines engines and -endpoints
endpoints behind nginx. -uas user agents connect; a user agent whose
connection drops comes back after about -offline, to a random engine.
Then one phase per fault in -faults: pushes flow at -push-rate from
-fault-lead before the fault until -fault-after once it is undone. The
faults: replica (SIGKILL one Cassandra
node, start it again after -down-time), engine-kill (SIGKILL one engine,
start it again on its addresses after -down-time), endpoint-kill (the same
for one endpoint behind nginx), roll (SIGTERM every engine in turn, each
started again before the next), outage (every Cassandra node stopped for
-outage). After each phase everyone reconnects and drains, and the phase's
pushes are accounted for as in churn: answered 201 and never delivered,
duplicated after ack, refusals by status (503 must carry Retry-After),
and the time from the fault's end until pushes and connections were back
to normal.`,
	Sender: `sender: the outbound sender (docs/sender.md). autoendpoint
(embedded store, or -cql-hosts) runs its workers against a fake Swrve in
this process, paced at -provider-delay (4 ms: 250/s) under the account's
limit -provider-rate (300/s), its pool sized by -average-latency; the fake
answers after -provider-latency (swrve: Swrve's measured p50 983 ms, p99
5,956 ms). POST /push is offered at -push-rate for -duration, above the
pace, so the queue stays full. Measured: the provider's sends per second
over -measure after -warmup (must hold the pace within -rate-tolerance),
the most the provider received in any sliding second (never above
-provider-rate), the pool never above its bound (the sender's pool gauge
and the fake's concurrency), POST /push latency from its scheduled time
(HDR: p50, p99), and every accepted push SENT and received once. -provider
fcm (make bridge-bench) does the same for the mobile bridges: -devices
phones register through the bridge registration API, WebPush POSTs go to
their endpoints, and the sender paces the FCM bridge (fcm-delay under
fcm-rate) against a fake FCM.`,
}
