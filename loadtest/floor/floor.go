// Package floor measures what this machine charges for the bare transport
// of a push, with no push service in the way: the CPU per push of a
// minimal Go server (net/http and gobwas/ws, a goroutine per connection)
// at the rates make pushpath measures the real one at. It is the floor
// under any Go push service's CPU per push on the same machine:
//
//   - http: a POST answered 201;
//   - push: the same, after one websocket frame is written to a held
//     connection, whose ack frame the server reads;
//   - loop: push, with the websockets and the HTTP served on one gnet
//     event loop (one thread, one port): no handoff between goroutines;
//   - synced: push, after one 400-byte record is written and fdatasynced
//     (group-committed, as the embedded store's WAL is): the least a
//     tracked push costs when its receipt must survive a crash.
//
// Each variant runs in its own server process (this binary again, told by
// an environment variable), so its CPU is counted apart from the load
// generator's; it serves until it is stopped, or its parent dies.
package floor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/loadtest/h1"
	"github.com/autopush-go/autopush/loadtest/probe"
)

// Variants are the server's forms.
var Variants = []string{"http", "push", "loop", "synced"}

// Config of a run.
type Config struct {
	// Rates are the offered pushes per second, one stage each.
	Rates []int
	// Stage is how long each rate is offered.
	Stage time.Duration
	// UAs is how many websocket connections are held (pushes go to them
	// in turn).
	UAs int
	// Conns is how many HTTP keep-alive connections carry the pushes.
	Conns int
	// Variants are the server forms measured, of Variants.
	Variants []string
	// Dir holds the synced variant's file.
	Dir string
}

// Stage is one rate's figures.
type Stage struct {
	Variant   string  `json:"variant"`
	Offered   int     `json:"offered_per_s"`
	Delivered float64 `json:"delivered_per_s"`
	// Pushes counts the pushes delivered.
	Pushes int64 `json:"pushes"`
	// Failed counts pushes not answered 201 or, for push and synced,
	// whose frame did not arrive.
	Failed int64 `json:"failed"`
	// CPUPerPush is the server process's user+system CPU per push
	// delivered, µs.
	CPUPerPush float64 `json:"server_cpu_us_per_push"`
}

// Report is what Run measured.
type Report struct {
	Stages  []Stage       `json:"stages"`
	Machine probe.Machine `json:"machine"`
}

// Run measures each variant at each rate.
func Run(ctx context.Context, cfg Config, log io.Writer) (Report, error) {
	rep := Report{Machine: probe.DescribeMachine()}
	for _, v := range cfg.Variants {
		if !slices.Contains(Variants, v) {
			return rep, fmt.Errorf("floor: unknown variant %q (of %s)", v, strings.Join(Variants, ", "))
		}
		st, err := runVariant(ctx, cfg, v, log)
		rep.Stages = append(rep.Stages, st...)
		if err != nil {
			return rep, fmt.Errorf("floor: %s: %w", v, err)
		}
	}
	return rep, nil
}

func runVariant(ctx context.Context, cfg Config, variant string, log io.Writer) ([]Stage, error) {
	srv, err := startServer(variant, cfg.Dir)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	cl := h1.New(h1.Config{
		Host:  srv.httpAddr,
		Conns: cfg.Conns,
		Dial: func(ctx context.Context) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", srv.httpAddr)
		},
		Timeout: 10 * time.Second,
	})
	var got atomic.Int64 // frames that reached the user agents
	if variant != "http" {
		conns, err := holdUAs(srv.wsAddr, cfg.UAs, &got)
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		if err != nil {
			return nil, err
		}
		if err := waitHeld(ctx, cl, cfg.UAs); err != nil {
			return nil, err
		}
	}
	var out []Stage
	for _, rate := range cfg.Rates {
		st, err := runStage(ctx, cl, cfg, variant, rate, srv.p.PID(), &got)
		if err != nil {
			return out, err
		}
		fmt.Fprintf(log, "floor %s at %d/s: %.0f/s delivered, %d failed, server CPU %.1f µs per push\n",
			variant, rate, st.Delivered, st.Failed, st.CPUPerPush)
		out = append(out, st)
	}
	return out, nil
}

// runStage offers rate pushes a second for cfg.Stage, then waits until
// every push sent was answered and, but for http, its frame arrived.
func runStage(ctx context.Context, cl *h1.Client, cfg Config, variant string, rate, pid int, got *atomic.Int64) (Stage, error) {
	var ok atomic.Int64 // answered 201
	jobs := make(chan int, cfg.Conns)
	var wg sync.WaitGroup
	for range cfg.Conns {
		wg.Go(func() {
			body := make([]byte, 64)
			for id := range jobs {
				resp, err := cl.Do(&h1.Request{Method: "POST", Path: "/push/" + strconv.Itoa(id), Body: body})
				if err == nil && resp.Status == 201 {
					ok.Add(1)
				}
			}
		})
	}
	got0, cpu0 := got.Load(), probe.CPUSeconds([]int{pid})
	t0 := time.Now()
	interval := time.Second / time.Duration(rate)
	next, sent := t0, 0
	for time.Since(t0) < cfg.Stage && ctx.Err() == nil {
		next = next.Add(interval)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		jobs <- sent % max(cfg.UAs, 1)
		sent++
	}
	close(jobs)
	wg.Wait()
	if variant != "http" {
		// A frame is written before its 201: it has arrived or is on
		// its way. Wait for it, a bounded while.
		for end := time.Now().Add(10 * time.Second); got.Load()-got0 < ok.Load() && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	secs := time.Since(t0).Seconds()
	cpu := probe.CPUSeconds([]int{pid}) - cpu0
	delivered := ok.Load()
	if variant != "http" {
		delivered = min(delivered, got.Load()-got0)
	}
	st := Stage{Variant: variant, Offered: rate, Delivered: float64(delivered) / secs, Pushes: delivered, Failed: int64(sent) - delivered}
	if delivered > 0 {
		st.CPUPerPush = 1e6 * cpu / float64(delivered)
	}
	return st, ctx.Err()
}

// holdUAs opens n websocket connections to addr, each saying its number
// first, and acks every frame they get.
func holdUAs(addr string, n int, got *atomic.Int64) ([]net.Conn, error) {
	var conns []net.Conn
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return conns, fmt.Errorf("user agent %d: %w", i, err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := ws.DefaultDialer.Upgrade(c, &url.URL{Scheme: "ws", Host: addr, Path: "/"}); err != nil {
			return conns, fmt.Errorf("user agent %d: upgrade: %w", i, err)
		}
		if err := wsutil.WriteClientText(c, []byte(strconv.Itoa(i))); err != nil {
			return conns, fmt.Errorf("user agent %d: %w", i, err)
		}
		c.SetDeadline(time.Time{})
		go func() {
			rw := struct {
				io.Reader
				io.Writer
			}{bufio.NewReaderSize(c, 1024), c}
			for {
				if _, err := wsutil.ReadServerText(rw); err != nil {
					return
				}
				got.Add(1)
				if _, err := c.Write(ackFrame); err != nil {
					return
				}
			}
		}()
	}
	return conns, nil
}

// waitHeld waits until the server has filed n connections: it does so
// once it read each one's number, after the upgrade.
func waitHeld(ctx context.Context, cl *h1.Client, n int) error {
	want := strconv.Itoa(n)
	for end := time.Now().Add(30 * time.Second); ; {
		resp, err := cl.Do(&h1.Request{Method: "GET", Path: "/held"})
		if err == nil && string(resp.Body) == want {
			return nil
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return fmt.Errorf("the server holds %q of %d user agents (%v)", resp.Body, n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ackFrame is a user agent's ack, masked as a client's frames must be, and
// written with one write as a browser does.
var ackFrame = ws.MustCompileFrame(ws.MaskFrame(ws.NewTextFrame(
	[]byte(`{"messageType":"ack","updates":[{"channelID":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","version":"v","code":100}]}`))))

// ParseFlags reads loadtest floor's flags; out is where the report goes.
func ParseFlags(args []string, stderr io.Writer) (cfg Config, out string, err error) {
	fs := flag.NewFlagSet("loadtest floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rates := fs.String("rates", "1000,4000,8000,12000", "offered pushes per second, one stage each")
	variants := fs.String("variants", strings.Join(Variants, ","), "the server forms measured: "+strings.Join(Variants, ", "))
	fs.DurationVar(&cfg.Stage, "stage-time", 15*time.Second, "how long each rate is offered")
	fs.IntVar(&cfg.UAs, "uas", 2000, "websocket connections held")
	fs.IntVar(&cfg.Conns, "conns", 64, "HTTP keep-alive connections")
	fs.StringVar(&out, "out", "loadtest/out/floor", "where floor.json is written")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: loadtest floor [flags]\n\nThe CPU per push of a bare Go push transport on this machine (docs/benchmarks.md).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, out, err
	}
	for _, r := range strings.Split(*rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n <= 0 {
			return cfg, out, fmt.Errorf("loadtest floor: -rates: %q is not a positive number", r)
		}
		cfg.Rates = append(cfg.Rates, n)
	}
	cfg.Variants = strings.Split(*variants, ",")
	if cfg.UAs <= 0 || cfg.Conns <= 0 || cfg.Stage <= 0 {
		return cfg, out, errors.New("loadtest floor: -uas, -conns and -stage-time must be positive")
	}
	return cfg, out, nil
}

// Main is loadtest floor: it runs, prints each stage and writes the
// report to out/floor.json.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, out, err := ParseFlags(args, stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "loadtest-floor-")
	if err != nil {
		return fmt.Errorf("loadtest floor: %w", err)
	}
	defer os.RemoveAll(dir)
	cfg.Dir = dir
	rep, err := Run(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("loadtest floor: %w", err)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	return os.WriteFile(filepath.Join(out, "floor.json"), append(b, '\n'), 0o644)
}

// server is a running server process.
type server struct {
	p                *proc.Proc
	wsAddr, httpAddr string
}

// startServer starts this executable as variant's server and reads the
// addresses it listens on.
func startServer(variant, dir string) (*server, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serverEnv+"="+variant, dirEnv+"="+dir)
	lines := make(chan string, 1)
	p, err := proc.Start(context.Background(), cmd, proc.Config{
		Name: "floor " + variant + " server",
		Stdout: func(line []byte) {
			select {
			case lines <- string(line):
			default:
			}
		},
	})
	if err != nil {
		return nil, err
	}
	select {
	case line := <-lines:
		if f := strings.Fields(line); len(f) == 2 {
			return &server{p: p, wsAddr: f[0], httpAddr: f[1]}, nil
		}
		p.Kill()
		return nil, fmt.Errorf("the server said %q", line)
	case <-p.Exited():
		return nil, fmt.Errorf("the server exited: %s", p.Tail())
	case <-time.After(time.Minute):
		p.Kill()
		return nil, errors.New("the server did not say its addresses within a minute")
	}
}

// stop stops the server by its PID: SIGTERM, then SIGKILL after a few
// seconds.
func (s *server) stop() { s.p.Stop(5 * time.Second) }
