package cqltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/storage/scylla"
)

// InstallHint says how to get a CQL server for these tests.
const InstallHint = "CQL_HOSTS not set: run `make test`, which starts Cassandra via tools/cql/start.sh " +
	"(needs Java 17 and Maven: apt-get install openjdk-17-jdk-headless maven)"

// Replication is the keyspace replication for the single test node.
const Replication = "{'class': 'SimpleStrategy', 'replication_factor': 1}"

// Hosts returns CQL_HOSTS, or fails the test (CI=true) or skips it with
// InstallHint: never a silent skip.
func Hosts(tb testing.TB) []string {
	tb.Helper()
	h := os.Getenv("CQL_HOSTS")
	if h == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal(InstallHint)
		}
		tb.Skip(InstallHint)
	}
	return strings.Split(h, ",")
}

// Config returns a scylla config on CQL_HOSTS for a fresh, not yet
// created keyspace named prefix_<random>: consistency ONE (one node) and
// a generous timeout (the node shares the machine's cores with the tests).
func Config(tb testing.TB, prefix string) scylla.Config {
	tb.Helper()
	cfg := scylla.DefaultConfig()
	cfg.Hosts = Hosts(tb)
	b := make([]byte, 8)
	rand.Read(b)
	cfg.Keyspace = prefix + "_" + hex.EncodeToString(b)
	cfg.Consistency = "ONE"
	cfg.Timeout = 10 * time.Second
	return cfg
}

// Keyspace is Config with the schema applied; the keyspace is dropped
// when the test ends.
func Keyspace(tb testing.TB, prefix string) scylla.Config {
	tb.Helper()
	cfg := Config(tb, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := scylla.DropKeyspace(ctx, cfg); err != nil {
			tb.Errorf("drop keyspace %s: %v", cfg.Keyspace, err)
		}
	})
	if err := scylla.ApplySchema(ctx, cfg, Replication); err != nil {
		tb.Fatalf("apply schema to %s: %v", cfg.Keyspace, err)
	}
	return cfg
}
