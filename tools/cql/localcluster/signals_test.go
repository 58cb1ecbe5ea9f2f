package localcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/tools/cql/localcluster"
)

// The scripts and the package that start Cassandra nodes leave none
// running when they are ended early: by SIGTERM to their process group,
// as timeout(1) ends a command, or by SIGKILL, which no trap sees (the
// node's owner-watch.sh stops it). Each case starts real nodes and looks
// for the nodes of its directory in /proc afterwards; a node a failed
// case leaves is stopped by its PID.

// TestClusterScriptsStopTheirNodes: tools/test.sh (its node restarted
// meanwhile, as TestStoreRecovers does, so its PID is no longer the one
// it started), tools/cql/cluster.sh, and localcluster.Start cut short.
func TestClusterScriptsStopTheirNodes(t *testing.T) {
	localcluster.SkipUnlessGated(t, "")
	t.Run("test.sh SIGTERM after a restart", func(t *testing.T) {
		tmp := t.TempDir()
		// Benchmarks of an hour each: the step must still run when the
		// signal comes. With the default second each, they ended on
		// their own on a slow machine while the node was being
		// restarted, and the script's own stop raced the test's start.
		s := startScript(t, tmp, nil, "tools/test.sh", "bench", "1h")
		pid, dir := s.waitReady(t, 1)
		script := childOf(t, s.cmd.Process.Pid, "bash")
		step := waitChild(t, script, "go")
		// Stop and start the node again from its directory, as
		// TestStoreRecovers does in make test: another PID.
		runScript(t, []string{"KEEP_CQL_DIR=1"}, "tools/cql/stop.sh", strconv.Itoa(pid), dir)
		out := runScript(t, []string{"CQL_RESTART=1", "CQL_DIR=" + dir}, "tools/cql/start.sh")
		again, _ := strconv.Atoi(regexp.MustCompile(`CQL_PID=(\d+)`).FindStringSubmatch(out + "CQL_PID=0")[1])
		if !proc.Running(again) || again == pid {
			t.Fatalf("the node restarted as pid %d (was %d):\n%s", again, pid, out)
		}
		s.signal(t, syscall.SIGTERM)
		wantNoNodes(t, tmp, s)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the node's directory %s is left (%v)", dir, err)
		}
		if proc.Running(step) {
			t.Errorf("the step (pid %d) still runs after the script ended", step)
		}
	})
	t.Run("test.sh SIGTERM to the script alone while a step runs", func(t *testing.T) {
		// As make or a CI runner ends it: the signal reaches the script,
		// not the go test it waits for. Before, the script ran its trap
		// only once that step had ended (a test run: up to 25 minutes).
		tmp := t.TempDir()
		s := startScript(t, tmp, nil, "tools/test.sh", "bench")
		s.waitReady(t, 1)
		script := childOf(t, s.cmd.Process.Pid, "bash")
		step := waitChild(t, script, "go") // the benchmarks, minutes long
		if err := syscall.Kill(script, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.done:
		case <-time.After(time.Minute): // a stop takes seconds; the step minutes
			t.Fatalf("tools/test.sh still runs a minute after its SIGTERM:\n%s", s.out)
		}
		wantNoNodes(t, tmp, s)
		if proc.Running(step) {
			t.Errorf("the step (go, pid %d) still runs after the script ended", step)
		}
	})
	t.Run("test.sh SIGKILL", func(t *testing.T) {
		tmp := t.TempDir()
		s := startScript(t, tmp, nil, "tools/test.sh", "bench")
		s.waitReady(t, 1)
		s.signal(t, syscall.SIGKILL)
		wantNoNodes(t, tmp, s)
	})
	t.Run("cluster.sh SIGTERM while starting", func(t *testing.T) {
		tmp := t.TempDir()
		s := startScript(t, tmp, []string{"CQL_NODES=2", "CQL_CLUSTER_DIR=" + filepath.Join(tmp, "c")}, "tools/cql/cluster.sh")
		s.waitReady(t, 1) // one node up, the other maybe still starting
		s.signal(t, syscall.SIGTERM)
		wantNoNodes(t, tmp, s)
		if _, err := os.Stat(filepath.Join(tmp, "c")); !os.IsNotExist(err) {
			t.Errorf("the cluster's directory is left (%v)", err)
		}
	})
	t.Run("Start cut short", func(t *testing.T) {
		tmp := t.TempDir()
		t.Cleanup(func() { stopNodesUnder(t, tmp) })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		log := &apitiertest.SyncBuffer{}
		go func() {
			if waitLines(log, readyLine, 1, 10*time.Minute) {
				cancel()
			}
		}()
		c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 2, Dir: filepath.Join(tmp, "c"), Log: log})
		if err == nil {
			c.Close()
			t.Fatal("Start returned a cluster after its context ended")
		}
		if !readyLine.MatchString(log.String()) {
			t.Fatalf("Start failed before a node was up: %v", err)
		}
		waitNoNodes(t, tmp, log.String)
	})
}

// TestClusterOwnerKilled: a process holding a cluster of localcluster
// (this test binary, run again as ownerHelper) is SIGKILLed: its node is
// stopped all the same, and its directory removed.
func TestClusterOwnerKilled(t *testing.T) {
	localcluster.SkipUnlessGated(t, "")
	tmp := t.TempDir()
	t.Cleanup(func() { stopNodesUnder(t, tmp) })
	cmd := osexec.Command(os.Args[0], "-test.run=^TestOwnerHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "LOCALCLUSTER_OWNER_DIR="+filepath.Join(tmp, "c"))
	out := &apitiertest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	if !waitLines(out, regexp.MustCompile(`cluster up`), 1, 10*time.Minute) {
		cmd.Process.Kill()
		t.Fatalf("the helper's cluster did not come up:\n%s", out)
	}
	pids := nodesUnder(tmp)
	if len(pids) != 1 {
		t.Fatalf("nodes under the helper's directory: %v", pids)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitNoNodes(t, tmp, out.String)
	// The watcher removes the directory once the node has gone: a moment
	// after the last check, on a loaded machine.
	dir := filepath.Join(tmp, "c", "node1")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		_, err := os.Stat(dir)
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node's directory is left a minute after the node ended (%v)", err)
		}
	}
}

// TestOwnerHelper is TestClusterOwnerKilled's owner: it starts a
// one-node cluster and waits to be killed.
func TestOwnerHelper(t *testing.T) {
	dir := os.Getenv("LOCALCLUSTER_OWNER_DIR")
	if dir == "" {
		t.Skip("run by TestClusterOwnerKilled")
	}
	c, err := localcluster.Start(context.Background(), localcluster.Options{Nodes: 1, Dir: dir, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("cluster up", c.PID(0))
	select {} // until SIGKILL
}

// readyLine is start.sh's line for a node that answers CQL.
var readyLine = regexp.MustCompile(`ready on \S+ after \S+ \(pid (\d+)\)`)

// script is a script run under timeout(1), as make's callers run it.
type script struct {
	cmd  *osexec.Cmd
	out  *apitiertest.SyncBuffer
	done chan struct{}
}

// startScript runs the repository's script under `timeout -s TERM 1h`,
// with TMPDIR tmp and no CQL server given (so it starts its own).
func startScript(t *testing.T, tmp string, env []string, name string, args ...string) *script {
	t.Helper()
	t.Cleanup(func() { stopNodesUnder(t, tmp) })
	cmd := osexec.Command("timeout", append([]string{"-s", "TERM", "3600", "bash", name}, args...)...)
	cmd.Dir = repoRoot()
	cmd.Env = append(scriptEnv(), append([]string{"TMPDIR=" + tmp}, env...)...)
	s := &script{cmd: cmd, out: &apitiertest.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default: // timeout leads its own process group
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	})
	return s
}

// waitReady waits until n nodes answer CQL and returns the first's PID
// and directory.
func (s *script) waitReady(t *testing.T, n int) (int, string) {
	t.Helper()
	if !waitLines(s.out, readyLine, n, 10*time.Minute) {
		t.Fatalf("%s: no node up:\n%s", s.cmd.Args, s.out)
	}
	pid, _ := strconv.Atoi(readyLine.FindStringSubmatch(s.out.String())[1])
	m := regexp.MustCompile(`starting Cassandra in (\S+) `).FindStringSubmatch(s.out.String())
	if m == nil {
		t.Fatalf("no node directory in:\n%s", s.out)
	}
	return pid, m[1]
}

// signal sends sig to the script's process group (timeout leads it), as
// timeout(1) does when its time is up, and waits until timeout exits.
func (s *script) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case <-s.done:
		t.Fatalf("%s ended before the signal:\n%s", s.cmd.Args, s.out)
	default:
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("%s still runs 5 minutes after %v:\n%s", s.cmd.Args, sig, s.out)
	}
}

// wantNoNodes waits until no node runs from under tmp.
func wantNoNodes(t *testing.T, tmp string, s *script) {
	t.Helper()
	waitNoNodes(t, tmp, s.out.String)
}

// waitNoNodes waits (up to 2 minutes: stop.sh gives a node 30 s before
// SIGKILL) until no Cassandra node runs from a directory under tmp.
func waitNoNodes(t *testing.T, tmp string, output func() string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for pids := nodesUnder(tmp); len(pids) > 0; pids = nodesUnder(tmp) {
		if time.Now().After(deadline) {
			t.Fatalf("Cassandra still runs from under %s: pids %v\n%s", tmp, pids, output())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// nodesUnder lists the PIDs of the Cassandra daemons whose storage
// directory is under dir (read from /proc; only ever signalled by
// stopNodesUnder, by PID).
func nodesUnder(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		cmd := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		if strings.Contains(cmd, "org.apache.cassandra.service.CassandraDaemon") &&
			strings.Contains(cmd, "-Dcassandra.storagedir="+dir+"/") && proc.Running(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// stopNodesUnder stops, by PID, any node a failed case left under dir.
func stopNodesUnder(t *testing.T, dir string) {
	for _, pid := range nodesUnder(dir) {
		t.Logf("stopping node pid %d left under %s", pid, dir)
		cmd := osexec.Command("bash", filepath.Join(repoRoot(), "tools/cql/stop.sh"), strconv.Itoa(pid))
		cmd.Env = scriptEnv() // not make test's own node's CQL_DIR
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("stop pid %d: %v\n%s", pid, err, out)
		}
	}
}

// runScript runs a repository script to its end and returns its stdout.
func runScript(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := osexec.Command("bash", append([]string{name}, args...)...)
	cmd.Dir = repoRoot()
	cmd.Env = append(scriptEnv(), env...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, errb.String())
	}
	return string(out)
}

// scriptEnv is this process's environment without a CQL server or node
// owner of its own.
func scriptEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CQL_HOSTS", "CQL_PID", "CQL_DIR", "CQL_OWNER_PID", "CQL_CLUSTER_DIR":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// waitLines waits until re matches n times in out, or for d.
func waitLines(out *apitiertest.SyncBuffer, re *regexp.Regexp, n int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for len(re.FindAllString(out.String(), -1)) < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// childOf returns the PID of pid's child whose command name is comm.
func childOf(t *testing.T, pid int, comm string) int {
	t.Helper()
	if c := children(pid, comm); len(c) > 0 {
		return c[0]
	}
	t.Fatalf("pid %d has no child %q", pid, comm)
	return 0
}

// waitChild waits (up to 5 minutes) until pid has a child named comm.
func waitChild(t *testing.T, pid int, comm string) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		if c := children(pid, comm); len(c) > 0 {
			return c[0]
		}
		time.Sleep(100 * time.Millisecond) // polling /proc
	}
	t.Fatalf("pid %d started no %q in 5 minutes", pid, comm)
	return 0
}

// children lists pid's children named comm, from /proc.
func children(pid int, comm string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(string(b[close+1:]))
		if len(f) > 1 && string(b[open+1:close]) == comm && f[1] == strconv.Itoa(pid) {
			c, _ := strconv.Atoi(e.Name())
			out = append(out, c)
		}
	}
	return out
}
