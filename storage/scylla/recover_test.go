package scylla

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/storage"
)

// recoverWithin is how soon after the cluster answers CQL again a store
// that lost every node must serve again (docs/storage.md).
const recoverWithin = 10 * time.Second

// TestStoreRecovers stops the CQL node whose directory is CQL_RECOVER_DIR
// (a node of tools/cql/start.sh that this test may stop), waits until the
// store has lost it (ErrUnavailable, the driver holding no node up),
// restarts it from its directory (start.sh with CQL_RESTART=1) and checks
// that the store serves again within recoverWithin of the node answering
// CQL, with what it stored before. The restarted node is left running,
// its PID in CQL_RECOVER_DIR/cassandra.pid (tools/cql/stop.sh "" DIR
// stops it). It only runs when asked to.
//
// With one node, what brings the store back is the driver's control
// connection, redialed every second whatever the Config, which refills
// the pool of the node it reaches: this test passes with gocql's 60 s
// ReconnectInterval too. The interval matters for the other nodes of a
// cluster, which one node cannot show.
func TestStoreRecovers(t *testing.T) {
	dir := os.Getenv("CQL_RECOVER_DIR")
	if dir == "" {
		t.Skip("set CQL_RECOVER_DIR to the directory of a node of tools/cql/start.sh this test may stop and restart")
	}
	pid, host := nodeOfDir(t, dir)
	cfg := DefaultConfig()
	cfg.Hosts, cfg.Keyspace, cfg.Consistency = []string{host}, randomKeyspace(), "ONE"
	cfg.Timeout = 10 * time.Second // a node just restarted is slow to drop a keyspace
	ok(t, ApplySchema(tctx(t), cfg, testReplication), "ApplySchema")
	s, err := New(tctx(t), cfg)
	ok(t, err, "New")
	t.Cleanup(func() { _ = s.Close() })
	uaid, chid := uuid.New(), uuid.New()
	user := storage.User{UAID: uaid, RouterType: "webpush", NodeID: "http://n1", ConnectedAt: time.Now().UnixMilli()}
	ok(t, s.ConnectNew(tctx(t), user, uuid.New()), "first register")
	key := storage.NewSortKey()
	ok(t, s.SaveMessage(tctx(t), uaid, storage.Message{CHID: chid, SortKey: key, TTL: 600, Version: "before"}), "save")

	stopped := time.Now()
	killAndWait(t, pid)
	for up := sessionUpHosts(s.session); up() > 0; {
		if time.Since(stopped) > time.Minute {
			t.Fatal("the driver still holds the node up a minute after it stopped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err = s.Health(c)
	cancel()
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("health with the node stopped: %v, want ErrUnavailable", err)
	}
	t.Logf("node %d stopped; the driver held it down after %v", pid, time.Since(stopped).Round(time.Millisecond))

	restart := time.Now()
	newPID := restartNode(t, dir)
	ready := time.Now()
	t.Logf("node restarted as %d, answering CQL %v after start.sh began, %v after it stopped",
		newPID, ready.Sub(restart).Round(time.Millisecond), ready.Sub(stopped).Round(time.Millisecond))
	t.Cleanup(func() { ok(t, s.session.Query("DROP KEYSPACE IF EXISTS "+cfg.Keyspace).Exec(), "drop keyspace") })
	for {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.Health(c)
		cancel()
		if err == nil {
			break
		}
		if time.Since(ready) > recoverWithin {
			t.Fatalf("the store still fails %v after the node answered CQL: %v", recoverWithin, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the store served again %v after the node answered CQL", time.Since(ready).Round(time.Millisecond))

	got, err := s.GetUser(tctx(t), uaid)
	if err != nil || got.NodeID != user.NodeID {
		t.Fatalf("the record after the restart: %+v, %v", got, err)
	}
	msgs, err := s.TimestampMessages(tctx(t), uaid, 0, 10)
	if err != nil || len(msgs) != 1 || msgs[0].Version != "before" {
		t.Fatalf("the messages after the restart: %+v, %v; want the one stored before", msgs, err)
	}
	ok(t, s.SaveMessage(tctx(t), uaid, storage.Message{CHID: chid, SortKey: storage.NewSortKey(), TTL: 600, Version: "after"}), "save after")
}

// nodeOfDir reads the PID and the CQL address of the node of a start.sh
// directory.
func nodeOfDir(t *testing.T, dir string) (int, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cassandra.pid"))
	ok(t, err, "read cassandra.pid")
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 || !proc.Running(pid) {
		t.Fatalf("%s/cassandra.pid: %q is not a running node", dir, b)
	}
	y, err := os.Open(filepath.Join(dir, "cassandra.yaml"))
	ok(t, err, "open cassandra.yaml")
	defer y.Close()
	var addr, port string
	for sc := bufio.NewScanner(y); sc.Scan(); {
		if v, found := strings.CutPrefix(sc.Text(), "rpc_address: "); found {
			addr = strings.TrimSpace(v)
		}
		if v, found := strings.CutPrefix(sc.Text(), "native_transport_port: "); found {
			port = strings.TrimSpace(v)
		}
	}
	if net.ParseIP(addr) == nil || !net.ParseIP(addr).IsLoopback() || port == "" {
		t.Fatalf("%s/cassandra.yaml: rpc_address %q, native_transport_port %q: not a loopback node", dir, addr, port)
	}
	return pid, net.JoinHostPort(addr, port)
}

// restartNode starts the stopped node of dir again with tools/cql/start.sh
// and returns its PID once it answers CQL.
func restartNode(t *testing.T, dir string) int {
	t.Helper()
	cmd := exec.Command("bash", "../../tools/cql/start.sh")
	cmd.Env = append(os.Environ(), "CQL_RESTART=1", "CQL_DIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	ok(t, err, "tools/cql/start.sh with CQL_RESTART=1")
	for line := range strings.Lines(string(out)) {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), "CQL_PID="); found {
			pid, err := strconv.Atoi(v)
			ok(t, err, "CQL_PID")
			return pid
		}
	}
	t.Fatalf("start.sh printed no CQL_PID:\n%s", out)
	return 0
}
