package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/storage/scylla"
)

// TestStartFailureStopsWhatStarted: when a child fails to start (the
// endpoint given a bad setting, once the engines run), startCluster returns
// that child's error, and what it had started is gone: the engines' PIDs,
// the keyspace, the scratch directory.
func TestStartFailureStopsWhatStarted(t *testing.T) {
	cfg := smallConfig(t, scenario.Broadcast) // engines, a Megaphone, an endpoint
	logDir := t.TempDir()
	scratch := t.TempDir()
	t.Setenv("TMPDIR", scratch) // where startCluster makes its scratch directory
	// The operator's settings win over the run's (passThrough). On the
	// embedded store the one autopush process is the child that fails.
	bad := "AUTOEND__MAX_CONNECTIONS"
	if len(cfg.CQLHosts) == 0 {
		bad = "AUTOPUSH__ENDPOINT_MAX_CONNECTIONS"
	}
	t.Setenv(bad, "many")
	log := &lineLog{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := startCluster(ctx, &cfg, logDir, log)
	if c != nil || err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "exited before it started") {
		t.Fatalf("startCluster: %v, %v; want nil and the failed child's error naming %s", c, err, bad)
	}
	pids := startedPIDs(t, logDir, "autoconnect-*.log")
	if len(cfg.CQLHosts) > 0 && len(pids) != cfg.EngineCount() {
		t.Fatalf("%d engines logged their start, want %d (each before the endpoint)", len(pids), cfg.EngineCount())
	}
	for _, pid := range pids {
		// Reaped by Stop: a PID that was stopped no longer exists.
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("engine pid %d still exists after the failed start (kill 0: %v)", pid, err)
		}
	}
	if left, _ := os.ReadDir(scratch); len(left) != 0 {
		t.Errorf("scratch left behind: %v", left)
	}
	if ks := log.find(`loadtest: keyspace (\S+) on`); ks != "" {
		sc := scylla.DefaultConfig()
		sc.Hosts, sc.Keyspace = cfg.CQLHosts, ks
		s, err := scylla.New(ctx, sc)
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("keyspace %s after the failed start: %v; want it dropped", ks, err)
		}
	} else if len(cfg.CQLHosts) > 0 {
		t.Errorf("no keyspace logged")
	}
}

// startedPIDs reads the Pid of each child whose log (in dir, matching
// glob) has a MozLog line: the children that ran.
func startedPIDs(t *testing.T, dir, glob string) []int {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			var rec struct{ Pid int }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Pid > 0 {
				pids = append(pids, rec.Pid)
				break
			}
		}
	}
	return pids
}

// lineLog is a run's log: to the test's, and kept for find. Safe for
// concurrent use (stop logs from a goroutine per process).
type lineLog struct {
	t   *testing.T
	mu  sync.Mutex
	all strings.Builder
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.Write(p)
}

// find returns the first submatch of expr in the log ("" when none).
func (l *lineLog) find(expr string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := regexp.MustCompile(expr).FindStringSubmatch(l.all.String()); m != nil {
		return m[1]
	}
	return ""
}
