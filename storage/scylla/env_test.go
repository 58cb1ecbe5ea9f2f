package scylla

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// The tests need a real CQL server: CQL_HOSTS (comma-separated host:port),
// as printed by tools/cql/start.sh.
const installHint = "CQL_HOSTS not set: run `make test`, which starts Cassandra via tools/cql/start.sh"

// testReplication is for the single test node.
const testReplication = "{'class': 'SimpleStrategy', 'replication_factor': 1}"

// cqlHosts returns CQL_HOSTS, or fails (in CI) or skips (elsewhere) with
// the install hint: never a silent skip.
func cqlHosts(tb testing.TB) []string {
	tb.Helper()
	h := os.Getenv("CQL_HOSTS")
	if h == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal(installHint)
		}
		tb.Skip(installHint)
	}
	return strings.Split(h, ",")
}

// testConfig is a Config on CQL_HOSTS and a fresh keyspace name; ONE, since
// the test node is alone; a generous timeout, since the node shares two
// cores with the tests.
func testConfig(tb testing.TB) Config {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Hosts = cqlHosts(tb)
	cfg.Keyspace = randomKeyspace()
	cfg.Consistency = "ONE"
	cfg.Timeout = 10 * time.Second
	return cfg
}

func randomKeyspace() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "t_" + hex.EncodeToString(b)
}

// tctx is a context bounded well below the test timeout.
func tctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return c
}

// newTestStore applies the schema to a fresh keyspace and opens a store on
// it; the store is closed and the keyspace dropped in Cleanup.
func newTestStore(tb testing.TB) *Store {
	tb.Helper()
	return newTestStoreWith(tb, testConfig(tb))
}

func newTestStoreWith(tb testing.TB, cfg Config) *Store {
	tb.Helper()
	createKeyspace(tb, cfg)
	s, err := New(tctx(tb), cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// createKeyspace applies the schema to cfg.Keyspace and drops the keyspace
// in Cleanup (registered first, so it runs after the store's Close).
func createKeyspace(tb testing.TB, cfg Config) {
	tb.Helper()
	if err := ApplySchema(tctx(tb), cfg, testReplication); err != nil {
		tb.Fatalf("ApplySchema: %v", err)
	}
	tb.Cleanup(func() { dropKeyspace(tb, cfg) })
}

// adminSession is shared by the tests to drop keyspaces and to inspect
// cells; it lives as long as the test binary.
var adminSession = sync.OnceValues(func() (*gocql.Session, error) {
	cfg := DefaultConfig()
	cfg.Hosts = strings.Split(os.Getenv("CQL_HOSTS"), ",")
	cfg.Consistency = "ONE"
	cfg.Timeout = 60 * time.Second
	c, err := clusterConfig(cfg, "")
	if err != nil {
		return nil, err
	}
	return c.CreateSession()
})

func admin(tb testing.TB) *gocql.Session {
	tb.Helper()
	s, err := adminSession()
	if err != nil {
		tb.Fatalf("admin session: %v", err)
	}
	return s
}

func dropKeyspace(tb testing.TB, cfg Config) {
	if err := admin(tb).Query("DROP KEYSPACE IF EXISTS " + cfg.Keyspace).Exec(); err != nil {
		tb.Errorf("drop keyspace %s: %v", cfg.Keyspace, err)
	}
}
