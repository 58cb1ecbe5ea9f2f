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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
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
		GOGC: cmp.Or(os.Getenv("GOGC"), "unset (autoconnect applies its gc-percent, default 25)")}
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
