package loadtest

import "time"

// The coordinator drives each worker process with JSON lines: commands on
// the worker's stdin, events on its stdout (stderr is the worker's log).
// A worker runs one command at a time and answers each with a "done"
// event carrying its ID; it also reports "stats" every SampleEvery.

// WorkerEnv, when set in a process's environment, makes the load tester's
// binary (or a test binary's TestMain) run as a worker: see IsWorker.
const WorkerEnv = "AUTOPUSH_LOADTEST_WORKER"

// Command ops.
const (
	opSetup      = "setup"      // once, first: the worker's share of the run
	opConnect    = "connect"    // connect every user agent that is not connected
	opDisconnect = "disconnect" // close every connection (close handshake)
	opSend       = "send"       // one open-loop push phase
	opChurn      = "churn"      // start or stop cycling the user agents
	opDrain      = "drain"      // wait for every accepted push to be acked
	opAccount    = "account"    // the ledger's accounting of every push
	opStop       = "stop"       // close everything and exit
)

// command is one line on a worker's stdin.
type command struct {
	ID      int          `json:"id"`
	Op      string       `json:"op"`
	Setup   *setupArgs   `json:"setup,omitempty"`
	Connect *connectArgs `json:"connect,omitempty"`
	Send    *sendArgs    `json:"send,omitempty"`
	Churn   *churnArgs   `json:"churn,omitempty"`
	Drain   *drainArgs   `json:"drain,omitempty"`
}

// setupArgs is a worker's share of the run.
type setupArgs struct {
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
	Keys         bool          `json:"keys"`
	VAPIDPrivate string        `json:"vapid_private,omitempty"`
	VAPIDSubject string        `json:"vapid_subject,omitempty"`
	VAPIDReuse   time.Duration `json:"vapid_reuse"`
	PayloadSize  int           `json:"payload_size"`
	TTL          int           `json:"ttl"`
	SenderConns  int           `json:"sender_conns"`
	MaxInFlight  int           `json:"max_in_flight"`
	PushTimeout  time.Duration `json:"push_timeout"`
	Trace        bool          `json:"trace"`
}

// connectArgs connects every offline user agent, Rate per second.
type connectArgs struct {
	Rate float64 `json:"rate"`
	// Upto: only the first Upto user agents of the worker (hold's steps);
	// 0 means all.
	Upto int `json:"upto"`
}

// connectResult says how the connect command went.
type connectResult struct {
	Connected int     `json:"connected"` // ready at the end
	Attempts  int64   `json:"attempts"`
	Failures  int64   `json:"failures"`
	Seconds   float64 `json:"seconds"`
	Handshake []byte  `json:"handshake"` // latency of this command's handshakes
}

// Target choices of a send phase.
const (
	pickRoundRobin = "round-robin" // user agent seq % n (stored: every one gets the same share)
	pickRandom     = "random"
)

// sendArgs is one open-loop push phase of this worker.
type sendArgs struct {
	Rate     float64       `json:"rate"`     // this worker's share
	Duration time.Duration `json:"duration"` // schedule length; or Count
	Count    int           `json:"count"`    // pushes to schedule (0: Rate × Duration)
	Pick     string        `json:"pick"`
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

// sendResult is one push phase of one worker.
type sendResult struct {
	Scheduled int64            `json:"scheduled"`
	Seconds   float64          `json:"seconds"` // first scheduled send to last answer
	Hist      []byte           `json:"hist"`    // delivery latency, measured window
	Resp      []byte           `json:"resp"`    // POST answer latency, measured window
	Account   Accounting       `json:"account"`
	Errors    map[string]int64 `json:"errors"` // by status/errno and transport errno
}

// churnArgs starts (On) or stops user agents cycling.
type churnArgs struct {
	On          bool          `json:"on"`
	SessionMean time.Duration `json:"session_mean"`
	OfflineMean time.Duration `json:"offline_mean"`
}

// drainArgs waits until every accepted push was acked or Timeout, then
// listens Quiet longer.
type drainArgs struct {
	Timeout time.Duration `json:"timeout"`
	Quiet   time.Duration `json:"quiet"`
}

// drainResult says how the drain ended.
type drainResult struct {
	Unacked  int    `json:"unacked"`   // accepted pushes still unacked at the end
	LastRecv int64  `json:"last_recv"` // wall clock (Unix ns) of the latest first arrival
	Hist     []byte `json:"hist"`      // latency of first arrivals since the send phase began
}

// event is one line on a worker's stdout.
type event struct {
	Type    string         `json:"type"` // "stats", "done" or "fatal"
	ID      int            `json:"id,omitempty"`
	Err     string         `json:"err,omitempty"`
	Stats   *workerStats   `json:"stats,omitempty"`
	Connect *connectResult `json:"connect,omitempty"`
	Send    *sendResult    `json:"send,omitempty"`
	Drain   *drainResult   `json:"drain,omitempty"`
	Account *Accounting    `json:"account,omitempty"`
}

// workerStats are a worker's counters (cumulative) and the latencies
// since its last report.
type workerStats struct {
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
	// arrival), POST answer, sender lag (scheduled to actual send) and
	// handshake (connect to the last register reply).
	Lat       []byte `json:"lat,omitempty"`
	Resp      []byte `json:"resp,omitempty"`
	Lag       []byte `json:"lag,omitempty"`
	Handshake []byte `json:"handshake,omitempty"`
	RSS       int64  `json:"rss"` // the worker's own RSS, bytes
}
