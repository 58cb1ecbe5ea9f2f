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
		"CREATE TABLE IF NOT EXISTS ks.broadcast (",
		"CREATE TABLE IF NOT EXISTS ks.push (",
		"ALTER TABLE ks.push ADD client text",
		"CREATE TABLE IF NOT EXISTS ks.push_state (",
		"CREATE TABLE IF NOT EXISTS ks.sender_rate (",
		"CREATE TABLE IF NOT EXISTS ks.push_by_key (",
		"CREATE TABLE IF NOT EXISTS ks.push_open (",
		"CREATE TABLE IF NOT EXISTS ks.push_idempotency (",
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
