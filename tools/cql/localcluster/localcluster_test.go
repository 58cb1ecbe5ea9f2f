package localcluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/tools/cql/localcluster"
)

// TestClusterKillAndRestartANode: a three-node cluster serves QUORUM reads and
// writes with one node killed, and the node, started again, rejoins with
// the writes it missed readable at ALL (every replica answering).
func TestClusterKillAndRestartANode(t *testing.T) {
	localcluster.SkipUnlessGated(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		for i := range c.Nodes() {
			if _, err := os.Stat(c.Dir(i)); !os.IsNotExist(err) {
				t.Errorf("node %d's directory %s left behind (%v)", i+1, c.Dir(i), err)
			}
		}
	}()
	s := session(t, c.Hosts)
	defer s.Close()
	exec(t, s.Query("CREATE KEYSPACE lc WITH replication = "+localcluster.Replication(3)))
	exec(t, s.Query("CREATE TABLE lc.kv (k int PRIMARY KEY, v int)"))

	pid := c.PID(1)
	if err := c.Kill(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if proc.Running(pid) {
		t.Fatalf("node 2 (pid %d) still runs after Kill", pid)
	}
	// Writes and reads at QUORUM with one replica gone. The first may
	// still go to the dead node's connections, which the driver has not
	// seen close yet ("connection closed waiting for response"): each is
	// retried until it succeeds, within a bound.
	for k := range 20 {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := s.Query("INSERT INTO lc.kv (k, v) VALUES (?, ?)", k, k*k).Consistency(gocql.Quorum).Exec()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("quorum write %d with node 2 down: %v", k, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var v int
	if err := s.Query("SELECT v FROM lc.kv WHERE k = 7").Consistency(gocql.Quorum).Scan(&v); err != nil || v != 49 {
		t.Fatalf("quorum read with node 2 down: %d, %v", v, err)
	}
	// ALL needs every replica: it fails while node 2 is down...
	if err := s.Query("SELECT v FROM lc.kv WHERE k = 7").Consistency(gocql.All).Scan(&v); err == nil {
		t.Fatal("a read at ALL succeeded with node 2 down: is the keyspace really replicated 3 times?")
	}
	if err := c.Restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if c.PID(1) == 0 || c.PID(1) == pid {
		t.Fatalf("node 2's pid after restart: %d (was %d)", c.PID(1), pid)
	}
	// ...and succeeds once it is back (the driver reconnects on its own;
	// the read repairs what node 2 missed).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := s.Query("SELECT v FROM lc.kv WHERE k = 7").Consistency(gocql.All).Scan(&v)
		if err == nil && v == 49 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read at ALL after node 2's restart: %d, %v", v, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func session(t *testing.T, hosts []string) *gocql.Session {
	t.Helper()
	cl := gocql.NewCluster(hosts...)
	cl.Timeout = 20 * time.Second
	cl.ReconnectInterval = time.Second
	cl.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 2}
	// Retried on another node when one dies under a query (the statements
	// here are idempotent).
	cl.DefaultIdempotence = true
	s, err := cl.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func exec(t *testing.T, q *gocql.Query) {
	t.Helper()
	if err := q.Exec(); err != nil {
		t.Fatalf("%s: %v", q.Statement(), err)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) { l.t.Logf("%s", p); return len(p), nil }
