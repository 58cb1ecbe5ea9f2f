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

	// Consistency of every read and write: "LOCAL_QUORUM" (default),
	// "QUORUM", "LOCAL_ONE", "ONE", "TWO", "THREE" or "ALL" (any case).
	// Reads and writes use the same level, so with QUORUM-class levels a
	// read sees every acknowledged write. ANY, EACH_QUORUM and the SERIAL
	// levels are rejected: they are not valid for both reads and writes.
	Consistency string

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
	// only wait). Every statement of this package is idempotent, so
	// retrying is always safe. Default 2.
	Retries int

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

	// Logger receives the driver's own messages (reconnect attempts while
	// a node is down, schema events), at Warn level. Default
	// slog.Default().
	Logger *slog.Logger
}

// Defaults of Config, see the field comments.
const (
	DefaultKeyspace        = "autopush"
	DefaultConsistency     = "LOCAL_QUORUM"
	DefaultConnectTimeout  = 5 * time.Second
	DefaultTimeout         = 2 * time.Second
	DefaultRetries         = 2
	DefaultNumConns        = 2
	DefaultIdleTTL         = 60 * 24 * time.Hour
	DefaultRefreshInterval = 24 * time.Hour
)

// DefaultConfig returns a Config for a local node on 127.0.0.1:9042.
func DefaultConfig() Config {
	return Config{
		Hosts:           []string{"127.0.0.1:9042"},
		Keyspace:        DefaultKeyspace,
		Consistency:     DefaultConsistency,
		ConnectTimeout:  DefaultConnectTimeout,
		Timeout:         DefaultTimeout,
		Retries:         DefaultRetries,
		NumConns:        DefaultNumConns,
		IdleTTL:         DefaultIdleTTL,
		RefreshInterval: DefaultRefreshInterval,
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
	if _, err := c.consistency(); err != nil {
		return err
	}
	if c.ConnectTimeout <= 0 || c.Timeout <= 0 {
		return invalidConfig("connect timeout %v and timeout %v must be positive", c.ConnectTimeout, c.Timeout)
	}
	if c.Retries < 0 || c.Retries > 10 {
		return invalidConfig("retries %d is outside 0..10", c.Retries)
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

// consistency parses Consistency; SERIAL-class levels are for LWT only,
// ANY cannot serve reads and EACH_QUORUM is refused for reads by Cassandra.
func (c *Config) consistency() (gocql.Consistency, error) {
	cl, err := gocql.ParseConsistencyWrapper(c.Consistency)
	if err != nil {
		return 0, invalidConfig("consistency %q: %v", c.Consistency, err)
	}
	switch cl {
	case gocql.Any, gocql.EachQuorum, gocql.Serial, gocql.LocalSerial:
		return 0, invalidConfig("consistency %s is not valid for both reads and writes", cl)
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
