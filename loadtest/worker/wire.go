package worker

import (
	"time"

	"github.com/autopush-go/autopush/loadtest/agent"
	"github.com/autopush-go/autopush/loadtest/ledger"
)

// The coordinator drives each worker process with JSON lines: commands on
// the worker's stdin, events on its stdout (stderr is the worker's log).
// A worker runs one command at a time and answers each with a "done"
// event carrying its ID; it also reports "stats" every SampleEvery.

// Env, when set in a process's environment, makes the load tester's
// binary (or a test binary's TestMain) run as a worker: see IsWorker.
const Env = "AUTOPUSH_LOADTEST_WORKER"

// ProfileEnv, when set, names the file a worker writes a CPU profile of
// its whole run to (loadtest -profile).
const ProfileEnv = "AUTOPUSH_LOADTEST_WORKER_PROFILE"

// Command ops.
const (
	OpSetup      = "setup"      // once, first: the worker's share of the run
	OpConnect    = "connect"    // connect every user agent that is not connected
	OpDisconnect = "disconnect" // close every connection (close handshake)
	OpSend       = "send"       // one open-loop push phase
	OpChurn      = "churn"      // start or stop cycling the user agents
	OpDrain      = "drain"      // wait for every accepted push to be acked
	OpAccount    = "account"    // the ledger's accounting of every push
	OpBroadcasts = "broadcasts" // the broadcast changes that reached the user agents since the last call
	OpFates      = "fates"      // the Location of every accepted push, acked or not (receipts)
	OpStop       = "stop"       // close everything and exit
)

// Command is one line on a worker's stdin.
type Command struct {
	ID      int            `json:"id"`
	Op      string         `json:"op"`
	Setup   *Setup         `json:"setup,omitempty"`
	Connect *agent.Connect `json:"connect,omitempty"`
	Send    *Send          `json:"send,omitempty"`
	Churn   *agent.Churn   `json:"churn,omitempty"`
	Drain   *Drain         `json:"drain,omitempty"`
	// Current, for OpBroadcasts: the instant (Unix ns) of the broadcast
	// version the user agents should have by now (0: do not count).
	Current int64 `json:"current,omitempty"`
}

// Setup is a worker's share of the run.
type Setup struct {
	Run            uint32        `json:"run"`     // run id, in every payload
	Index          int           `json:"index"`   // this worker
	First          int           `json:"first"`   // global index of its first user agent
	UAs            int           `json:"uas"`     // how many it holds
	Engines        []string      `json:"engines"` // websocket host:port of every engine
	SourceIPs      int           `json:"source_ips"`
	Channels       int           `json:"channels"`
	Loops          int           `json:"loops"`
	MaxPending     int           `json:"max_pending"`
	ConnectTimeout time.Duration `json:"connect_timeout"`
	ConnectRetries int           `json:"connect_retries"`
	PingInterval   time.Duration `json:"ping_interval"`
	SampleEvery    time.Duration `json:"sample_every"`

	// Push settings; Keys is false for hold (no subscription keys).
	Keys           bool          `json:"keys"`
	VAPIDPrivate   string        `json:"vapid_private,omitempty"`
	VAPIDSubject   string        `json:"vapid_subject,omitempty"`
	VAPIDReuse     time.Duration `json:"vapid_reuse"`
	FreshKeys      bool          `json:"fresh_keys"`
	NetHTTP        bool          `json:"net_http"`
	PayloadSize    int           `json:"payload_size"`
	TTL            int           `json:"ttl"`
	AppServerConns int           `json:"appserver_conns"`
	MaxInFlight    int           `json:"max_in_flight"`
	PushTimeout    time.Duration `json:"push_timeout"`
	Trace          bool          `json:"trace"`
	// PushReceipt is the receipt subscription every push names ("":
	// none).
	PushReceipt string `json:"push_receipt,omitempty"`
	// Broadcasts are the broadcast ids every user agent follows.
	Broadcasts []string `json:"broadcasts,omitempty"`
}

// Send is one open-loop push phase of this worker.
type Send struct {
	Rate     float64       `json:"rate"`     // this worker's share
	Duration time.Duration `json:"duration"` // schedule length; or Count
	Count    int           `json:"count"`    // pushes to schedule (0: Rate × Duration)
	Pick     string        `json:"pick"`     // appserver.PickRoundRobin or PickRandom
	// Warmup: pushes scheduled in the first Warmup are left out of the
	// stage histogram.
	Warmup time.Duration `json:"warmup"`
	// Grace: after the last answer, wait this long at most for the
	// accepted pushes to arrive (0: do not wait).
	Grace time.Duration `json:"grace"`
	// Keep leaves the latency histogram open after the phase: the drain
	// command returns it (pushes that arrive after reconnecting).
	Keep bool `json:"keep"`
}

// SendResult is one push phase of one worker.
type SendResult struct {
	Scheduled int64             `json:"scheduled"`
	Seconds   float64           `json:"seconds"` // first scheduled send to last answer
	Hist      []byte            `json:"hist"`    // delivery latency, measured window
	Resp      []byte            `json:"resp"`    // POST answer latency, measured window
	Account   ledger.Accounting `json:"account"`
	Errors    map[string]int64  `json:"errors"` // by status/errno and transport errno
}

// Drain waits until every accepted push was acked or Timeout, then
// listens Quiet longer.
type Drain struct {
	Timeout time.Duration `json:"timeout"`
	Quiet   time.Duration `json:"quiet"`
}

// DrainResult says how the drain ended.
type DrainResult struct {
	Unacked  int    `json:"unacked"`   // accepted pushes still unacked at the end
	LastRecv int64  `json:"last_recv"` // wall clock (Unix ns) of the latest first arrival
	Hist     []byte `json:"hist"`      // latency of first arrivals since the send phase began
}

// Event is one line on a worker's stdout.
type Event struct {
	Type    string               `json:"type"` // "stats", "done" or "fatal"
	ID      int                  `json:"id,omitempty"`
	Err     string               `json:"err,omitempty"`
	Stats   *Stats               `json:"stats,omitempty"`
	Connect *agent.ConnectResult `json:"connect,omitempty"`
	Send    *SendResult          `json:"send,omitempty"`
	Drain   *DrainResult         `json:"drain,omitempty"`
	Account *ledger.Accounting   `json:"account,omitempty"`
	Fates   *ledger.Fates        `json:"fates,omitempty"`

	Broadcasts *agent.BroadcastResult `json:"broadcasts,omitempty"`
}

// Stats are a worker's counters (cumulative) and the latencies since its
// last report.
type Stats struct {
	Connected   int   `json:"connected"`  // ready now
	Connecting  int   `json:"connecting"` // handshakes in progress
	Connects    int64 `json:"connects"`   // handshakes completed
	ConnectFail int64 `json:"connect_fail"`
	Dropped     int64 `json:"dropped"` // ready connections the server closed or broke
	Closes      int64 `json:"closes"`  // connections the user agents closed
	Sent        int64 `json:"sent"`
	Accepted    int64 `json:"accepted"`
	PostErrors  int64 `json:"post_errors"`
	Received    int64 `json:"received"`
	Acked       int64 `json:"acked"`
	// Problems the user agents saw.
	DupAfterAck int64 `json:"dup_after_ack"`
	RedelivUnac int64 `json:"redelivered_unacked"`
	RedelivUnv  int64 `json:"redelivered_ack_unverified"`
	BadContent  int64 `json:"bad_content"`
	Misrouted   int64 `json:"misrouted"`
	Unknown     int64 `json:"unknown"`
	// Why handshakes failed and connections dropped (cumulative).
	Reasons map[string]int64 `json:"reasons,omitempty"`
	// Latencies since the last report: delivery (scheduled send to
	// arrival), POST answer, the application server's lag (scheduled to
	// actual send) and handshake (connect to the last register reply).
	Lat       []byte `json:"lat,omitempty"`
	Resp      []byte `json:"resp,omitempty"`
	Lag       []byte `json:"lag,omitempty"`
	Handshake []byte `json:"handshake,omitempty"`
	RSS       int64  `json:"rss"` // the worker's own RSS, bytes
	// Pings are the keepalives both ways (cumulative).
	Pings agent.Pings `json:"pings"`
}
