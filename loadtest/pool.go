package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/worker"
)

// pool is the coordinator's side of the worker processes: this binary
// re-executed with worker.Env set, driven over stdin/stdout.
type pool struct {
	ws     []*workerProc
	nextID int
}

// workerProc is one worker process.
type workerProc struct {
	idx     int
	first   int
	uas     int
	p       *proc.Proc
	stdin   io.WriteCloser
	enc     *json.Encoder
	replies chan worker.Event
	logPath string
	profile string // CPU profile file (-profile), or ""

	mu    sync.Mutex
	stats worker.Stats
	hists intervalHists
	fatal string
}

// intervalHists are a worker's latency histograms since the monitor last
// took them.
type intervalHists struct {
	lat, resp, lag, handshake *hdrhistogram.Histogram
}

func newIntervalHists() intervalHists {
	return intervalHists{hist.New(), hist.New(), hist.New(), hist.New()}
}

func (h *intervalHists) merge(o intervalHists) {
	h.lat.Merge(o.lat)
	h.resp.Merge(o.resp)
	h.lag.Merge(o.lag)
	h.handshake.Merge(o.handshake)
}

// startPool starts n workers sharing uas user agents evenly; with
// profileDir, each writes a CPU profile of its whole run there
// (worker-<i>.pprof: the load generator's own cost, -profile).
func startPool(ctx context.Context, n, uas int, logDir, profileDir string) (*pool, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("loadtest: own executable: %w", err)
	}
	p := &pool{}
	for i := range n {
		first, last := uas*i/n, uas*(i+1)/n
		wp := &workerProc{idx: i, first: first, uas: last - first, replies: make(chan worker.Event, 4),
			hists: newIntervalHists(), logPath: filepath.Join(logDir, fmt.Sprintf("worker-%d.log", i))}
		if profileDir != "" {
			if err := os.MkdirAll(profileDir, 0o755); err != nil {
				return nil, fmt.Errorf("loadtest: -profile: %w", err)
			}
			wp.profile = filepath.Join(profileDir, fmt.Sprintf("worker-%d.pprof", i))
		}
		if err := wp.start(ctx, exe); err != nil {
			p.stop()
			return nil, err
		}
		p.ws = append(p.ws, wp)
	}
	return p, nil
}

// start runs the worker: commands on its stdin, events on its stdout,
// its log (stderr) in logPath. It dies with the coordinator however that
// ends (internal/proc).
func (wp *workerProc) start(ctx context.Context, exe string) error {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), worker.Env+"=1")
	if wp.profile != "" {
		cmd.Env = append(cmd.Env, worker.ProfileEnv+"="+wp.profile)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	wp.stdin, wp.enc = stdin, json.NewEncoder(stdin)
	wp.p, err = proc.Start(ctx, cmd, proc.Config{Name: fmt.Sprintf("worker %d", wp.idx), LogPath: wp.logPath, Stdout: wp.event})
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	return nil
}

// event handles one line of the worker's stdout; after the last one, the
// process's Exited is closed.
func (wp *workerProc) event(line []byte) {
	var ev worker.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return
	}
	switch ev.Type {
	case "stats":
		wp.absorb(ev.Stats)
	case "fatal":
		wp.mu.Lock()
		wp.fatal = ev.Err
		wp.mu.Unlock()
		wp.replies <- ev
	default:
		wp.replies <- ev
	}
}

func (wp *workerProc) absorb(s *worker.Stats) {
	if s == nil {
		return
	}
	var h intervalHists
	var errs []error
	for _, x := range [...]struct {
		dst **hdrhistogram.Histogram
		b   []byte
	}{{&h.lat, s.Lat}, {&h.resp, s.Resp}, {&h.lag, s.Lag}, {&h.handshake, s.Handshake}} {
		*x.dst = hist.New()
		errs = append(errs, hist.Merge(*x.dst, x.b))
	}
	wp.mu.Lock()
	defer wp.mu.Unlock()
	s.Lat, s.Resp, s.Lag, s.Handshake = nil, nil, nil, nil
	wp.stats = *s
	if errors.Join(errs...) == nil {
		wp.hists.merge(h)
	}
}

// send issues c to every worker (mk makes each one's) and waits for all
// the replies.
func (p *pool) all(ctx context.Context, mk func(wp *workerProc) worker.Command) ([]worker.Event, error) {
	p.nextID++
	id := p.nextID
	for _, wp := range p.ws {
		c := mk(wp)
		c.ID = id
		if err := wp.enc.Encode(c); err != nil {
			return nil, fmt.Errorf("loadtest: worker %d: send %s: %w", wp.idx, c.Op, err)
		}
	}
	out := make([]worker.Event, len(p.ws))
	for i, wp := range p.ws {
		ev, err := wp.wait(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i] = ev
	}
	return out, nil
}

func (wp *workerProc) wait(ctx context.Context, id int) (worker.Event, error) {
	for {
		select {
		case ev := <-wp.replies:
			if ev.Type == "fatal" {
				return ev, fmt.Errorf("loadtest: worker %d failed: %s (log %s)", wp.idx, ev.Err, wp.logPath)
			}
			if ev.ID != id {
				continue
			}
			return ev, nil
		case <-wp.p.Exited():
			return worker.Event{}, fmt.Errorf("loadtest: worker %d exited (%v); its log %s ends:\n%s", wp.idx, wp.p.Wait(), wp.logPath, wp.p.Tail())
		case <-ctx.Done():
			return worker.Event{}, ctx.Err()
		}
	}
}

// take sums the workers' latest counters and takes their interval
// histograms: the monitor's, once per sample.
func (p *pool) take() (worker.Stats, intervalHists) {
	h := newIntervalHists()
	for _, wp := range p.ws {
		wp.mu.Lock()
		h.merge(wp.hists)
		wp.hists = newIntervalHists()
		wp.mu.Unlock()
	}
	return p.counters(), h
}

// counters sums the workers' latest counters.
func (p *pool) counters() worker.Stats {
	var t worker.Stats
	t.Reasons = map[string]int64{}
	for _, wp := range p.ws {
		wp.mu.Lock()
		s := wp.stats
		wp.mu.Unlock()
		t.Connected += s.Connected
		t.Connecting += s.Connecting
		t.Connects += s.Connects
		t.ConnectFail += s.ConnectFail
		t.Dropped += s.Dropped
		t.Closes += s.Closes
		t.Sent += s.Sent
		t.Accepted += s.Accepted
		t.PostErrors += s.PostErrors
		t.Received += s.Received
		t.Acked += s.Acked
		t.DupAfterAck += s.DupAfterAck
		t.RedelivUnac += s.RedelivUnac
		t.RedelivUnv += s.RedelivUnv
		t.BadContent += s.BadContent
		t.Misrouted += s.Misrouted
		t.Unknown += s.Unknown
		t.RSS += s.RSS
		t.Pings.Add(s.Pings)
		for k, v := range s.Reasons {
			t.Reasons[k] += v
		}
	}
	return t
}

// procs are the worker processes.
func (p *pool) procs() []*proc.Proc {
	out := make([]*proc.Proc, len(p.ws))
	for i, wp := range p.ws {
		out[i] = wp.p
	}
	return out
}

// stop asks every worker to stop, then kills (by PID) any still running
// after 15 seconds.
func (p *pool) stop() {
	for _, wp := range p.ws {
		wp.enc.Encode(worker.Command{Op: worker.OpStop})
		wp.stdin.Close()
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, wp := range p.ws {
		select {
		case <-wp.p.Exited():
		case <-time.After(time.Until(deadline)):
			wp.p.Kill()
		}
	}
}
