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
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gobwas/ws"
)

// cryptoKey is a fixed Fernet key for the benchmark node (the tests' key;
// endpoints minted with it are never used).
const cryptoKey = "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4="

// options are the command's flags.
type options struct {
	N              int
	Autoconnect    string
	Samples        int
	Hold           time.Duration
	Steps          int
	Concurrency    int
	Warmup         int
	Budget         int
	GoroutineSlack int
	JSON           bool
	Verbose        bool
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("membench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&o.N, "n", 19000, "idle connections to open")
	fs.StringVar(&o.Autoconnect, "autoconnect", "", "autoconnect binary (default: go build it into a temp dir)")
	fs.IntVar(&o.Samples, "samples", 3, "samples per measurement point, one second apart (the median counts)")
	fs.DurationVar(&o.Hold, "hold", 5*time.Second, "how long connections stay idle at each point before it is measured")
	fs.IntVar(&o.Steps, "steps", 4, "measurement points after 0 connections: N/steps, 2N/steps, ..., N")
	fs.IntVar(&o.Concurrency, "concurrency", 64, "connections being set up at once")
	fs.IntVar(&o.Warmup, "warmup", 200, "connections opened and closed before the first point (one-time lazy set-up is not per-connection cost)")
	fs.IntVar(&o.Budget, "budget", 1024, "RSS budget, bytes per connection")
	fs.IntVar(&o.GoroutineSlack, "goroutine-slack", 8, "goroutines the engine may gain between 0 and N connections")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON instead of a table")
	fs.BoolVar(&o.Verbose, "v", false, "progress on stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.N < 1 || o.Samples < 1 || o.Steps < 1 || o.Concurrency < 1 || o.Budget < 1 || o.GoroutineSlack < 0 || o.Hold < 0 || o.Warmup < 0:
		return o, errors.New("-n, -samples, -steps, -concurrency and -budget must be >= 1; -hold, -warmup and -goroutine-slack >= 0")
	case o.Steps > o.N:
		return o, errors.New("-steps must not exceed -n")
	}
	return o, nil
}

// Point is the engine measured at one number of connections.
type Point struct {
	Connections int     `json:"connections"`
	RSS         int64   `json:"rss_bytes"`       // median of the samples
	Anon        int64   `json:"anon_bytes"`      // Anonymous, median
	File        int64   `json:"file_bytes"`      // RSS - Anonymous
	RSSSamples  []int64 `json:"rss_samples"`     // every sample, bytes
	HeapLive    int64   `json:"heap_live_bytes"` // marked live by the last GC (gctrace, whole MB); -1 before the first
	GCs         int     `json:"gcs"`             // GC cycles so far
	Goroutines  int     `json:"goroutines"`
	// From the engine's /metrics (go_memstats_*) when GoStats; the last
	// sample's. OtherAnon is approximate: /metrics and smaps_rollup are
	// not read at the same instant.
	GoStats      bool  `json:"go_stats"`
	HeapInuse    int64 `json:"heap_inuse_bytes"`    // spans in use: live objects and garbage not yet collected
	HeapResident int64 `json:"heap_resident_bytes"` // heap_inuse + heap_idle - heap_released: the Go heap's share of RSS
	HeapObjects  int64 `json:"heap_objects"`        // allocated objects
	StackInuse   int64 `json:"stack_inuse_bytes"`   // goroutine stacks
	OtherAnon    int64 `json:"other_anon_bytes"`    // Anon - HeapResident - StackInuse: cgo allocations (Pebble's memtables, block cache), runtime metadata
}

// Result is what one run measured.
type Result struct {
	Connections    int     `json:"connections"`
	Points         []Point `json:"points"`
	RSSSlope       float64 `json:"rss_slope_bytes_per_conn"`
	AnonSlope      float64 `json:"anon_slope_bytes_per_conn"`
	HeapSlope      float64 `json:"heap_live_slope_bytes_per_conn"` // NaN without GC data
	InuseSlope     float64 `json:"heap_inuse_slope_bytes_per_conn"`
	ResidentSlope  float64 `json:"heap_resident_slope_bytes_per_conn"`
	OtherAnonSlope float64 `json:"other_anon_slope_bytes_per_conn"`
	ObjectsSlope   float64 `json:"heap_objects_slope_per_conn"`
	GOGC           string  `json:"engine_gogc"`

	GoroutinesStart  int       `json:"goroutines_start"`
	GoroutinesEnd    int       `json:"goroutines_end"`
	GoroutineSource  string    `json:"goroutine_source"`
	Budget           int       `json:"budget"`
	GoroutineSlack   int       `json:"goroutine_slack"`
	OverBudget       bool      `json:"over_budget"`
	GoroutinesGrew   bool      `json:"goroutines_grew"`
	Pass             bool      `json:"pass"`
	SetupSeconds     float64   `json:"setup_seconds"` // opening all N connections
	Hold             string    `json:"hold"`
	Samples          int       `json:"samples"`
	Warmup           int       `json:"warmup"`
	EngineMaxConns   int       `json:"engine_max_connections"`
	EngineEventLoops string    `json:"engine_event_loops"`
	Autoconnect      string    `json:"autoconnect"`
	GoVersion        string    `json:"go_version"`
	Started          time.Time `json:"started"`
}

// MarshalJSON writes a NaN slope (no data) as null.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	num := func(f float64) *float64 {
		if math.IsNaN(f) {
			return nil
		}
		return &f
	}
	return json.Marshal(struct {
		plain
		HeapSlope      *float64 `json:"heap_live_slope_bytes_per_conn"`
		InuseSlope     *float64 `json:"heap_inuse_slope_bytes_per_conn"`
		ResidentSlope  *float64 `json:"heap_resident_slope_bytes_per_conn"`
		OtherAnonSlope *float64 `json:"other_anon_slope_bytes_per_conn"`
		ObjectsSlope   *float64 `json:"heap_objects_slope_per_conn"`
	}{plain(r), num(r.HeapSlope), num(r.InuseSlope), num(r.ResidentSlope), num(r.OtherAnonSlope), num(r.ObjectsSlope)})
}

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "membench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress io.Writer = io.Discard
	if opts.Verbose {
		progress = os.Stderr
	}
	res, err := run(ctx, opts, progress)
	if err != nil {
		fmt.Fprintln(os.Stderr, "membench:", err)
		stop()
		os.Exit(2)
	}
	if opts.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	} else {
		printTable(os.Stdout, res)
	}
	if !res.Pass {
		stop()
		os.Exit(1)
	}
}

// run builds (unless given) and starts the engine, opens the connections
// point by point, measures, and stops the engine.
func run(ctx context.Context, o options, progress io.Writer) (*Result, error) {
	res := &Result{Connections: o.N, Budget: o.Budget, GoroutineSlack: o.GoroutineSlack, Hold: o.Hold.String(),
		Samples: o.Samples, Warmup: o.Warmup, GoVersion: goVersion(), Started: time.Now().UTC(), HeapSlope: math.NaN(),
		GOGC: cmp.Or(os.Getenv("GOGC"), "100 (default)")}
	if err := checkFDLimit(o.N); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "membench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := o.Autoconnect
	if bin == "" {
		bin = filepath.Join(tmp, "autoconnect")
		fmt.Fprintln(progress, "membench: go build autoconnect")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/autopush-go/autopush/engine/cmd/autoconnect")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build autoconnect: %v\n%s", err, out)
		}
	}
	res.Autoconnect = bin
	eng, err := startEngine(ctx, bin, filepath.Join(tmp, "data"))
	if err != nil {
		return nil, err
	}
	defer eng.stop()
	res.EngineMaxConns = eng.maxConns
	res.EngineEventLoops = eng.eventLoops
	if o.N > eng.maxConns {
		return nil, fmt.Errorf("-n %d exceeds the engine's connection ceiling %d (its fd limit less its reserve)", o.N, eng.maxConns)
	}
	fmt.Fprintf(progress, "membench: engine pid %d on %s (node API %s, ceiling %d)\n", eng.cmd.Process.Pid, eng.listen, eng.api, eng.maxConns)

	cl := &clients{addr: eng.listen}
	defer cl.closeAll()
	if o.Warmup > 0 {
		if err := cl.openUpTo(ctx, o.Warmup, o.Concurrency); err != nil {
			return nil, fmt.Errorf("warm-up: %w; engine stderr tail:\n%s", err, eng.stderrTail())
		}
		cl.closeAll()
		deadline := time.Now().Add(time.Minute)
		for eng.healthConns() != 0 {
			if time.Now().After(deadline) {
				return nil, errors.New("the engine still counts warm-up connections after a minute")
			}
			if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	var setup time.Duration
	for step := 0; step <= o.Steps; step++ {
		target := o.N * step / o.Steps
		t0 := time.Now()
		if err := cl.openUpTo(ctx, target, o.Concurrency); err != nil {
			return nil, fmt.Errorf("opening connections (%d open): %w; engine stderr tail:\n%s", cl.count(), err, eng.stderrTail())
		}
		setup += time.Since(t0)
		if err := sleepCtx(ctx, o.Hold); err != nil {
			return nil, err
		}
		p, err := eng.measure(ctx, o.Samples)
		if err != nil {
			return nil, err
		}
		p.Connections = target
		if h := eng.healthConns(); h >= 0 && h != target {
			return nil, fmt.Errorf("engine counts %d connections at point %d, want %d", h, step, target)
		}
		res.Points = append(res.Points, p)
		fmt.Fprintf(progress, "membench: %6d connections: rss %s anon %s goroutines %d\n", target, kib(p.RSS), kib(p.Anon), p.Goroutines)
	}
	res.SetupSeconds = setup.Seconds()
	res.GoroutineSource = eng.goroutineSource
	first, last := res.Points[0], res.Points[len(res.Points)-1]
	res.GoroutinesStart, res.GoroutinesEnd = first.Goroutines, last.Goroutines
	xs := make([]float64, 0, len(res.Points))
	var rss, anon, hx, heap, inuse, resident, other, objects []float64
	for _, p := range res.Points {
		xs = append(xs, float64(p.Connections))
		rss = append(rss, float64(p.RSS))
		anon = append(anon, float64(p.Anon))
		inuse = append(inuse, float64(p.HeapInuse))
		resident = append(resident, float64(p.HeapResident))
		other = append(other, float64(p.OtherAnon))
		objects = append(objects, float64(p.HeapObjects))
		if p.HeapLive >= 0 {
			hx = append(hx, float64(p.Connections))
			heap = append(heap, float64(p.HeapLive))
		}
	}
	res.RSSSlope = slope(xs, rss)
	res.AnonSlope = slope(xs, anon)
	res.InuseSlope, res.ResidentSlope, res.OtherAnonSlope, res.ObjectsSlope = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	if !slices.ContainsFunc(res.Points, func(p Point) bool { return !p.GoStats }) {
		res.InuseSlope, res.ResidentSlope = slope(xs, inuse), slope(xs, resident)
		res.OtherAnonSlope, res.ObjectsSlope = slope(xs, other), slope(xs, objects)
	}
	if len(hx) >= 2 {
		res.HeapSlope = slope(hx, heap)
	}
	res.OverBudget = res.RSSSlope > float64(o.Budget)
	res.GoroutinesGrew = res.GoroutinesEnd-res.GoroutinesStart > o.GoroutineSlack
	res.Pass = !res.OverBudget && !res.GoroutinesGrew
	return res, nil
}

// slope is the least-squares slope of ys over xs; NaN when xs are all
// equal.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / d
}

func printTable(w io.Writer, r *Result) {
	fmt.Fprintf(w, "membench: %d idle connections (hello + 1 register each), engine %s\n", r.Connections, r.Autoconnect)
	fmt.Fprintf(w, "setup %.1fs, warm-up %d, hold %s, %d samples per point, engine GOGC %s, goroutines from %s\n\n",
		r.SetupSeconds, r.Warmup, r.Hold, r.Samples, r.GOGC, r.GoroutineSource)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "connections\trss KiB\tanon KiB\tfile KiB\tGo heap resident KiB\theap in use KiB\tlive heap MiB\tstacks KiB\tother anon KiB\theap objects\tGCs\tgoroutines\t")
	for _, p := range r.Points {
		opt := func(v int64, shift uint) string {
			if !p.GoStats {
				return "-"
			}
			return strconv.FormatInt(v>>shift, 10)
		}
		live := "-"
		if p.HeapLive >= 0 {
			live = strconv.FormatInt(p.HeapLive>>20, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t\n", p.Connections, p.RSS>>10, p.Anon>>10, p.File>>10,
			opt(p.HeapResident, 10), opt(p.HeapInuse, 10), live, opt(p.StackInuse, 10), opt(p.OtherAnon, 10),
			opt(p.HeapObjects, 0), p.GCs, p.Goroutines)
	}
	tw.Flush()
	f := func(v float64) string {
		if math.IsNaN(v) {
			return "n/a"
		}
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	fmt.Fprintf(w, "\nslopes (least squares over the points), per connection:\n"+
		"  rss %s B = anon %s B (+ file-backed)\n"+
		"  anon: Go heap resident %s B (in use %s B, live at last GC %s B), other anon %s B\n"+
		"  heap objects %s\n",
		f(r.RSSSlope), f(r.AnonSlope), f(r.ResidentSlope), f(r.InuseSlope), f(r.HeapSlope), f(r.OtherAnonSlope), f(r.ObjectsSlope))
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
		if r.OverBudget {
			verdict += " rss_over_budget"
		}
		if r.GoroutinesGrew {
			verdict += " goroutines_grew"
		}
	}
	fmt.Fprintf(w, "RESULT connections=%d rss_slope_bytes_per_conn=%.0f anon_slope_bytes_per_conn=%.0f goroutines_start=%d goroutines_end=%d budget=%d %s\n",
		r.Connections, r.RSSSlope, r.AnonSlope, r.GoroutinesStart, r.GoroutinesEnd, r.Budget, verdict)
}

func kib(b int64) string { return strconv.FormatInt(b>>10, 10) + " KiB" }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// checkFDLimit makes sure this process can hold n sockets (Go raises the
// soft limit to the hard one at start-up).
func checkFDLimit(n int) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	if need := uint64(n) + 64; l.Cur < need {
		return fmt.Errorf("open files limit %d is below the %d this process needs for -n %d", l.Cur, need, n)
	}
	return nil
}

// ---------------------------------------------------------------- engine

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

// --------------------------------------------------------------- clients

// clients are the idle websocket connections. Once set up a connection is
// only held: no goroutine, no reads (the engine is told not to ping).
type clients struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func (c *clients) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

// openUpTo sets up connections until target are open, concurrency at a
// time.
func (c *clients) openUpTo(ctx context.Context, target, concurrency int) error {
	start := c.count()
	if target <= start {
		return nil
	}
	var next atomic.Int64
	next.Store(int64(start))
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(concurrency, target-start) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= target || ctx.Err() != nil {
					return
				}
				conn, err := openClient(ctx, c.addr, i)
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("connection %d: %w", i, err); cancel() })
					return
				}
				c.mu.Lock()
				c.conns = append(c.conns, conn)
				c.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

func (c *clients) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// openClient connects from 127.0.0.(2+i%250), so that 250 source
// addresses share the ephemeral ports, upgrades, says hello, registers
// one channel and returns the idle connection.
func openClient(ctx context.Context, addr string, i int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	nd := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%250))}}
	d := ws.Dialer{
		Protocols: []string{"push-notification"},
		NetDial: func(ctx context.Context, network, a string) (net.Conn, error) {
			return nd.DialContext(ctx, network, a)
		},
	}
	conn, br, _, err := d.Dial(ctx, "ws://"+addr+"/")
	if err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	if br != nil {
		conn.Close()
		return nil, errors.New("server sent data before hello")
	}
	ok := false
	defer func() {
		if !ok {
			conn.Close()
		}
	}()
	if dl, has := ctx.Deadline(); has {
		conn.SetDeadline(dl)
	}
	var reply struct {
		MessageType string `json:"messageType"`
		Status      int    `json:"status"`
		UAID        string `json:"uaid"`
	}
	if err := exchange(conn, `{"messageType":"hello","use_webpush":true,"broadcasts":{}}`, &reply); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	if reply.MessageType != "hello" || reply.Status != 200 || reply.UAID == "" {
		return nil, fmt.Errorf("hello reply %+v", reply)
	}
	reply = struct {
		MessageType string `json:"messageType"`
		Status      int    `json:"status"`
		UAID        string `json:"uaid"`
	}{}
	if err := exchange(conn, `{"messageType":"register","channelID":"`+newUUID()+`"}`, &reply); err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	if reply.MessageType != "register" || reply.Status != 200 {
		return nil, fmt.Errorf("register reply %+v", reply)
	}
	conn.SetDeadline(time.Time{})
	ok = true
	return conn, nil
}

// exchange sends one masked text frame and decodes the next text frame.
func exchange(conn net.Conn, msg string, reply any) error {
	f := ws.MaskFrameInPlace(ws.NewTextFrame([]byte(msg)))
	if err := ws.WriteFrame(conn, f); err != nil {
		return err
	}
	for {
		h, err := ws.ReadHeader(conn)
		if err != nil {
			return err
		}
		if h.Length > 1<<20 {
			return fmt.Errorf("server frame of %d bytes", h.Length)
		}
		payload := make([]byte, h.Length)
		if _, err := io.ReadFull(conn, payload); err != nil {
			return err
		}
		switch h.OpCode {
		case ws.OpText:
			return json.Unmarshal(payload, reply)
		case ws.OpClose:
			code, reason := ws.ParseCloseFrameData(payload)
			return fmt.Errorf("closed by the engine: %d %s", code, reason)
		}
	}
}

// newUUID is a random (version 4) UUID in the dashed form.
func newUUID() string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
