package session

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/autopush-go/autopush/engine/broadcast"
	"github.com/autopush-go/autopush/internal/protocol"
)

// Config is what a session needs of the node's settings (engine.Config
// documents each and its default).
type Config struct {
	HelloTimeout   time.Duration // upgrade to hello
	PingInterval   time.Duration // inbound silence before a keepalive ping
	PongTimeout    time.Duration // silence after that ping before closing
	MinClientPing  time.Duration // client pings closer than this close with 4774
	MaxUnacked     int           // notifications in flight before deliveries are busy
	MaxMessageSize int           // largest websocket message
	MessagePage    int           // stored messages read per check
	CursorLag      time.Duration // the read cursor stays this far behind now
	MsgLimit       int           // backlog messages (received before the hello) sent in one drain before the user is dropped; 0: no limit
	MaxChannels    int           // channels per user agent; 0: no limit
}

// Metrics are the counters transitions move. The node makes them in its
// metric set (names in engine/metrics.go); tests may leave any nil field
// unset only if no transition they drive uses it, so NewMetrics is the
// usual way to get one.
type Metrics struct {
	Upgrades, UpgradesRefused, UpgradesBad       *metrics.Counter
	Hellos, HelloNewUAID, Registers, Unregisters *metrics.Counter
	Acked, Nacked, Expired, Pings, Evictions     *metrics.Counter
	Overloaded                                   *metrics.Counter
	DeliveryAck                                  *metrics.PrometheusHistogram
	errors                                       map[string]*metrics.Counter

	// Broadcasts counts "broadcast" messages written; UAIDResets users
	// dropped for passing Config.MsgLimit.
	Broadcasts, UAIDResets *metrics.Counter
	http                   map[string]*metrics.Counter // plain HTTP on the public port, by HTTPRoutes
}

// ErrorKinds label why a connection was closed or a message refused
// (autoconnect_errors_total{kind}).
var ErrorKinds = []string{"bad_frame", "bad_json", "unknown_type", "no_hello", "hello_timeout",
	"pong_timeout", "ping_abuse", "bad_channel", "bad_key", "too_large", "storage", "binary_frame", "slow_reader",
	"too_many_channels"}

// NewMetrics registers the session counters in set under the names given,
// and errors_total{kind} for every ErrorKinds entry under errorsName.
func NewMetrics(set *metrics.Set, names MetricNames) *Metrics {
	m := &Metrics{
		Upgrades: set.NewCounter(names.Upgrades), UpgradesRefused: set.NewCounter(names.UpgradesRefused),
		UpgradesBad: set.NewCounter(names.UpgradesBad), Hellos: set.NewCounter(names.Hellos),
		HelloNewUAID: set.NewCounter(names.HelloNewUAID), Registers: set.NewCounter(names.Registers),
		Unregisters: set.NewCounter(names.Unregisters), Acked: set.NewCounter(names.Acked),
		Nacked: set.NewCounter(names.Nacked), Expired: set.NewCounter(names.Expired),
		Pings: set.NewCounter(names.Pings), Evictions: set.NewCounter(names.Evictions),
		Overloaded:  set.NewCounter(names.Overloaded),
		DeliveryAck: set.NewPrometheusHistogramExt(names.DeliveryAck, names.DeliveryAckBuckets),
		errors:      map[string]*metrics.Counter{},
	}
	for _, k := range ErrorKinds {
		m.errors[k] = set.NewCounter(names.Errors + `{kind="` + k + `"}`)
	}
	m.Broadcasts, m.UAIDResets = set.NewCounter(names.Broadcasts), set.NewCounter(names.UAIDResets)
	m.http = map[string]*metrics.Counter{}
	for _, r := range HTTPRoutes {
		m.http[r] = set.NewCounter(names.HTTP + `{route="` + r + `"}`)
	}
	return m
}

// MetricNames names the series NewMetrics registers.
type MetricNames struct {
	Upgrades, UpgradesRefused, UpgradesBad       string
	Hellos, HelloNewUAID, Registers, Unregisters string
	Acked, Nacked, Expired, Pings, Evictions     string
	Overloaded, DeliveryAck, Errors              string
	DeliveryAckBuckets                           []float64
	Broadcasts, UAIDResets, HTTP                 string
}

func (m *Metrics) fail(kind string) {
	if c := m.errors[kind]; c != nil {
		c.Inc()
	}
}

// Env is what every session of a node shares. Safe for concurrent use:
// its fields are set before the first transition and only the atomics
// change afterwards.
type Env struct {
	Config  Config
	Metrics *Metrics
	Log     *slog.Logger
	// Now is the clock (time.Now outside tests).
	Now func() time.Time
	// Epoch anchors the sessions' 32-bit relative times (ms); any fixed
	// instant before the first transition.
	Epoch time.Time
	// InFlight counts notifications written and not yet acked, node-wide.
	InFlight atomic.Int64
	// Draining is set when the node drains: upgrades and deliveries are
	// refused, hellos that finish are closed.
	Draining atomic.Bool
	// StorageDown is set while the node holds storage unreachable (its
	// health read failed; engine/storagewatch.go): upgrades are refused
	// with 503, hellos closed with 1013 without a storage call, direct
	// deliveries answered busy.
	StorageDown atomic.Bool
	// Full reports that the node holds as many connections as it may:
	// upgrades are refused. Nil: never full.
	Full func() bool

	// Broadcasts holds the node's broadcast versions and its clients'
	// subscriptions. Nil: the node knows no broadcast.
	Broadcasts *broadcast.Table
	// Version is the version.json served at /__version__ on the public
	// port (see http.go); nil serves "{}".
	Version []byte
	// Connections reports the node's open connections for /health. Nil: 0.
	Connections func() int64
}

// clock is ms since Epoch, wrapping at 2^32 (49 days): sessions compare
// only differences of it.
func (e *Env) clock(now time.Time) uint32 { return uint32(now.Sub(e.Epoch).Milliseconds()) }

// Host is the node as one connection's transition sees it: its place in
// the node's registry of user agents. The event loop implements it for
// the connection it is handling; calls happen on that loop.
type Host interface {
	// Enroll makes this connection the node's holder of the session's
	// UAID and has an older local connection of the same user agent
	// evicted; false when a newer connection holds it (then nothing
	// changes).
	Enroll() bool
	// Unenroll drops this connection's registration under the session's
	// UAID, if it holds it.
	Unenroll()
}

// Ctx carries one transition: the node's Env, the connection's Host, and
// the effects the transition produced, which the event loop applies in
// this order: write Out; if the connection is still open, queue Jobs in
// order; then close if Close is set; then reschedule at Due. A loop reuses
// a Ctx: Reset it before each transition.
type Ctx struct {
	*Env
	Host Host

	// Out holds the bytes to write to the connection, in order.
	Out []byte
	// Jobs are storage work for the node's workers; each Result comes back
	// through Session.Done on the session's loop.
	Jobs []Job
	// Close asks the loop to close the connection after writing Out.
	Close bool
	// Due is the session's next deadline in ms since the Unix epoch (the
	// loop's timer then calls Tick); 0 leaves it as it was.
	Due int64
	// bc and bcErr are scratch lists for the broadcasts a transition
	// sends, kept with the Ctx so that a fan-out allocates nothing.
	bc, bcErr []protocol.Broadcast
	// SentDirect and SentStored count the notifications in Out, and
	// Pending how many of them were added to the unacked list; should the
	// write of Out fail, Close(Pending) knows which were never written.
	SentDirect, SentStored, Pending int
}

// Reset empties the effects for the next transition, keeping the buffers.
func (x *Ctx) Reset() {
	clear(x.Jobs) // drop references to keys and pages
	clear(x.bc)
	clear(x.bcErr)
	x.Out, x.Jobs, x.bc, x.bcErr = x.Out[:0], x.Jobs[:0], x.bc[:0], x.bcErr[:0]
	x.Close, x.Due, x.Host = false, 0, nil
	x.SentDirect, x.SentStored, x.Pending = 0, 0, 0
}

func (x *Ctx) schedule(at time.Time) { x.Due = at.UnixMilli() }
