package scylla

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/autopush-go/autopush/storage"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	if cfg.idleTTL() != 5184000 {
		t.Fatalf("default idle TTL %d s, want 5184000 (the router table's default_time_to_live)", cfg.idleTTL())
	}
	if cfg.channelTTL() != 5184000+86400 {
		t.Fatalf("default channel TTL %d s", cfg.channelTTL())
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mut  func(*Config)
		ok   bool
	}{
		{"no hosts", func(c *Config) { c.Hosts = nil }, false},
		{"empty host", func(c *Config) { c.Hosts = []string{""} }, false},
		{"port only", func(c *Config) { c.Hosts = []string{":9042"} }, false},
		{"bad port", func(c *Config) { c.Hosts = []string{"127.0.0.1:0"} }, false},
		{"port not a number", func(c *Config) { c.Hosts = []string{"db:cql"} }, false},
		{"host without port", func(c *Config) { c.Hosts = []string{"db1", "db2:19042"} }, true},
		{"ipv6 host", func(c *Config) { c.Hosts = []string{"[::1]:9042"} }, true},
		{"empty keyspace", func(c *Config) { c.Keyspace = "" }, false},
		{"keyspace injection", func(c *Config) { c.Keyspace = "ks; DROP KEYSPACE x" }, false},
		{"keyspace upper case", func(c *Config) { c.Keyspace = "Autopush" }, false},
		{"keyspace too long", func(c *Config) { c.Keyspace = "k" + strings.Repeat("x", 48) }, false},
		{"keyspace digits", func(c *Config) { c.Keyspace = "ap_2" }, true},
		{"consistency one lower case", func(c *Config) { c.Consistency = "one" }, true},
		{"consistency quorum", func(c *Config) { c.Consistency = "QUORUM" }, true},
		{"consistency local_one", func(c *Config) { c.Consistency = "LOCAL_ONE" }, true},
		{"consistency unknown", func(c *Config) { c.Consistency = "MOST" }, false},
		{"consistency any", func(c *Config) { c.Consistency = "ANY" }, false},
		{"consistency serial", func(c *Config) { c.Consistency = "SERIAL" }, false},
		{"consistency each quorum", func(c *Config) { c.Consistency = "EACH_QUORUM" }, false},
		{"consistency empty", func(c *Config) { c.Consistency = "" }, false},
		{"read quorum", func(c *Config) { c.ReadConsistency = "quorum" }, true},
		{"read one", func(c *Config) { c.ReadConsistency = "ONE" }, true},
		{"read unknown", func(c *Config) { c.ReadConsistency = "MOST" }, false},
		{"read any", func(c *Config) { c.ReadConsistency = "ANY" }, false},
		{"read each quorum", func(c *Config) { c.ReadConsistency = "EACH_QUORUM" }, false},
		{"read serial", func(c *Config) { c.ReadConsistency = "SERIAL" }, false},
		{"read local serial", func(c *Config) { c.ReadConsistency = "LOCAL_SERIAL" }, false},
		{"router write all", func(c *Config) { c.RouterWriteConsistency = "ALL" }, true},
		{"router write any", func(c *Config) { c.RouterWriteConsistency = "ANY" }, false},
		{"router write local serial", func(c *Config) { c.RouterWriteConsistency = "LOCAL_SERIAL" }, false},
		{"router write unknown", func(c *Config) { c.RouterWriteConsistency = "x" }, false},
		{"message write two", func(c *Config) { c.MessageWriteConsistency = "TWO" }, true},
		{"message write any", func(c *Config) { c.MessageWriteConsistency = "ANY" }, false},
		{"message write serial", func(c *Config) { c.MessageWriteConsistency = "SERIAL" }, false},
		{"message write each quorum", func(c *Config) { c.MessageWriteConsistency = "EACH_QUORUM" }, false},
		{"classes valid, fallback not", func(c *Config) {
			c.Consistency, c.ReadConsistency, c.RouterWriteConsistency, c.MessageWriteConsistency = "ANY", "ONE", "ONE", "ONE"
		}, false},
		{"no speculation", func(c *Config) { c.SpeculativeAttempts, c.SpeculativeDelay = 0, 0 }, true},
		{"negative speculation", func(c *Config) { c.SpeculativeAttempts = -1 }, false},
		{"too many speculations", func(c *Config) { c.SpeculativeAttempts = 11 }, false},
		{"speculation without delay", func(c *Config) { c.SpeculativeDelay = 0 }, false},
		{"speculation at the timeout", func(c *Config) { c.SpeculativeDelay = c.Timeout }, false},
		{"speculation after 1ms", func(c *Config) { c.SpeculativeDelay = time.Millisecond }, true},
		{"reconnect interval zero", func(c *Config) { c.ReconnectInterval = 0 }, false},
		{"reconnect interval 10ms", func(c *Config) { c.ReconnectInterval = 10 * time.Millisecond }, false},
		{"reconnect interval 100ms", func(c *Config) { c.ReconnectInterval = 100 * time.Millisecond }, true},
		{"zero connect timeout", func(c *Config) { c.ConnectTimeout = 0 }, false},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, false},
		{"negative retries", func(c *Config) { c.Retries = -1 }, false},
		{"zero retries", func(c *Config) { c.Retries = 0 }, true},
		{"zero conns", func(c *Config) { c.NumConns = 0 }, false},
		{"idle ttl zero", func(c *Config) { c.IdleTTL = 0 }, false},
		{"idle ttl fraction", func(c *Config) { c.IdleTTL = 1500 * time.Millisecond }, false},
		{"refresh zero", func(c *Config) { c.RefreshInterval = 0 }, false},
		{"ttl over cassandra max", func(c *Config) { c.IdleTTL = 20 * 365 * 24 * time.Hour }, false},
		{"password without user", func(c *Config) { c.Password = "x" }, false},
		{"user and password", func(c *Config) { c.Username, c.Password = "u", "p" }, true},
		{"local dc", func(c *Config) { c.LocalDC = "dc1" }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mut(&cfg)
			err := cfg.Validate()
			if tc.ok && err != nil {
				t.Fatalf("want valid, got %v", err)
			}
			if !tc.ok && !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("want an error wrapping ErrInvalid, got %v", err)
			}
		})
	}
}

func TestClusterConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Consistency = "local_one"
	cfg.Retries = 3
	c, err := clusterConfig(cfg, "ks")
	if err != nil {
		t.Fatal(err)
	}
	if c.Consistency != gocql.LocalOne || c.Keyspace != "ks" || c.Timeout != cfg.Timeout ||
		c.ConnectTimeout != cfg.ConnectTimeout || c.NumConns != cfg.NumConns || !c.DefaultIdempotence {
		t.Fatalf("cluster config %+v", c)
	}
	if rp, ok := c.RetryPolicy.(*gocql.SimpleRetryPolicy); !ok || rp.NumRetries != 3 {
		t.Fatalf("retry policy %#v", c.RetryPolicy)
	}
	if c.ReconnectInterval != time.Second {
		t.Fatalf("reconnect interval %v, want the default 1s (gocql's own is 60s)", c.ReconnectInterval)
	}
	if rp, ok := c.ReconnectionPolicy.(*gocql.ConstantReconnectionPolicy); !ok || rp.MaxRetries != 3 || rp.Interval != time.Second {
		t.Fatalf("reconnection policy %#v", c.ReconnectionPolicy)
	}
	if c.Authenticator != nil {
		t.Fatal("authenticator set without username")
	}
	cfg.Username, cfg.Password = "u", "p"
	if c, _ = clusterConfig(cfg, ""); c.Authenticator == nil {
		t.Fatal("no authenticator with username")
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Keyspace = "bad keyspace"
	if _, err := New(t.Context(), cfg); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("New with invalid config: %v", err)
	}
	if err := ApplySchema(t.Context(), DefaultConfig(), "{'class': 'SimpleStrategy'}; DROP KEYSPACE x"); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("ApplySchema with injected replication: %v", err)
	}
}

func TestSchemaStatements(t *testing.T) {
	stmts := schemaStatements("ks", testReplication)
	want := []string{
		"CREATE KEYSPACE IF NOT EXISTS ks\n  WITH replication = " + testReplication,
		"CREATE TABLE IF NOT EXISTS ks.router (",
		"CREATE TABLE IF NOT EXISTS ks.message (",
		"ALTER TABLE ks.message ADD tracked boolean",
		"CREATE TABLE IF NOT EXISTS ks.broadcast (",
		"CREATE TABLE IF NOT EXISTS ks.push (",
		"ALTER TABLE ks.push ADD client text",
		"CREATE TABLE IF NOT EXISTS ks.push_state (",
		"CREATE TABLE IF NOT EXISTS ks.sender_rate (",
		"CREATE TABLE IF NOT EXISTS ks.push_by_key (",
		"CREATE TABLE IF NOT EXISTS ks.push_open (",
		"CREATE TABLE IF NOT EXISTS ks.push_idempotency (",
		"CREATE TABLE IF NOT EXISTS ks.fate (",
		"CREATE TABLE IF NOT EXISTS ks.fate_expiry (",
		"CREATE TABLE IF NOT EXISTS ks.fate_bucket (",
		"CREATE TABLE IF NOT EXISTS ks.fate_count (",
		"CREATE TABLE IF NOT EXISTS ks.receipt_sub (",
		"CREATE TABLE IF NOT EXISTS ks.receipt_hook (",
		"CREATE TABLE IF NOT EXISTS ks.receipt_hook_by_key (",
		"CREATE TABLE IF NOT EXISTS ks.receipt (",
	}
	if len(stmts) != len(want) {
		t.Fatalf("%d statements, want %d:\n%s", len(stmts), len(want), strings.Join(stmts, "\n---\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(stmts[i], w) {
			t.Errorf("statement %d starts %q, want %q", i, firstLine(stmts[i]), w)
		}
		if strings.Contains(stmts[i], "--") || strings.Contains(stmts[i], "{ks}") {
			t.Errorf("statement %d keeps a comment or placeholder:\n%s", i, stmts[i])
		}
	}
}

func TestRemainingTTL(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := storage.Message{SortKey: uint64(now.Add(-10 * time.Second).UnixNano()), TTL: 60}
	if got := remainingTTL(&m, now); got != 50 {
		t.Fatalf("remaining %d, want 50", got)
	}
	m.SortKey++ // 50s and 1ns left: rounds up
	if got := remainingTTL(&m, now); got != 51 {
		t.Fatalf("remaining %d", got)
	}
	m.SortKey = uint64(now.Add(-59*time.Second - 500*time.Millisecond).UnixNano())
	if got := remainingTTL(&m, now); got != 1 {
		t.Fatalf("half a second left: remaining %d, want 1", got)
	}
	m.SortKey = uint64(now.Add(-60 * time.Second).UnixNano())
	if got := remainingTTL(&m, now); got != 0 {
		t.Fatalf("expired: remaining %d, want 0", got)
	}
}

// TestLevels: each class takes its own setting, or Consistency when the
// setting is empty.
func TestLevels(t *testing.T) {
	cfg := DefaultConfig()
	l, err := cfg.levels()
	if err != nil || l != [numClasses]gocql.Consistency{gocql.LocalQuorum, gocql.LocalQuorum, gocql.LocalQuorum} {
		t.Fatalf("default levels %v, %v; want LOCAL_QUORUM for every class", l, err)
	}
	cfg.Consistency = "one"
	cfg.RouterWriteConsistency = "quorum"
	l, err = cfg.levels()
	want := [numClasses]gocql.Consistency{classRead: gocql.One, classRouterWrite: gocql.Quorum, classMessageWrite: gocql.One}
	if err != nil || l != want {
		t.Fatalf("levels %v, %v; want %v", l, err, want)
	}
	cfg.MessageWriteConsistency, cfg.ReadConsistency = "ALL", "LOCAL_ONE"
	l, err = cfg.levels()
	want = [numClasses]gocql.Consistency{classRead: gocql.LocalOne, classRouterWrite: gocql.Quorum, classMessageWrite: gocql.All}
	if err != nil || l != want {
		t.Fatalf("levels %v, %v; want %v", l, err, want)
	}
	// The error names the setting at fault.
	cfg.MessageWriteConsistency = "ANY"
	if _, err := cfg.levels(); err == nil || !strings.Contains(err.Error(), "message write consistency ANY") {
		t.Fatalf("levels with message writes at ANY: %v", err)
	}
}
