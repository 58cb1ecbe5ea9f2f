package scylla

import (
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/autopush-go/autopush/storage"
)

// Config configures the connection to the cluster and the expiry of router
// records. Start from DefaultConfig; the zero value is not valid.
type Config struct {
	// Hosts are the contact points, "host" or "host:port" (port 9042 when
	// omitted). The driver discovers the rest of the cluster from them.
	// Default ["127.0.0.1:9042"].
	Hosts []string

	// Keyspace holds the tables; ApplySchema creates it. Default
	// "autopush".
	Keyspace string

	// Consistency is the level of each class of statement whose own
	// setting below is empty: "LOCAL_QUORUM" (default), "QUORUM",
	// "LOCAL_ONE", "ONE", "TWO", "THREE" or "ALL" (any case). ANY,
	// EACH_QUORUM and the SERIAL levels are rejected here and in the
	// classes: they are not valid for reads, writes and LWT commits alike.
	// A read sees every acknowledged write only when the read's and the
	// write's replicas overlap (R + W > RF: QUORUM-class levels on both
	// sides); docs/storage.md says which statement is in which class.
	Consistency string

	// RouterWriteConsistency is the level of the router writes: a user
	// agent's connection record (hello, node_id clears), its channels and
	// the user's drop. Default "" (Consistency).
	RouterWriteConsistency string

	// MessageWriteConsistency is the level of the message writes: stored
	// messages and their deletes (acks), the read cursor, broadcasts and
	// the outbound sender's tables (the commit of its LWTs, whose Paxos
	// phase stays LOCAL_SERIAL). Default "" (Consistency).
	MessageWriteConsistency string

	// ReadConsistency is the level of every SELECT but the serial reads
	// that settle an LWT's unknown outcome (LOCAL_SERIAL). Default ""
	// (Consistency).
	ReadConsistency string

	// LocalDC, when set, keeps queries in that datacenter: token-aware
	// routing over DC-aware round robin. When empty, token-aware over
	// plain round robin across all nodes. Default "".
	LocalDC string

	// ConnectTimeout bounds dialing and the connection handshake. Default
	// 5s.
	ConnectTimeout time.Duration

	// Timeout bounds each query attempt (the caller's context bounds the
	// whole call, retries included). Default 2s.
	Timeout time.Duration

	// Retries is how many times a failed query is retried on the next host
	// (gocql SimpleRetryPolicy: no sleep, so the caller's deadline is the
	// only wait). Every plain statement of this package is idempotent, so
	// retrying it is safe; LWTs are retried after an error the server
	// answered (casPush tells its own write), counter increments only
	// when they certainly did not run (onceRetry). Default 2.
	Retries int

	// SpeculativeAttempts is how many more executions of a read the driver
	// starts, each SpeculativeDelay after the last, while the first has
	// not answered: a read whose coordinator hangs (a node stopping, a
	// long GC pause) is answered by another node instead of waiting
	// Timeout. Reads only: never writes (they would double the write load
	// when the cluster is slow) nor LWTs and serial reads (extra Paxos
	// rounds contend). gocql returns the first execution to finish, even
	// a failure, so a speculative execution that finds no other node up
	// would fail a read the first might still answer: none is started
	// while fewer than two nodes are up, and never more than the nodes
	// up besides one. 0 disables. Default 1.
	SpeculativeAttempts int

	// SpeculativeDelay is the wait before each speculative execution:
	// far above a healthy read (0.4 ms on one local node), so a healthy
	// cluster sends few extra reads, and a tenth of the default Timeout.
	// Below Timeout. Default 200ms.
	SpeculativeDelay time.Duration

	// ReconnectInterval is how often the driver redials the nodes it has
	// marked down, so a node that comes back is used again within about
	// this long. (The control connection is redialed every second anyway,
	// and the node it reaches gets its pool back at once. Another node is
	// used again on its UP event, but one that came back before the
	// control connection did sends none: it waits for this interval,
	// which gocql sets to 60 s.) Each down node costs one dial per
	// interval. Default 1s.
	ReconnectInterval time.Duration

	// NumConns is the number of connections per host (per shard on
	// ScyllaDB). Default 2.
	NumConns int

	// IdleTTL is how long a router record lives after the user agent last
	// connected: records idle longer expire, and with them (one
	// RefreshInterval later) their channels and cursor. Whole seconds.
	// Default 60 days, matching the router table's default_time_to_live.
	IdleTTL time.Duration

	// RefreshInterval is how often Connect rewrites a user's channel rows
	// to push back their expiry (channels live IdleTTL+RefreshInterval
	// from their last refresh, so an active user never loses them while an
	// idle user's partition expires as a whole). Whole seconds. Default
	// 24h.
	RefreshInterval time.Duration

	// Username and Password enable PasswordAuthenticator when Username is
	// set. Default "" (no authentication).
	Username string
	Password string

	// QueryObserver, when set, sees every query attempt (tests count the
	// statements a caller makes; diagnostics time them). Default nil.
	QueryObserver gocql.QueryObserver
	// BatchObserver, when set, sees every batch attempt.
	BatchObserver gocql.BatchObserver

	// Logger receives the driver's own messages (reconnect attempts while
	// a node is down, schema events), at Warn level. Default
	// slog.Default().
	Logger *slog.Logger
}

// Defaults of Config, see the field comments.
const (
	DefaultKeyspace            = "autopush"
	DefaultConsistency         = "LOCAL_QUORUM"
	DefaultConnectTimeout      = 5 * time.Second
	DefaultTimeout             = 2 * time.Second
	DefaultRetries             = 2
	DefaultSpeculativeAttempts = 1
	DefaultSpeculativeDelay    = 200 * time.Millisecond
	DefaultReconnectInterval   = time.Second
	DefaultNumConns            = 2
	DefaultIdleTTL             = 60 * 24 * time.Hour
	DefaultRefreshInterval     = 24 * time.Hour
)

// DefaultConfig returns a Config for a local node on 127.0.0.1:9042.
func DefaultConfig() Config {
	return Config{
		Hosts:               []string{"127.0.0.1:9042"},
		Keyspace:            DefaultKeyspace,
		Consistency:         DefaultConsistency,
		ConnectTimeout:      DefaultConnectTimeout,
		Timeout:             DefaultTimeout,
		Retries:             DefaultRetries,
		SpeculativeAttempts: DefaultSpeculativeAttempts,
		SpeculativeDelay:    DefaultSpeculativeDelay,
		ReconnectInterval:   DefaultReconnectInterval,
		NumConns:            DefaultNumConns,
		IdleTTL:             DefaultIdleTTL,
		RefreshInterval:     DefaultRefreshInterval,
	}
}

// maxCassandraTTL is the largest TTL Cassandra accepts (20 years); channel
// rows carry IdleTTL+RefreshInterval, so the sum must fit.
const maxCassandraTTL = 20 * 365 * 24 * time.Hour

// keyspaceName is what Cassandra accepts unquoted (and case-folds to lower
// case, so upper case is refused here to avoid surprises); the keyspace is
// spliced into DDL, so nothing else may pass.
var keyspaceName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// Validate reports the first problem of c, wrapping storage.ErrInvalid, so
// that a bad deployment fails at startup rather than on the first request.
func (c *Config) Validate() error {
	if err := c.validateHosts(); err != nil {
		return err
	}
	if !keyspaceName.MatchString(c.Keyspace) {
		return invalidConfig("keyspace %q is not 1-48 of [a-z0-9_] starting with a letter", c.Keyspace)
	}
	if _, err := c.levels(); err != nil {
		return err
	}
	if c.ConnectTimeout <= 0 || c.Timeout <= 0 {
		return invalidConfig("connect timeout %v and timeout %v must be positive", c.ConnectTimeout, c.Timeout)
	}
	if c.Retries < 0 || c.Retries > 10 {
		return invalidConfig("retries %d is outside 0..10", c.Retries)
	}
	if err := c.validateDriver(); err != nil {
		return err
	}
	if c.NumConns < 1 || c.NumConns > 64 {
		return invalidConfig("num conns %d is outside 1..64", c.NumConns)
	}
	if err := c.validateExpiry(); err != nil {
		return err
	}
	if c.Username == "" && c.Password != "" {
		return invalidConfig("password set without username")
	}
	return nil
}

func (c *Config) validateHosts() error {
	if len(c.Hosts) == 0 {
		return invalidConfig("no hosts")
	}
	for _, h := range c.Hosts {
		host, port := h, ""
		if strings.Contains(h, ":") {
			var err error
			if host, port, err = net.SplitHostPort(h); err != nil {
				return invalidConfig("host %q: %v", h, err)
			}
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				return invalidConfig("host %q: port is not 1..65535", h)
			}
		}
		if host == "" {
			return invalidConfig("host %q has no address", h)
		}
	}
	return nil
}

// validateDriver checks the speculative executions and the reconnect
// interval.
func (c *Config) validateDriver() error {
	if c.SpeculativeAttempts < 0 || c.SpeculativeAttempts > 10 {
		return invalidConfig("speculative attempts %d is outside 0..10", c.SpeculativeAttempts)
	}
	// A delay of Timeout or more would start an execution only once the
	// first has already failed.
	if c.SpeculativeAttempts > 0 && (c.SpeculativeDelay <= 0 || c.SpeculativeDelay >= c.Timeout) {
		return invalidConfig("speculative delay %v is not between 0 and the timeout %v", c.SpeculativeDelay, c.Timeout)
	}
	// Below 100 ms the redials of a down node would spin.
	if c.ReconnectInterval < 100*time.Millisecond {
		return invalidConfig("reconnect interval %v is below 100ms", c.ReconnectInterval)
	}
	return nil
}

func (c *Config) validateExpiry() error {
	if c.IdleTTL < time.Second || c.IdleTTL%time.Second != 0 {
		return invalidConfig("idle ttl %v is not a positive whole number of seconds", c.IdleTTL)
	}
	if c.RefreshInterval < time.Second || c.RefreshInterval%time.Second != 0 {
		return invalidConfig("refresh interval %v is not a positive whole number of seconds", c.RefreshInterval)
	}
	if c.IdleTTL+c.RefreshInterval > maxCassandraTTL {
		return invalidConfig("idle ttl + refresh interval %v exceeds Cassandra's maximum TTL of 20 years", c.IdleTTL+c.RefreshInterval)
	}
	return nil
}

// levels parses the level of each class of statement, the class's own
// setting or, when empty, Consistency.
func (c *Config) levels() ([numClasses]gocql.Consistency, error) {
	var l [numClasses]gocql.Consistency
	fallback, err := parseLevel("consistency", c.Consistency)
	if err != nil {
		return l, err
	}
	for cl, setting := range [numClasses]string{
		classRead:         c.ReadConsistency,
		classRouterWrite:  c.RouterWriteConsistency,
		classMessageWrite: c.MessageWriteConsistency,
	} {
		l[cl] = fallback
		if setting == "" {
			continue
		}
		if l[cl], err = parseLevel(opClass(cl).String()+" consistency", setting); err != nil {
			return l, err
		}
	}
	return l, nil
}

// parseLevel parses a level valid for reads, writes and LWT commits alike:
// the SERIAL levels are for an LWT's Paxos phase only, ANY cannot serve
// reads (and acknowledges a write no replica has), EACH_QUORUM is refused
// for reads by Cassandra.
func parseLevel(what, level string) (gocql.Consistency, error) {
	cl, err := gocql.ParseConsistencyWrapper(level)
	if err != nil {
		return 0, invalidConfig("%s %q: %v", what, level, err)
	}
	switch cl {
	case gocql.Any, gocql.EachQuorum, gocql.Serial, gocql.LocalSerial:
		return 0, invalidConfig("%s %s is not valid for reads, writes and LWT commits alike", what, cl)
	}
	return cl, nil
}

// idleTTL and channelTTL are the TTLs, in seconds, of the connection cells
// and of the channel rows and cursor.
func (c *Config) idleTTL() int    { return int(c.IdleTTL / time.Second) }
func (c *Config) channelTTL() int { return int((c.IdleTTL + c.RefreshInterval) / time.Second) }

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("scylla: config: %s: %w", fmt.Sprintf(format, args...), storage.ErrInvalid)
}
