package scenario

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Scenarios, in the order the help lists them.
const (
	Hold   = "hold"
	Notify = "notify"
	Stored = "stored"
	Churn  = "churn"
	// Broadcast changes a broadcast version while pushes flow: how long
	// the change takes to reach every user agent, and what it does to the
	// pushes' latency.
	Broadcast = "broadcast"
	// Sender is the outbound sender (docs/sender.md): POST /push above the
	// provider's rate limit against a fake Swrve with Swrve's measured latency.
	Sender = "sender"
	// Faults runs the replicated cluster (its own Cassandra nodes,
	// engines, endpoints behind nginx) through node loss and restarts
	// while pushes flow (docs/capacity.md).
	Faults = "faults"
)

// Names lists every scenario.
var Names = []string{Hold, Notify, Stored, Churn, Broadcast, Sender, Faults}

// The faults Faults can run, in its default order.
const (
	// FaultReplica kills one Cassandra node (SIGKILL) and starts it again
	// after DownTime.
	FaultReplica = "replica"
	// FaultEngineKill kills one engine (SIGKILL) and starts it again after
	// DownTime, on its addresses.
	FaultEngineKill = "engine-kill"
	// FaultEndpointKill kills one endpoint behind the balancer (SIGKILL)
	// and starts it again after DownTime.
	FaultEndpointKill = "endpoint-kill"
	// FaultRoll restarts every engine with SIGTERM (it drains), one at a
	// time, each started again before the next stops.
	FaultRoll = "roll"
	// FaultOutage stops every Cassandra node (SIGTERM) for Outage, then
	// starts them.
	FaultOutage = "outage"
)

// FaultNames lists the faults, in the default order.
var FaultNames = []string{FaultReplica, FaultEngineKill, FaultEndpointKill, FaultRoll, FaultOutage}

// CapacityNames are the scenarios of the capacity profile (make capacity,
// docs/capacity.md); broadcast and sender have their own runs (make
// fanout, make sender-bench; docs/benchmarks.md).
var CapacityNames = []string{Hold, Notify, Stored, Churn}

// Config is one run. Default holds every default; the command's flags
// fill it (internal/settings: a field's `conf` tag is its flag). A field's
// `for` tag lists the scenarios that read it ("all": every one); its -help
// lists only those.
type Config struct {
	// Scenario is hold, notify, stored, churn, broadcast or sender.
	Scenario string

	// --- the system under test

	// CQLHosts is the ScyllaDB/Cassandra the engines and the endpoint
	// share, host:port,... Empty: the embedded store, which only one
	// process may open: the scenarios that send pushes run one process
	// (the single-node server, autopush); hold, which sends none, runs as
	// many engines as it needs, each on a store of its own. Default:
	// $CQL_HOSTS.
	CQLHosts []string `conf:"cql-hosts" for:"all" help:"shared CQL storage host:port,... (empty: embedded store; one process when pushes are sent, one store per engine for hold)"`
	// CQLConsistency of every storage call. Default "ONE" (one local node).
	CQLConsistency string `conf:"cql-consistency" for:"all" help:"CQL consistency level of the engines and the endpoint"`
	// CQLReplication of the fresh keyspace each run makes. Default
	// SimpleStrategy, replication factor 1.
	CQLReplication string `conf:"cql-replication" for:"all" help:"replication map of the run's fresh keyspace"`
	// CQLNodes, when above 0, makes the run start its own Cassandra
	// cluster of that many nodes on 127.0.0.1..n (tools/cql/cluster.sh),
	// keyspace replicated on every node, in place of CQLHosts. Default 0
	// (faults: 3).
	CQLNodes int `conf:"cql-nodes" for:"faults" help:"start a Cassandra cluster of this many nodes for the run (keyspace replicated on each), instead of -cql-hosts"`
	// Endpoints is how many autoendpoint processes to start; above 1 they
	// are behind nginx, whose address the engines hand out. Default 1
	// (faults: 2).
	Endpoints int `conf:"endpoints" for:"faults" help:"autoendpoint processes (above 1: behind nginx)"`
	// KeepKeyspace keeps the run's keyspace instead of dropping it at the
	// end. Default false.
	KeepKeyspace bool `conf:"keep-keyspace" for:"all" help:"keep the run's CQL keyspace (for a post-mortem)"`
	// Engines is how many autoconnect processes to start. Default 0:
	// ceil(UAs / PerEngine).
	Engines int `conf:"engines" for:"hold,notify,stored,churn,faults" help:"autoconnect processes to start (0: ceil(uas / per-engine))"`
	// PerEngine is the most user agents one engine is given when Engines
	// is 0; an engine holds at most its fd limit less 256 (19,744 here).
	// Default 18,000.
	PerEngine int `conf:"per-engine" for:"hold,notify,stored,churn,faults" help:"user agents per engine when -engines is 0"`
	// Single runs hold against the single-node server (autopush: both
	// tiers in one process on the embedded store, default settings)
	// instead of autoconnect. Default false.
	Single bool `conf:"single" for:"hold" help:"hold against the single-node server (autopush) instead of autoconnect (embedded store, one process)"`
	// BinDir holds autoconnect, autoendpoint and autopush. Default "":
	// build them from this module into a temporary directory.
	BinDir string `conf:"bin-dir" for:"all" help:"directory with the autoconnect, autoendpoint and autopush binaries (empty: go build them)"`

	// Profile, when set, is a directory: the run turns on the servers'
	// pprof setting and saves a CPU profile of every server process
	// during each notify stage (its measured part) and during the first
	// ProfileTime of each connect phase, as <phase>.<process>.pprof,
	// and each worker (the load generator) for its whole run, as
	// worker-<i>.pprof (go tool pprof reads them). Default "": none.
	Profile string `conf:"profile" for:"hold,notify" help:"directory for CPU profiles of the servers during each notify stage and connect phase (empty: none)"`
	// ProfileTime is the length of a connect phase's profile. Default
	// 5s.
	ProfileTime time.Duration `conf:"profile-time" for:"hold,notify" help:"length of a connect phase's CPU profile (-profile)"`

	// --- load generators

	// Workers is how many worker processes hold the user agents. Default
	// 0: ceil(UAs / PerWorker).
	Workers int `conf:"workers" for:"hold,notify,stored,churn,faults" help:"worker processes (0: ceil(uas / per-worker))"`
	// PerWorker is the most user agents one worker is given when Workers
	// is 0: a process may hold at most 20,000 files here. Default 18,000.
	PerWorker int `conf:"per-worker" for:"hold,notify,stored,churn,faults" help:"user agents per worker when -workers is 0"`
	// Loops is the number of epoll event loops per worker. Default 1.
	Loops int `conf:"loops" for:"hold,notify,stored,churn,faults" help:"epoll event loops per worker"`
	// SourceIPs spreads user agents over 127.0.0.2 .. 127.0.0.(1+SourceIPs)
	// so ephemeral ports never run out. Default 250.
	SourceIPs int `conf:"source-ips" for:"hold,notify,stored,churn,faults" help:"source addresses 127.0.0.2 .. 127.0.0.(1+n)"`

	// --- user agents

	// UAs is the number of user agents. Default: hold 10,000; notify
	// 2,000; stored 2,000; churn 2,000.
	UAs int `conf:"uas" for:"hold,notify,stored,churn,faults" help:"user agents"`
	// Channels each user agent registers. Default 1.
	Channels int `conf:"channels" for:"hold,notify,stored,churn,faults" help:"channels registered per user agent"`
	// ConnectRate is new connections started per second, over all
	// workers. Default 1,000.
	ConnectRate float64 `conf:"connect-rate" for:"hold,notify,stored,churn,faults" help:"connections started per second (all workers)"`
	// MaxPending bounds handshakes in progress (connect to the last
	// register reply), over all workers; the ramp waits beyond it, and
	// the achieved connect rate says so. Default 2,000.
	MaxPending int `conf:"max-pending" for:"hold,notify,stored,churn,faults" help:"handshakes in progress at most (all workers)"`
	// ConnectTimeout bounds one handshake. Default 30s.
	ConnectTimeout time.Duration `conf:"connect-timeout" for:"hold,notify,stored,churn,faults" help:"time allowed from connect to the last register reply"`
	// ConnectRetries is how often a failed handshake is retried (each
	// failure is counted). Default 3.
	ConnectRetries int `conf:"connect-retries" for:"hold,notify,stored,churn,faults" help:"retries of a failed handshake"`
	// PingInterval is how often an idle user agent sends "{}" (Firefox:
	// about every 30 minutes); the engine's own websocket pings are
	// answered whatever it is. 0: never. Default 30m.
	PingInterval time.Duration `conf:"ping-interval" for:"hold,notify,stored,churn,faults" help:"user agent {} ping interval, jittered ±10% (0: never)"`

	// EnginePingInterval is the engines' keepalive: a websocket ping after
	// this much silence from a user agent (their ping-interval setting).
	// 0: the engines' default (5m). Default 0.
	EnginePingInterval time.Duration `conf:"engine-ping-interval" for:"hold" help:"engines' websocket ping after this much client silence (0: their default, 5m)"`

	// --- hold

	// Steps: connections are opened in this many equal steps, and the
	// engines measured after each. Default 4.
	Steps int `conf:"steps" for:"hold" help:"ramp steps (memory is measured after each)"`
	// Settle is the idle time before each measurement. Default 10s.
	Settle time.Duration `conf:"settle" for:"hold" help:"idle time before each memory measurement"`
	// Samples per measurement, one second apart (the median counts).
	// Default 3.
	Samples int `conf:"samples" for:"hold" help:"samples per memory measurement, 1s apart (median)"`
	// Hold is how long the full set stays connected and idle at the end.
	// Default 30s.
	Hold time.Duration `conf:"hold" for:"hold" help:"idle time at full size after the ramp"`
	// Budget fails the run when the engines' RSS per connection (the
	// slope) exceeds it, bytes (docs/benchmarks.md: 1 KiB); checked from
	// BudgetFrom user agents on, below which the slope is mostly noise.
	// 0: no budget. Default 1024.
	Budget int `conf:"budget" for:"hold" help:"fail above this many bytes of engine RSS per connection (0: none; checked from 10,000 user agents)"`

	// --- pushes

	// Rates are notify's offered push rates per second, run in order.
	// Default 250,500,1000,2000,4000.
	Rates []float64 `conf:"rates" for:"notify" help:"offered push rates per second, run in order"`
	// StageTime is how long each notify rate (each broadcast stage) is
	// offered. Default 15s.
	StageTime time.Duration `conf:"stage-time" for:"notify,broadcast" help:"duration of each offered rate"`
	// Warmup is the start of each notify or broadcast stage that is sent
	// but left out of the stage's histogram; for sender, the start of the
	// provider's sends left out of the measured window. Default 3s
	// (sender: 10s).
	Warmup time.Duration `conf:"warmup" for:"notify,broadcast,sender" help:"start left out of the measurement (notify, broadcast: of each stage; sender: of the provider's sends)"`
	// P99Limit stops the notify ladder after the first rate whose p99
	// passes it, once MinStages ran. 0: run every rate. Default 50ms.
	P99Limit time.Duration `conf:"p99-limit" for:"notify" help:"stop after the first rate whose p99 passes this (0: run all)"`
	// MinStages run before P99Limit may stop the ladder. Default 3.
	MinStages int `conf:"min-stages" for:"notify" help:"rates run before -p99-limit may stop the ladder"`
	// Stalls, when above 0, runs each notify rate a second time while
	// that many connections to the push API stall (a fifth each mid-
	// header, after a whole header with no body, mid-body, mid-chunk,
	// and sending its body at one byte a second), and checks that the
	// endpoint closes every one within StallTimeout + 1 s of connecting.
	// They come from 127.0.1.x, at most 200 from one address (under the
	// endpoint's max-connections-per-source). Default 0.
	Stalls int `conf:"stalls" for:"notify" help:"stalled push API connections held during a second run of each rate (0: none)"`
	// StallTimeout is the endpoint's request-timeout in a stall run
	// (autoendpoint's AUTOEND__REQUEST_TIMEOUT, the single-node server's
	// AUTOPUSH__REQUEST_TIMEOUT). Default 10s.
	StallTimeout time.Duration `conf:"stall-timeout" for:"notify" help:"the endpoint's request-timeout in a -stalls run"`
	// StallP99Factor fails a stall run whose pushes' p99 with the stalls
	// is above this many times their p99 at the same rate without them.
	// 0: not judged. Default 2.
	StallP99Factor float64 `conf:"stall-p99-factor" for:"notify" help:"fail when the p99 with stalls passes this many times the p99 without (0: not judged)"`
	// Messages is how many pushes stored sends. Default 100,000.
	Messages int `conf:"messages" for:"stored" help:"pushes sent while the user agents are offline"`
	// PushRate is the offered push rate of stored, churn, broadcast and
	// sender. Default 1,000 (broadcast: 500; sender: 500, well above the
	// provider's 300/s).
	PushRate float64 `conf:"push-rate" for:"stored,churn,broadcast,sender,faults" help:"offered push rate per second"`
	// Duration of churn's push phase, and of sender's POSTs. Default 100s
	// (sender: 80s).
	Duration time.Duration `conf:"duration" for:"churn,sender" help:"how long pushes are offered"`
	// SessionMean and OfflineMean are the means of churn's exponentially
	// distributed online and offline times. Defaults 10s and 2s.
	SessionMean time.Duration `conf:"session" for:"churn,faults" help:"mean time a user agent stays connected"`
	OfflineMean time.Duration `conf:"offline" for:"churn,faults" help:"mean time a user agent stays away"`
	// PayloadSize is the plaintext size of each push. Default 512.
	PayloadSize int `conf:"payload" for:"notify,stored,churn,broadcast,faults" help:"push plaintext bytes (encrypted with aes128gcm)"`
	// TTL of each push, seconds. Default 3600.
	TTL int `conf:"ttl" for:"notify,stored,churn,broadcast,faults" help:"push TTL, seconds"`
	// VAPIDReuse is how long the application server reuses one signed
	// VAPID JWT. 0: a new signature per push, as the web-push libraries
	// do. Default 0.
	VAPIDReuse time.Duration `conf:"vapid-reuse" for:"notify,stored,churn,broadcast,faults" help:"reuse a VAPID JWT this long (0: sign every push)"`
	// FreshAppServerKeys encrypts each push with a new application-server
	// key pair, as the web-push libraries do: an ECDH per push on the
	// application server's side and on the user agent's. false: one key
	// pair per subscription (pushcrypto.Encrypter), each push still with
	// its own salt: the service's work is the same (it does not decrypt)
	// and the load generators' CPU goes to sending. Default false.
	FreshAppServerKeys bool `conf:"fresh-appserver-keys" for:"notify,stored,churn,broadcast,faults" help:"a new application-server ECDH key pair per push, as web-push libraries (false: one per subscription, fresh salt per push)"`
	// NetHTTP sends the pushes with net/http's client instead of the load
	// tester's own HTTP/1.1 client (loadtest/h1), which costs the
	// generator less CPU a push. Default false.
	NetHTTP bool `conf:"net-http" for:"notify,stored,churn,broadcast,faults" help:"send pushes with net/http's client (false: the load tester's own, cheaper HTTP/1.1 client)"`
	// AppServerConns bounds the application server's HTTP connections per
	// worker (the sender scenario's: its POST /push client's). Default 64.
	AppServerConns int `conf:"appserver-conns" for:"notify,stored,churn,broadcast,sender,faults" help:"HTTP connections to the endpoint per worker"`
	// MaxInFlight bounds pushes in flight per worker; a push due beyond
	// it is not sent and counted as an error ("appserver: in-flight cap"),
	// so the schedule never waits. Default 4,096.
	MaxInFlight int `conf:"max-in-flight" for:"notify,stored,churn,broadcast,sender,faults" help:"pushes in flight per worker (beyond: counted as errors, not sent)"`
	// PushTimeout bounds one POST. Default 10s.
	PushTimeout time.Duration `conf:"push-timeout" for:"notify,stored,churn,broadcast,sender,faults" help:"timeout of one POST"`
	// DeliveryGrace is how long a notify stage waits for its accepted
	// pushes to arrive after its last POST. Default 10s.
	DeliveryGrace time.Duration `conf:"grace" for:"notify,broadcast" help:"wait for a stage's pushes to arrive after its last POST"`
	// DrainTimeout bounds the wait for every accepted push to be acked
	// (sender: SENT). Default 2m (sender: 5m).
	DrainTimeout time.Duration `conf:"drain-timeout" for:"stored,churn,sender,faults" help:"wait for every accepted push to arrive (sender: to be SENT)"`

	// --- sender (the outbound sender and its fake provider)

	// Provider is what the sender scenario sends through: "swrve" (POST
	// /push, sent to a fake Swrve) or "fcm" (WebPush POSTs to phones
	// registered through the bridge registration API, sent through the
	// FCM bridge to a fake FCM: make bridge-bench). Default "swrve".
	Provider string `conf:"provider" for:"sender" help:"swrve (POST /push, fake Swrve) or fcm (WebPush to bridged phones, fake FCM)"`
	// Devices is how many phones -provider fcm registers; the pushes go to
	// them in turn. Default 1,000.
	Devices int `conf:"devices" for:"sender" help:"phones registered through the bridge registration API (-provider fcm)"`

	// ProviderRate is the provider account's rate limit the sender is
	// configured with (swrve-rate, fcm-rate), calls a second: the fake
	// must never receive more in any second. Default 300 (Swrve's).
	ProviderRate float64 `conf:"provider-rate" for:"sender" help:"the provider account's rate limit (swrve-rate): never exceeded in any second"`
	// ProviderDelay is the sender's pace (swrve-delay, fcm-delay): one
	// call every ProviderDelay. Default 4ms (the Java sender's delayMillis:
	// 250/s).
	ProviderDelay time.Duration `conf:"provider-delay" for:"sender" help:"the sender's time between calls (swrve-delay): its pace, measured"`
	// ProviderLatency is how the fake provider delays each answer:
	// MeasuredSwrve (log-normal with Swrve's measured p50 983 ms and p99
	// 5,956 ms) or a fixed duration. Default MeasuredSwrve.
	ProviderLatency string `conf:"provider-latency" for:"sender" help:"fake provider answer time: swrve (Swrve's measured latency, p50 983ms, p99 5956ms) or a fixed duration"`
	// AverageLatency sizes the sender's pool (swrve-average-latency): the
	// pool holds AverageLatency / ProviderDelay sends and a quarter of a
	// second of calls. Default 2s (500 + 62 at 4 ms; the Java sender's
	// averageProcessingMillis).
	AverageLatency time.Duration `conf:"average-latency" for:"sender" help:"the sender's expected provider latency (swrve-average-latency; sizes its pool)"`
	// Clients is how many push API clients the sender scenario posts as,
	// each with its own key. Above 1 it is the flood run
	// (docs/benchmarks.md): the first client posts at PushRate, above the
	// pace, and the others at ClientRate each; the report gives each
	// client's POSTs, 429s and SENT, and its POST-to-provider latency.
	// Default 1.
	Clients int `conf:"clients" for:"sender" help:"push API clients, each with its own key; above 1 the first floods at -push-rate and the others post at -client-rate"`
	// ClientRate is each non-flooding client's POST /push rate (Clients
	// above 1). Default 5.
	ClientRate float64 `conf:"client-rate" for:"sender" help:"each non-flooding client's POST /push rate per second (-clients above 1)"`
	// FloodQuota, when set, gives the flooding client this rate quota
	// (POSTs accepted per second) through push-clients-file, in place of
	// push-api-keys; beyond it the push API answers 429. Default 0: no
	// quota.
	FloodQuota float64 `conf:"flood-quota" for:"sender" help:"the flooding client's rate quota per second, in a push-clients-file (0: none; keys in push-api-keys)"`
	// Measure is the window over which the provider's send rate is
	// measured, after Warmup. Default 1m.
	Measure time.Duration `conf:"measure" for:"sender" help:"window over which the provider's send rate is measured"`
	// RateTolerance fails the run when the measured rate is further than
	// this fraction from the pace (1 / ProviderDelay). Default 0.01 (1%).
	RateTolerance float64 `conf:"rate-tolerance" for:"sender" help:"fail when the provider's measured rate is further than this fraction from the pace (1 / -provider-delay)"`
	// Quiet is how long to listen for late duplicates after the drain.
	// Default 3s.
	Quiet time.Duration `conf:"quiet" for:"stored,churn,faults" help:"listen this long for late duplicates after the drain"`
	// VerifyReconnect reconnects every user agent once more after the
	// drain: anything that arrives then was delivered after its ack.
	// Default true.
	VerifyReconnect bool `conf:"verify-reconnect" for:"stored,churn,faults" help:"reconnect everyone after the drain and expect nothing"`

	// Receipts turns on the service's delivery receipts (receipts, and
	// the run's VAPID key in tracking-keys, docs/receipts.md): one receipt
	// subscription per worker, every push names its worker's with
	// Push-Receipt, the receipts are read (long-polling GETs, acks) while
	// the run goes and drained at the end, and compared with the ledgers:
	// one delivered receipt per acked push, none for any other, one
	// not-delivered receipt (or still pending) for every push not acked;
	// then the milestone counts must add up (received = pushes accepted,
	// terminal = received). In notify the receipts are read the same way
	// while the stages run, and counted at the end (NotifyReceipts): the
	// stages' CPU per push is then a tracked push's. The embedded store
	// only until the Scylla backend stores fates. Default false.
	Receipts bool `conf:"receipts" for:"notify,stored,churn" help:"ask for a delivery receipt on every push, read them while the run goes and check them and the milestones against the ledger (notify: count them)"`
	// TrackingKey is the run's VAPID public key, which the service under
	// test tracks when Receipts is on. Set by Run, not a flag.
	TrackingKey string `json:",omitempty"`

	// --- broadcasts

	// Broadcasts is how many broadcast ids every user agent follows
	// (named in its hello). The run serves them from its own Megaphone on
	// 127.0.0.1, which the engines poll. Default 0 (broadcast: 1).
	Broadcasts int `conf:"broadcasts" for:"hold,broadcast" help:"broadcast ids every user agent follows (the run serves them as a Megaphone)"`
	// BroadcastPoll is the engines' megaphone-poll-interval. Default 1s.
	BroadcastPoll time.Duration `conf:"broadcast-poll" for:"hold,broadcast" help:"how often the engines poll the run's Megaphone"`
	// Changes is how many times broadcast changes the versions during its
	// measured push stage, evenly spaced. Default 5.
	Changes int `conf:"changes" for:"broadcast" help:"broadcast version changes during the measured push stage"`

	// --- faults

	// FaultList is the faults run, one per phase, in order (FaultNames).
	// Default every one.
	FaultList []string `conf:"faults" for:"faults" help:"faults to run, one per phase: replica, engine-kill, endpoint-kill, roll, outage"`
	// FaultLead is how long pushes flow before each fault, FaultAfter
	// how long they go on once it is undone (the recovery is measured
	// within it). Defaults 10s and 20s.
	FaultLead  time.Duration `conf:"fault-lead" for:"faults" help:"pushes flow this long before each fault"`
	FaultAfter time.Duration `conf:"fault-after" for:"faults" help:"pushes flow this long after each fault is undone"`
	// DownTime is how long a killed node stays down. Default 15s.
	DownTime time.Duration `conf:"down-time" for:"faults" help:"how long a killed node stays down"`
	// Outage is how long every Cassandra node stays down in the outage
	// fault. Default 30s.
	Outage time.Duration `conf:"outage" for:"faults" help:"how long all Cassandra nodes stay down (outage)"`

	// Trace logs every user agent's connections and every push's answer
	// and arrival in the worker logs, for post-mortems (large). Lost
	// pushes are always logged. Default false.
	Trace bool `conf:"trace" for:"notify,stored,churn,broadcast,faults" help:"log every connection, push and arrival in the worker logs"`

	// --- output

	// Out is the directory of the reports (<scenario>.json and .html) and
	// of the processes' logs; a run overwrites what an earlier run wrote
	// there. Default "loadtest/out" (ignored by git when run from the
	// repository's root).
	Out string `conf:"out" for:"all" help:"directory for the JSON and HTML reports and the process logs"`
	// Progress is "auto" (a bar on a terminal, lines otherwise), "bar",
	// "lines" or "off". Default "auto".
	Progress string `conf:"progress" for:"all" help:"auto, bar, lines or off"`
	// SampleEvery is the sampling interval of engines and workers.
	// Default 1s.
	SampleEvery time.Duration `conf:"sample-every" for:"all" help:"sampling interval of the engines' memory and the workers' counters"`
	// Command is the command line recorded in the report. Default: the
	// process's arguments.
	Command string
	// Commit names the service's code measured, for the report. Default
	// "": the working tree's commit when the run starts (binaries the run
	// builds come from it; with BinDir, whoever built them should say).
	Commit string
}

// Default returns the defaults documented on Config for scenario.
func Default(scenario string) Config {
	c := Config{
		Scenario:        scenario,
		CQLConsistency:  "ONE",
		CQLReplication:  "{'class': 'SimpleStrategy', 'replication_factor': 1}",
		ProfileTime:     5 * time.Second,
		PerEngine:       18000,
		PerWorker:       18000,
		Loops:           1,
		SourceIPs:       250,
		UAs:             2000,
		Channels:        1,
		ConnectRate:     1000,
		MaxPending:      2000,
		ConnectTimeout:  30 * time.Second,
		ConnectRetries:  3,
		PingInterval:    30 * time.Minute,
		Steps:           4,
		Settle:          10 * time.Second,
		Samples:         3,
		Hold:            30 * time.Second,
		Budget:          1024,
		Rates:           []float64{250, 500, 1000, 2000, 4000},
		StageTime:       15 * time.Second,
		Warmup:          3 * time.Second,
		P99Limit:        50 * time.Millisecond,
		MinStages:       3,
		StallTimeout:    10 * time.Second,
		StallP99Factor:  2,
		Messages:        100000,
		PushRate:        1000,
		Duration:        100 * time.Second,
		SessionMean:     10 * time.Second,
		OfflineMean:     2 * time.Second,
		PayloadSize:     512,
		TTL:             3600,
		AppServerConns:  64,
		MaxInFlight:     4096,
		PushTimeout:     10 * time.Second,
		ProviderRate:    300,
		ProviderDelay:   4 * time.Millisecond,
		ProviderLatency: MeasuredSwrve,
		Provider:        "swrve",
		Devices:         1000,
		Clients:         1,
		ClientRate:      5,
		AverageLatency:  2 * time.Second,
		Measure:         time.Minute,
		RateTolerance:   0.01,
		DeliveryGrace:   10 * time.Second,
		DrainTimeout:    2 * time.Minute,
		Quiet:           3 * time.Second,
		VerifyReconnect: true,
		BroadcastPoll:   time.Second,
		Changes:         5,
		Out:             "loadtest/out",
		Progress:        "auto",
		SampleEvery:     time.Second,
		Command:         strings.Join(os.Args, " "),
	}
	if h := os.Getenv("CQL_HOSTS"); h != "" && scenario != Sender {
		c.CQLHosts = strings.Split(h, ",")
	}
	switch scenario {
	case Hold:
		c.UAs = 10000
	case Broadcast:
		c.UAs, c.Broadcasts, c.PushRate = 10000, 1, 500
	case Sender:
		// The embedded store unless -cql-hosts names a cluster.
		c.PushRate, c.Duration, c.Warmup, c.DrainTimeout = 500, 80*time.Second, 10*time.Second, 5*time.Minute
	case Faults:
		// Its own 3-node cluster at the tiers' default consistency; user
		// agents stay until a fault drops them, then come back within
		// about a second (to a random engine).
		c.CQLNodes, c.Engines, c.Endpoints, c.CQLConsistency = 3, 2, 2, "LOCAL_QUORUM"
		c.UAs, c.PushRate, c.SessionMean, c.OfflineMean = 1000, 100, 24*time.Hour, time.Second
	}
	c.FaultList = append([]string(nil), FaultNames...)
	c.FaultLead, c.FaultAfter, c.DownTime, c.Outage = 10*time.Second, 20*time.Second, 15*time.Second, 30*time.Second
	return c
}

// BudgetFrom is the run size from which Budget is checked.
const BudgetFrom = 10000

// GoroutineSlack is how many goroutines a hold run's engines may each gain
// between the first and the last measurement (docs/benchmarks.md: no goroutine per
// idle connection).
const GoroutineSlack = 8

// Pace is the sender's calls a second: 1 / ProviderDelay.
func (c *Config) Pace() float64 { return float64(time.Second) / float64(c.ProviderDelay) }

// MeasuredSwrve is ProviderLatency's value for answers drawn from Swrve's
// measured latency (swrvefake.MeasuredLatency).
const MeasuredSwrve = "swrve"

// ProviderLatencyFunc parses ProviderLatency: Swrve's measured distribution
// (nil: the caller draws from swrvefake.MeasuredLatency), or a fixed answer
// time.
func (c *Config) ProviderLatencyFunc() (fixed *time.Duration, err error) {
	if c.ProviderLatency == MeasuredSwrve {
		return nil, nil
	}
	d, err := time.ParseDuration(c.ProviderLatency)
	if err != nil || d < 0 {
		return nil, fmt.Errorf("loadtest: sender: -provider-latency %q is not %s or a duration", c.ProviderLatency, MeasuredSwrve)
	}
	return &d, nil
}

// Sends reports whether the scenario posts pushes to user agents.
func (c *Config) Sends() bool { return c.Scenario != Hold && c.Scenario != Sender }

// EngineCount is the number of engine processes the run starts.
func (c *Config) EngineCount() int {
	if c.Engines > 0 {
		return c.Engines
	}
	if len(c.CQLHosts) == 0 && c.CQLNodes == 0 && (c.Scenario != Hold || c.Single) {
		return 1 // the embedded store is one process's (Validate)
	}
	return max(1, CeilDiv(c.UAs, c.PerEngine))
}

// PerSource is the most user agents sharing one source address and one
// engine: user agent gid goes to engine gid % engines from source
// gid % source-ips (package agent), so ceil(uas / lcm(engines,
// source-ips)).
func (c *Config) PerSource() int {
	e, s := c.EngineCount(), max(c.SourceIPs, 1)
	x, y := e, s
	for y != 0 {
		x, y = y, x%y
	}
	return CeilDiv(c.UAs, e/x*s)
}

// WorkerCount is the number of worker processes the run starts.
func (c *Config) WorkerCount() int {
	if c.Workers > 0 {
		return min(c.Workers, c.UAs)
	}
	return max(1, CeilDiv(c.UAs, c.PerWorker))
}

// CeilDiv is a/b rounded up.
func CeilDiv(a, b int) int { return (a + b - 1) / b }
