// Package localcluster runs a real Apache Cassandra cluster on this
// machine for tests, the load tester and `make cluster`: several nodes on
// 127.0.0.1, 127.0.0.2, ... (tools/cql/cluster.sh), which a test can stop,
// kill and start again one at a time, same address, ports and data
// (tools/cql/start.sh with CQL_RESTART=1).
//
// Nodes are signalled by their PIDs only (through tools/cql/stop.sh, which
// checks that the PID is a Cassandra daemon running from the node's
// directory), never by name. Nodes run in sessions of their own, each
// watched for this process (start.sh's CQL_OWNER_PID): when it ends
// without Close, SIGTERM or SIGKILL, its nodes are stopped by their PIDs
// and their directories removed. A start cut short (its context ended)
// is ended by SIGTERM, so that the scripts stop the nodes they started.
package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/autopush-go/autopush/internal/proc"
)

// Replication is the keyspace replication of a cluster of n nodes: every
// node holds every row, so a quorum survives one node down.
func Replication(n int) string {
	return fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", n)
}

// Options configure Start. The zero value starts three nodes with the
// scripts' defaults.
type Options struct {
	// Nodes is the cluster's size, 1..9. Default 3.
	Nodes int
	// Heap is each node's maximum JVM heap (CQL_HEAP). Default the
	// script's (768m).
	Heap string
	// Dir holds the nodes' directories. Default: a fresh temporary one.
	Dir string
	// Log receives the scripts' progress. Default io.Discard.
	Log io.Writer
	// ScriptDir is tools/cql. Default: found from this source file.
	ScriptDir string
}

// Cluster is a running cluster. Its methods are safe for concurrent use.
type Cluster struct {
	// Hosts are the nodes' CQL addresses, host:port, in node order.
	Hosts   []string
	scripts string
	log     io.Writer
	heap    string

	mu    sync.Mutex
	nodes []node
}

type node struct {
	dir string
	pid int // 0 while stopped
}

// Start starts the cluster and waits until every node answers CQL.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.ScriptDir == "" {
		o.ScriptDir = scriptDir()
	}
	env := []string{"CQL_NODES=" + strconv.Itoa(o.Nodes), owner()}
	if o.Heap != "" {
		env = append(env, "CQL_HEAP="+o.Heap)
	}
	if o.Dir != "" {
		env = append(env, "CQL_CLUSTER_DIR="+o.Dir)
	}
	out, err := script(ctx, o.ScriptDir, "cluster.sh", env, o.Log)
	if err != nil {
		return nil, fmt.Errorf("localcluster: start %d nodes: %w", o.Nodes, err)
	}
	vars := parseVars(out)
	c := &Cluster{Hosts: strings.Split(vars["CQL_HOSTS"], ","), scripts: o.ScriptDir, log: o.Log, heap: o.Heap}
	pids, dirs := strings.Fields(vars["CQL_PIDS"]), strings.Fields(vars["CQL_DIRS"])
	if len(pids) != o.Nodes || len(dirs) != o.Nodes || len(c.Hosts) != o.Nodes {
		return nil, fmt.Errorf("localcluster: cluster.sh printed %q", out)
	}
	for i := range pids {
		pid, err := strconv.Atoi(pids[i])
		if err != nil {
			return nil, fmt.Errorf("localcluster: pid %q: %w", pids[i], err)
		}
		c.nodes = append(c.nodes, node{dir: dirs[i], pid: pid})
	}
	return c, nil
}

// Nodes is the cluster's size.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// PID is node i's process id, 0 while it is stopped.
func (c *Cluster) PID(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].pid
}

// Dir is node i's directory (config, data, logs/system.log).
func (c *Cluster) Dir(i int) string { return c.nodes[i].dir }

// Stop stops node i cleanly (SIGTERM, SIGKILL after 30 s), keeping its
// data for Restart.
func (c *Cluster) Stop(ctx context.Context, i int) error {
	return c.down(ctx, i, false)
}

// Kill stops node i with SIGKILL, as a crash would, keeping its data.
func (c *Cluster) Kill(ctx context.Context, i int) error {
	return c.down(ctx, i, true)
}

func (c *Cluster) down(ctx context.Context, i int, kill bool) error {
	c.mu.Lock()
	n := c.nodes[i]
	c.mu.Unlock()
	if n.pid == 0 {
		return nil
	}
	if kill {
		// stop.sh checks the PID is this node's daemon before it signals;
		// SIGKILL first leaves it only the check and the wait.
		if isNode(n.pid, n.dir) {
			if err := syscall.Kill(n.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("localcluster: kill node %d: %w", i+1, err)
			}
			// A killed process's command line empties before it is gone,
			// which stop.sh would take for "not ours": wait here.
			if err := proc.WaitGone(ctx, n.pid); err != nil {
				return fmt.Errorf("localcluster: kill node %d: %w", i+1, err)
			}
		}
	}
	if _, err := script(ctx, c.scripts, "stop.sh", []string{"KEEP_CQL_DIR=1"}, c.log, strconv.Itoa(n.pid), n.dir); err != nil {
		return fmt.Errorf("localcluster: stop node %d: %w", i+1, err)
	}
	c.mu.Lock()
	c.nodes[i].pid = 0
	c.mu.Unlock()
	return nil
}

// Restart starts stopped node i again, same address, ports and data, and
// waits until it answers CQL.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	c.mu.Lock()
	n := c.nodes[i]
	c.mu.Unlock()
	if n.pid != 0 {
		return fmt.Errorf("localcluster: restart node %d: it runs (pid %d)", i+1, n.pid)
	}
	env := []string{"CQL_RESTART=1", "CQL_DIR=" + n.dir, owner()}
	if c.heap != "" {
		env = append(env, "CQL_HEAP="+c.heap)
	} else {
		env = append(env, "CQL_HEAP=768m")
	}
	out, err := script(ctx, c.scripts, "start.sh", env, c.log)
	if err != nil {
		return fmt.Errorf("localcluster: restart node %d: %w", i+1, err)
	}
	pid, err := strconv.Atoi(parseVars(out)["CQL_PID"])
	if err != nil {
		return fmt.Errorf("localcluster: restart node %d: start.sh printed %q", i+1, out)
	}
	c.mu.Lock()
	c.nodes[i].pid = pid
	c.mu.Unlock()
	return nil
}

// Close stops every node that runs and removes the nodes' directories.
func (c *Cluster) Close() error {
	c.mu.Lock()
	var pids, dirs []string
	for _, n := range c.nodes {
		pids, dirs = append(pids, strconv.Itoa(n.pid)), append(dirs, n.dir)
	}
	c.mu.Unlock()
	_, err := script(context.Background(), c.scripts, "cluster-stop.sh", nil, c.log,
		strings.Join(pids, " "), strings.Join(dirs, " "))
	if err != nil {
		return fmt.Errorf("localcluster: close: %w", err)
	}
	return nil
}

// isNode tells whether pid is a Cassandra daemon running from dir.
func isNode(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	cmd := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
	return strings.Contains(cmd, "org.apache.cassandra.service.CassandraDaemon") &&
		strings.Contains(cmd, "-Dcassandra.storagedir="+dir+" ")
}

// owner is the start scripts' CQL_OWNER_PID: this process.
func owner() string { return "CQL_OWNER_PID=" + strconv.Itoa(os.Getpid()) }

// scriptStopTime bounds a script's exit after SIGTERM: stop.sh gives a
// node 30 s before SIGKILL, and a cluster's starts stop theirs at once.
const scriptStopTime = 2 * time.Minute

// script runs tools/cql/name with args, its stderr to log; its stdout.
// When ctx ends first the script gets SIGTERM (not exec's SIGKILL, which
// would leave the nodes it started running), then SIGKILL after
// scriptStopTime.
func script(ctx context.Context, dir, name string, env []string, log io.Writer, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(dir, name)}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = scriptStopTime
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(log, &tail{b: &errb})
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w\n%s", name, err, errb.String())
	}
	return out.String(), nil
}

// tail keeps the last 4 KiB written, for error messages.
type tail struct{ b *bytes.Buffer }

func (t *tail) Write(p []byte) (int, error) {
	t.b.Write(p)
	if t.b.Len() > 4096 {
		rest := append([]byte(nil), t.b.Bytes()[t.b.Len()-4096:]...)
		t.b.Reset()
		t.b.Write(rest)
	}
	return len(p), nil
}

// parseVars reads the scripts' NAME=value lines (values maybe "quoted").
func parseVars(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok {
			m[k] = strings.Trim(v, `"`)
		}
	}
	return m
}

// scriptDir is tools/cql, from this file's place in the source tree.
func scriptDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}
