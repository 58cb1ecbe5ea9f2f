// Command membench measures the connection node's memory per idle
// connection: it starts the autoconnect binary as a child process on the
// embedded store, opens N websocket connections to it from this process
// (hello plus one register each, then idle), and prints the engine's
// user-space RSS per connection and its goroutine count.
//
//	go run ./engine/cmd/membench -n 19000
//
// Budget (the engine's memory issue): at most 1 KiB of RSS per connection,
// and a goroutine count that does not grow with connections. The figure is
// the least-squares slope of RSS over the measurement points (0, N/steps,
// ..., N connections), so the process's fixed cost does not count. The
// exit status is 0 within budget, 1 over it, 2 when the benchmark itself
// failed.
//
// Where the numbers come from, all read from outside the engine:
//   - RSS: /proc/<pid>/smaps_rollup (Rss, and Anonymous, the heap and
//     other private memory; the rest is file-backed, mostly the binary);
//   - goroutines: go_goroutines on the engine's /metrics when it exports
//     it, else the runtime's GODEBUG=scheddetail=1 dump on the child's
//     stderr (live goroutines, runtime system goroutines included);
//   - live heap: the runtime's GODEBUG=gctrace=1 line of the last GC
//     (whole MB; Go collects only when it allocates, and at least every two
//     minutes).
//
// AUTOCONNECT__* variables in membench's environment override the
// engine's settings (for instance AUTOCONNECT__STORAGE=scylla with
// AUTOCONNECT__CQL_HOSTS, AUTOCONNECT__CQL_KEYSPACE and
// AUTOCONNECT__CQL_CONSISTENCY=ONE, to keep the embedded store's memtables
// out of the measured process).
//
// The Go runtime cannot be made to collect from outside, so each point is
// measured after -hold of idleness, as the median of -samples samples one
// second apart.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// engine is the autoconnect child process.
type engine struct {
	cmd        *exec.Cmd
	done       chan struct{}
	listen     string
	api        string
	maxConns   int
	eventLoops string
	http       *http.Client

	goroutineSource string

	mu       sync.Mutex
	stderr   []string // last lines not part of the runtime's dumps
	dumpSeq  int      // complete scheddetail dumps seen
	dumpLive int      // live goroutines in the last complete dump
	curLive  int      // live goroutines in the dump being read
	inDump   bool
	gcs      int
	heapLive int64 // bytes, -1 before the first GC
}

var (
	gLine  = regexp.MustCompile(`^\s+G\d+: status=(\d+)\(`)
	gcLine = regexp.MustCompile(`^gc (\d+) @.* (\d+)->(\d+)->(\d+) MB`)
)

// startEngine runs bin on the embedded store in dataDir and waits for its
// start line.
func startEngine(ctx context.Context, bin, dataDir string) (*engine, error) {
	e := &engine{done: make(chan struct{}), heapLive: -1,
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	e.cmd = exec.Command(bin)
	var env, overrides []string
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "AUTOCONNECT__"):
			overrides = append(overrides, kv)
		case !strings.HasPrefix(kv, "GODEBUG="):
			env = append(env, kv)
		}
	}
	e.cmd.Env = append(env,
		"AUTOCONNECT__LISTEN=127.0.0.1:0",
		"AUTOCONNECT__ROUTER_LISTEN=127.0.0.1:0",
		"AUTOCONNECT__CRYPTO_KEY="+cryptoKey,
		"AUTOCONNECT__ENDPOINT_URL=http://127.0.0.1:8082",
		"AUTOCONNECT__STORAGE=embedded",
		"AUTOCONNECT__DATA_DIR="+dataDir,
		"AUTOCONNECT__VERSION_FILE=",
		// Idle means idle: no keepalive pings during the measurement
		// (this process does not read its sockets once they are set up).
		"AUTOCONNECT__PING_INTERVAL=24h",
		"AUTOCONNECT__HELLO_TIMEOUT=60s",
		"AUTOCONNECT__STORAGE_TIMEOUT=30s",
		"AUTOCONNECT__DRAIN_WINDOW=1s",
		"AUTOCONNECT__LOG_LEVEL=info",
		// Goroutines and live heap, from outside: a goroutine dump every
		// second, a line per GC, both on stderr.
		"GODEBUG=schedtrace=1000,scheddetail=1,gctrace=1",
	)
	// AUTOCONNECT__ settings in this process's environment win (exec
	// keeps the last value of a key), e.g. AUTOCONNECT__STORAGE=scylla to
	// keep storage memory out of the engine process.
	e.cmd.Env = append(e.cmd.Env, overrides...)
	// The engine dies with this process, however it ends.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := e.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := e.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	started := make(chan map[string]any, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		e.readStdout(stdout, started)
	}()
	go func() {
		defer readers.Done()
		e.readStderr(stderr)
	}()
	go func() {
		readers.Wait() // Wait only after the pipes are drained
		e.cmd.Wait()
		close(e.done)
	}()
	select {
	case f := <-started:
		e.listen, _ = f["listen"].(string)
		e.api, _ = f["node_api"].(string)
		mc, _ := f["max_connections"].(float64)
		e.maxConns = int(mc)
	case <-e.done:
		return nil, fmt.Errorf("engine exited before starting (%v); stderr:\n%s", e.cmd.ProcessState, e.stderrTail())
	case <-time.After(60 * time.Second):
		e.stop()
		return nil, errors.New("engine did not log its start line within 60s")
	case <-ctx.Done():
		e.stop()
		return nil, ctx.Err()
	}
	if e.listen == "" || e.api == "" || e.maxConns == 0 {
		e.stop()
		return nil, errors.New("engine start line lacks listen, node_api or max_connections")
	}
	e.eventLoops = os.Getenv("AUTOCONNECT__EVENT_LOOPS")
	if e.eventLoops == "" {
		e.eventLoops = "one per CPU"
	}
	return e, nil
}

func (e *engine) readStdout(r io.Reader, started chan<- map[string]any) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		if sent {
			continue
		}
		var rec struct{ Fields map[string]any }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Fields["msg"] == "autoconnect started" {
			started <- rec.Fields
			sent = true
		}
	}
}

// readStderr follows the runtime's scheddetail dumps and gctrace lines;
// anything else is kept for error reports.
func (e *engine) readStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		e.mu.Lock()
		switch {
		case strings.HasPrefix(line, "SCHED "):
			if e.inDump {
				e.dumpLive, e.dumpSeq = e.curLive, e.dumpSeq+1
			}
			e.inDump, e.curLive = true, 0
		case strings.HasPrefix(line, "  P") || strings.HasPrefix(line, "  M"):
		case gLine.MatchString(line):
			st, _ := strconv.Atoi(gLine.FindStringSubmatch(line)[1])
			switch st &^ 0x1000 { // _Gscan bit
			case 0, 6, 11: // idle, dead, dead on an extra M
			default:
				e.curLive++
			}
		default:
			if m := gcLine.FindStringSubmatch(line); m != nil {
				e.gcs, _ = strconv.Atoi(m[1])
				live, _ := strconv.ParseInt(m[4], 10, 64)
				e.heapLive = live << 20
			} else {
				e.stderr = append(e.stderr, line)
				if len(e.stderr) > 50 {
					e.stderr = e.stderr[1:]
				}
			}
		}
		e.mu.Unlock()
	}
}

func (e *engine) stderrTail() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.stderr, "\n")
}

// stop sends SIGTERM to the engine's PID and SIGKILL if it has not exited
// within a minute.
func (e *engine) stop() {
	select {
	case <-e.done:
		return
	default:
	}
	e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(time.Minute):
		e.cmd.Process.Kill()
		<-e.done
	}
}

// measure samples the engine n times one second apart and returns the
// medians. Each sample waits for a fresh goroutine dump.
func (e *engine) measure(ctx context.Context, n int) (Point, error) {
	var rss, anon []int64
	var p Point
	for i := range n {
		if i > 0 {
			if err := sleepCtx(ctx, time.Second); err != nil {
				return p, err
			}
		}
		r, a, err := smapsRollup(e.cmd.Process.Pid)
		if err != nil {
			return p, err
		}
		rss, anon = append(rss, r), append(anon, a)
		p.RSSSamples = append(p.RSSSamples, r)
		g, err := e.goroutines(ctx)
		if err != nil {
			return p, err
		}
		p.Goroutines = g // the last sample's
	}
	p.RSS, p.Anon = median(rss), median(anon)
	p.File = p.RSS - p.Anon
	if m := e.metrics(); m != nil {
		inuse, ok1 := m["go_memstats_heap_inuse_bytes"]
		idle, ok2 := m["go_memstats_heap_idle_bytes"]
		released, ok3 := m["go_memstats_heap_released_bytes"]
		objs, ok4 := m["go_memstats_heap_objects"]
		stacks, ok5 := m["go_memstats_stack_inuse_bytes"]
		if ok1 && ok2 && ok3 && ok4 && ok5 {
			p.GoStats = true
			p.HeapInuse, p.HeapObjects, p.StackInuse = int64(inuse), int64(objs), int64(stacks)
			p.HeapResident = int64(inuse + idle - released)
			p.OtherAnon = p.Anon - p.HeapResident - p.StackInuse
		}
	}
	e.mu.Lock()
	p.HeapLive, p.GCs = e.heapLive, e.gcs
	e.mu.Unlock()
	return p, nil
}

func median(v []int64) int64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}

// goroutines returns go_goroutines from /metrics when the engine exports
// it, else the live goroutines of the next complete scheddetail dump.
func (e *engine) goroutines(ctx context.Context) (int, error) {
	if e.goroutineSource != "scheddetail" {
		if g, ok := e.metric("go_goroutines"); ok {
			e.goroutineSource = "/metrics go_goroutines"
			return int(g), nil
		}
		e.goroutineSource = "scheddetail"
	}
	e.mu.Lock()
	seq := e.dumpSeq
	e.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.mu.Lock()
		got, live := e.dumpSeq, e.dumpLive
		e.mu.Unlock()
		// A dump counts as complete when the next one starts, so dump
		// seq+1, the first taken after this call, is complete at seq+2.
		if got >= seq+2 {
			return live, nil
		}
		if time.Now().After(deadline) {
			return 0, errors.New("no goroutine dump from the engine within 10s (GODEBUG scheddetail)")
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// metric reads one unlabelled sample from the engine's /metrics.
func (e *engine) metric(name string) (float64, bool) {
	v, ok := e.metrics()[name]
	return v, ok
}

// metrics returns the unlabelled samples of the engine's /metrics, nil on
// error.
func (e *engine) metrics() map[string]float64 {
	resp, err := e.http.Get("http://" + e.api + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.ContainsAny(name, "{#") {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			m[name] = f
		}
	}
	return m
}

// healthConns is the engine's own connection count, -1 if unknown.
func (e *engine) healthConns() int {
	resp, err := e.http.Get("http://" + e.api + "/health")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var h struct{ Connections int }
	if json.NewDecoder(resp.Body).Decode(&h) != nil {
		return -1
	}
	return h.Connections
}

// smapsRollup returns the Rss and Anonymous bytes of pid.
func smapsRollup(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 3 || f[2] != "kB" {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "Rss:":
			rss, found = v<<10, found+1
		case "Anonymous:":
			anon, found = v<<10, found+1
		}
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("/proc/%d/smaps_rollup: no Rss or Anonymous line", pid)
	}
	return rss, anon, nil
}
