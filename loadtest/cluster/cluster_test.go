package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/autopush-go/autopush/engine"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/storage/scylla"
)

// TestStartFailureStopsWhatStarted: when a child fails to start (the
// engines given a bad setting, once the endpoint runs), Start
// returns that child's error, and what it had started is gone: the
// endpoint's PID, the keyspace, the scratch directory.
func TestStartFailureStopsWhatStarted(t *testing.T) {
	cfg := testConfig(t, scenario.Broadcast) // a Megaphone, an endpoint, engines
	logDir := t.TempDir()
	scratch := t.TempDir()
	t.Setenv("TMPDIR", scratch) // where Start makes its scratch directory
	// The operator's settings win over the run's (passThrough). On the
	// embedded store the one autopush process is the child that fails.
	bad := "AUTOCONNECT__MAX_CONNECTIONS"
	if len(cfg.CQLHosts) == 0 {
		bad = "AUTOPUSH__ENDPOINT_MAX_CONNECTIONS"
	}
	t.Setenv(bad, "many")
	log := &lineLog{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, &cfg, logDir, log)
	if c != nil || err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "exited before it started") {
		t.Fatalf("Start: %v, %v; want nil and the failed child's error naming %s", c, err, bad)
	}
	pids := startedPIDs(t, logDir, "autoendpoint.log")
	if len(cfg.CQLHosts) > 0 && len(pids) != 1 {
		t.Fatalf("%d endpoints logged their start, want 1 (before the engines)", len(pids))
	}
	for _, pid := range pids {
		// Reaped by Stop: a PID that was stopped no longer exists.
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after the failed start (kill 0: %v)", pid, err)
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

// TestEndpointPortTakenStartsAgain: the endpoint's port, picked and
// released before it runs, is taken by another process before it listens;
// the endpoint (autopush on the embedded store) starts on another port,
// and the engines are told that one.
func TestEndpointPortTakenStartsAgain(t *testing.T) {
	cfg := testConfig(t, scenario.Broadcast)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	log := &lineLog{t: t}
	c := newCluster(&cfg, log)
	var picked []string
	c.pickAddr = func() (string, error) {
		if len(picked) == 0 {
			picked = append(picked, taken.Addr().String())
			return picked[0], nil
		}
		addr, err := freePort()
		picked = append(picked, addr)
		return addr, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err = c.start(ctx, t.TempDir())
	defer c.Stop()
	if err != nil {
		t.Fatalf("start with the endpoint's first port taken: %v", err)
	}
	if len(picked) != 2 || c.EndpointURL != "http://"+picked[1] {
		t.Fatalf("picked %v, endpoint on %s; want the second", picked, c.EndpointURL)
	}
	if log.find(`(`+regexp.QuoteMeta(picked[0])+` was taken before it listened)`) == "" {
		t.Errorf("the retry is not logged")
	}
	resp, err := http.Get(c.EndpointURL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s/health: %s", c.EndpointURL, resp.Status)
	}
	if c.single {
		return // the engine is the endpoint's own process
	}
	for _, e := range c.Engines {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", e.PID()))
		if err != nil {
			t.Fatal(err)
		}
		want := "AUTOCONNECT__ENDPOINT_URL=" + c.EndpointURL
		if !slices.Contains(strings.Split(string(env), "\x00"), want) {
			t.Errorf("engine pid %d not started with %s", e.PID(), want)
		}
	}
}

// TestStartListeningRetriesOnlyATakenPort: a child's start is tried again
// on another port only when it reports its own address in use, at most
// listenAttempts times.
func TestStartListeningRetriesOnlyATakenPort(t *testing.T) {
	taken := func(addr string) error {
		return fmt.Errorf("proc: x exited before it started:\nx: endpoint-listen %s: address already in use by another process (a second node on this host needs addresses of its own); set endpoint-listen to a free address (port 0: any free port, logged at start)", addr)
	}
	other := errors.New("proc: x exited before it started:\nx: bad setting")
	for _, tc := range []struct {
		name  string
		errs  func(attempt int, addr string) error
		tries int
		ok    bool
	}{
		{"taken once", func(n int, addr string) error {
			if n == 1 {
				return taken(addr)
			}
			return nil
		}, 2, true},
		{"another error", func(int, string) error { return other }, 1, false},
		{"another address taken", func(int, string) error { return taken("127.0.0.1:1") }, 1, false},
		{"always taken", func(_ int, addr string) error { return taken(addr) }, listenAttempts, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cluster{log: io.Discard}
			n := 0
			c.pickAddr = func() (string, error) { return fmt.Sprintf("127.0.0.1:%d", 40000+n), nil }
			_, addr, err := c.startListening("x", func(addr string) (*proc.Proc, error) {
				n++
				return nil, tc.errs(n, addr)
			})
			if n != tc.tries || (err == nil) != tc.ok || addr != fmt.Sprintf("127.0.0.1:%d", 40000+n-1) {
				t.Errorf("%d starts, last on %s, err %v; want %d, ok %v", n, addr, err, tc.tries, tc.ok)
			}
		})
	}
}

// testConfig is a scenario's config at test size. Its cluster builds the
// binaries into its scratch directory (go build's cache keeps that
// quick).
func testConfig(t *testing.T, name string) scenario.Config {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the go command is needed to build the service binaries (put Go on PATH)")
		}
		t.Skip("the go command is needed to build the service binaries (put Go on PATH)")
	}
	cfg := scenario.Default(name)
	cfg.Out = t.TempDir()
	if len(cfg.CQLHosts) > 0 {
		cfg.Engines = 2
	}
	return cfg
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

// TestSourceCapEnv: a run that puts more user agents on one source and
// one engine than the engines' per-source cap raises it to what it needs,
// and a run within it leaves the engines' default, which EngineSourceCap
// is.
func TestSourceCapEnv(t *testing.T) {
	if d := engine.DefaultConfig().MaxConnectionsPerSource; d != EngineSourceCap {
		t.Fatalf("EngineSourceCap %d, the engines' default %d", EngineSourceCap, d)
	}
	cfg := scenario.Default(scenario.Hold)
	cfg.UAs, cfg.Engines = 19000, 1
	c := &Cluster{cfg: &cfg}
	if env := c.sourceCapEnv("X"); env != nil {
		t.Errorf("19,000 over 250 sources: %v", env)
	}
	c.cfg.SourceIPs = 10
	if env := c.sourceCapEnv("X"); !slices.Equal(env, []string{"X=1900"}) {
		t.Errorf("19,000 over 10 sources: %v", env)
	}
}
