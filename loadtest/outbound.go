package loadtest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/autopush-go/autopush/apitier/sender/swrvefake"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/loadtest/sender"
)

// outbound runs the sender scenario: autoendpoint with its sender workers
// against a fake Swrve in this process, POST /push offered open loop above
// the provider's rate, the provider's rate measured over a window, the
// pool's bound checked, and every accepted push accounted for.
func (r *run) outbound(ctx context.Context, logDir string) error {
	defer r.prog.stop()
	cfg := &r.cfg
	rep := &report.SenderReport{Offered: cfg.PushRate, ProviderRate: cfg.ProviderRate, States: map[string]int64{}}
	r.rep.Sender = rep
	fake, provLatency, err := startFakeSwrve(cfg.ProviderLatency)
	if err != nil {
		return err
	}
	defer fake.Close()
	node, apiKey, err := startSenderNode(ctx, &r.cfg, logDir, r.prog, fake.URL())
	if err != nil {
		return err
	}
	defer node.stop()
	r.rep.Cluster = node.info()
	r.logf("autoendpoint (pid %d) on %s storage, its sender paced at %.0f/s against a fake Swrve at %s (%s latency)",
		node.endpoint.PID(), node.storage, cfg.ProviderRate, fake.URL(), cfg.ProviderLatency)

	p := newPoster(cfg, node.endpointURL, apiKey)
	metricsURL := node.endpointURL + "/metrics"
	stopSampling := r.sampleSender(ctx, p, fake, node, metricsURL)
	count := int(cfg.PushRate * cfg.Duration.Seconds())
	rep.Scheduled = int64(count)
	r.setPhase("post", int64(count), func(s report.Sample) int64 { return s.Sent })
	t0, start := r.now(), time.Now()
	p.run(ctx, count, time.Duration(float64(time.Second)/cfg.PushRate))
	rep.PostSeconds = time.Since(start).Seconds()
	postEnd := time.Now()
	rep.CPU = r.avgCPU(t0, r.now())
	rep.Accepted, rep.Errors, rep.Response = p.accepted.Load(), p.errors(), hist.Summarize(p.total)
	rep.Achieved = float64(rep.Accepted) / rep.PostSeconds
	r.logf("POSTs done: %d of %d accepted in %.1fs; waiting for every accepted push to be SENT", rep.Accepted, count, rep.PostSeconds)

	r.setPhase("drain", rep.Accepted, func(s report.Sample) int64 { return s.Received })
	drainErr := waitDrained(ctx, node.endpointURL, apiKey, cfg.DrainTimeout)
	rep.DrainSeconds = time.Since(postEnd).Seconds()
	samples := stopSampling()
	rep.Samples = samples
	r.rep.Series = r.seriesCopy()
	if drainErr != nil {
		r.logf("%v", drainErr)
	}
	if m, err := promtext.Scrape(ctx, nil, metricsURL); err == nil {
		rep.WentPending = int64(m["autosender_pushes_went_pending_total"])
		rep.CallerRuns = int64(m[`autosender_caller_runs_total{provider="swrve"}`])
		rep.PoolSize = int(m[`autosender_pool_size{provider="swrve"}`])
	}
	attempts, err := p.account(ctx, rep)
	if err != nil {
		return errRun("accounting", err)
	}
	providerSide(rep, fake, attempts, cfg.Warmup, cfg.Measure)
	rep.Latency = provLatency.summary()
	rep.ProviderMaxNow = fake.MaxInflight()
	for _, s := range samples {
		rep.PoolBusyMax = max(rep.PoolBusyMax, s.PoolBusy)
	}
	rep.QueueMin = queueMin(samples, fake, r.started, rep.Window)
	return nil
}

// latencies records the fake's answer times.
type latencies struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func (l *latencies) summary() hist.Latency {
	l.mu.Lock()
	defer l.mu.Unlock()
	return hist.Summarize(l.h)
}

// startFakeSwrve starts the fake provider answering after latency ("seed":
// the seed's measured distribution; else a fixed duration).
func startFakeSwrve(latency string) (*swrvefake.Fake, *latencies, error) {
	fake, err := swrvefake.Start()
	if err != nil {
		return nil, nil, err
	}
	draw := func() time.Duration { return 0 }
	if latency == "seed" {
		draw = swrvefake.SeedLatency(rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	} else if d, err := time.ParseDuration(latency); err == nil {
		draw = func() time.Duration { return d }
	}
	l := &latencies{h: hist.New()}
	fake.SetLatency(func() time.Duration {
		d := draw()
		l.mu.Lock()
		l.h.RecordValue(max(d.Microseconds(), 1))
		l.mu.Unlock()
		return d
	})
	return fake, l, nil
}

// startSenderNode starts autoendpoint with its sender workers on the run's
// storage (a fresh keyspace, or an embedded store in a scratch directory),
// sending to swrveURL with a prototype-key file of its own, and returns it
// with the push API key it accepts.
func startSenderNode(ctx context.Context, cfg *scenario.Config, logDir string, log io.Writer, swrveURL string) (_ *cluster, apiKey string, err error) {
	c := &cluster{cfg: cfg, log: log, storage: "embedded"}
	if len(cfg.CQLHosts) > 0 {
		c.storage = "scylla"
	}
	if c.dir, err = os.MkdirTemp("", "loadtest-sender-"); err != nil {
		return nil, "", fmt.Errorf("loadtest: scratch dir: %w", err)
	}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	if c.binDir, err = binaries(ctx, cfg.BinDir, c.dir, []string{"autoendpoint"}, log); err != nil {
		return nil, "", err
	}
	if c.storage == "scylla" {
		if err := c.makeKeyspace(ctx); err != nil {
			return nil, "", err
		}
	}
	keys := filepath.Join(c.dir, "swrve-keys.yaml")
	if err := os.WriteFile(keys, []byte("swrve:\n  messagePrototypePushKeys:\n    'Hello': {IOS: lt-ios, ANDROID: lt-android}\n"), 0o600); err != nil {
		return nil, "", err
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	b := make([]byte, 16)
	if _, err := crand.Read(b); err != nil {
		return nil, "", err
	}
	apiKey = hex.EncodeToString(b)
	c.endpointURL = "http://" + port
	// The jobs' portions keep the seed's rule (portion × 1/rate < their
	// 1 s interval) at any -provider-rate.
	portion := strconv.Itoa(max(1, min(250, int(cfg.ProviderRate*0.8))))
	env := append(c.storageEnv("AUTOEND"),
		"AUTOEND__LISTEN="+port, "AUTOEND__ENDPOINT_URL="+c.endpointURL, "AUTOEND__CRYPTO_KEY="+token.GenerateKey(),
		"AUTOEND__NODE_SECRET="+token.GenerateKey(), // required; no connection node here to share it with
		"AUTOEND__VERSION_FILE=", "AUTOEND__REQUEST_LOG=false", "AUTOEND__PUSH_API_KEYS="+apiKey,
		"AUTOEND__SENDER_NODE=loadtest", "AUTOEND__SWRVE_URL="+swrveURL, "AUTOEND__SWRVE_KEYS_FILE="+keys,
		"AUTOEND__SWRVE_RATE="+strconv.FormatFloat(cfg.ProviderRate, 'f', -1, 64),
		"AUTOEND__SWRVE_AVERAGE_LATENCY="+cfg.AverageLatency.String(),
		"AUTOEND__SENDER_SCHEDULED_PORTION="+portion, "AUTOEND__SENDER_PENDING_PORTION="+portion)
	env = append(env, passThrough("AUTOEND__", "AUTOENDPOINT__")...)
	c.endpoint, err = startChild(ctx, "autoendpoint", filepath.Join(c.binDir, "autoendpoint"), nil, env,
		filepath.Join(logDir, "autoendpoint.log"), "autoendpoint started", nil)
	if err != nil {
		return nil, "", err
	}
	return c, apiKey, nil
}

// poster is the application back-end: POST /push open loop, each push at
// its scheduled time on its own goroutine whatever happened to the ones
// before, its latency counted from that time.
type poster struct {
	client   *http.Client
	url      string
	auth     string
	max      int64
	inFlight atomic.Int64
	posted   atomic.Int64
	accepted atomic.Int64
	wg       sync.WaitGroup

	mu       sync.Mutex
	errs     map[string]int64
	total    *hdrhistogram.Histogram // every POST
	interval *hdrhistogram.Histogram // since the last sample
	ids      []string                // by sequence: the push's id, "" when not accepted
}

func newPoster(cfg *scenario.Config, endpointURL, apiKey string) *poster {
	tr := &http.Transport{MaxConnsPerHost: cfg.SenderConns, MaxIdleConnsPerHost: cfg.SenderConns, IdleConnTimeout: time.Minute}
	return &poster{client: &http.Client{Transport: tr, Timeout: cfg.PushTimeout}, url: endpointURL, auth: "Bearer " + apiKey,
		max: int64(cfg.MaxInFlight), errs: map[string]int64{}, total: hist.New(), interval: hist.New()}
}

// run posts count pushes, the i-th due period×i after it starts, and
// returns once every one was answered.
func (p *poster) run(ctx context.Context, count int, period time.Duration) {
	p.ids = make([]string, count)
	start := time.Now()
	for i := range count {
		at := start.Add(time.Duration(i) * period)
		if wait := time.Until(at); wait > time.Millisecond {
			// Go's timers are about 1 ms coarse: nearer pushes go out now,
			// and their lateness counts in their latency.
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				p.wg.Wait()
				return
			}
		}
		p.posted.Add(1)
		if p.inFlight.Load() >= p.max {
			p.count("loadtest: in-flight cap")
			continue
		}
		p.inFlight.Add(1)
		p.wg.Add(1)
		go p.post(i, at)
	}
	p.wg.Wait()
}

func (p *poster) post(i int, at time.Time) {
	defer p.wg.Done()
	defer p.inFlight.Add(-1)
	platform := [2]string{"IOS", "ANDROID"}[i%2]
	body := fmt.Sprintf(`{"platform":%q,"messagePrototypeKey":"Hello","pushKey":"lt-%08d","message":"loadtest push %d","cronExpression":null}`,
		platform, i, i)
	req, err := http.NewRequest(http.MethodPost, p.url+"/push", strings.NewReader(body))
	if err != nil {
		p.count("loadtest: request: " + err.Error())
		return
	}
	req.Header.Set("Authorization", p.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	took := max(time.Since(at).Microseconds(), 1)
	p.mu.Lock()
	p.total.RecordValue(took)
	p.interval.RecordValue(took)
	p.mu.Unlock()
	if err != nil {
		p.count("transport: " + sender.TransportReason(err))
		return
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(loc, "/push/") {
		p.count(sender.StatusReason(resp.StatusCode, reply))
		return
	}
	p.ids[i] = strings.TrimPrefix(loc, "/push/")
	p.accepted.Add(1)
}

func (p *poster) count(reason string) {
	p.mu.Lock()
	p.errs[reason]++
	p.mu.Unlock()
}

func (p *poster) errors() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.errs)
}

// takeInterval summarises the POSTs answered since the last call.
func (p *poster) takeInterval() *hist.Latency {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.interval.TotalCount() == 0 {
		return nil
	}
	l := hist.Summarize(p.interval)
	p.interval.Reset()
	return &l
}

// sampleSender starts sampling (run.monitor) and returns its stop, which
// returns the sender's own samples; the series gets the POSTs, the
// provider's receipts and the endpoint's memory and CPU.
func (r *run) sampleSender(ctx context.Context, p *poster, fake *swrvefake.Fake, node *cluster, metricsURL string) (stop func() []report.SenderSample) {
	var out []report.SenderSample // the monitor's goroutine appends; read after stop
	pid := node.endpoint.PID()
	client := &http.Client{Timeout: r.cfg.SampleEvery}
	stopMonitor := r.monitor(func() report.Sample {
		now := r.now()
		ss := report.SenderSample{T: now, ProviderInFlight: fake.InFlight(), Received: int64(fake.Count())}
		if m, err := promtext.Scrape(ctx, client, metricsURL); err == nil {
			ss.QueueSize = int(m[`autosender_queue_size{provider="swrve"}`])
			ss.PoolBusy = int(m[`autosender_pool_busy{provider="swrve"}`])
		}
		out = append(out, ss)
		s := report.Sample{T: now, Sent: p.posted.Load(), Accepted: p.accepted.Load(), Received: ss.Received,
			Response: p.takeInterval(), CPU: r.cpu.Read(nil, []int{pid}, []int{os.Getpid()}, r.storagePID)}
		s.PostErrors = s.Sent - s.Accepted - p.inFlight.Load()
		s.EndpointRSS, _ = probe.ProcRSS(pid)
		r.mu.Lock()
		s.Phase = r.phase
		r.mu.Unlock()
		return s
	})
	return func() []report.SenderSample { stopMonitor(); return out }
}

// listPage is one answer of GET /push?state=.
type listPage struct {
	Pushes []struct {
		ID       string            `json:"id"`
		State    string            `json:"state"`
		PushKey  string            `json:"pushKey"`
		Attempts []json.RawMessage `json:"attempts"`
	} `json:"pushes"`
	Next *string `json:"next"`
}

func getPage(ctx context.Context, base, apiKey, state, cursor string, limit int) (listPage, error) {
	u := base + "/push?state=" + state + "&limit=" + strconv.Itoa(limit)
	if cursor != "" {
		u += "&cursor=" + cursor
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return listPage{}, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return listPage{}, err
	}
	defer resp.Body.Close()
	var page listPage
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return page, fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return page, json.NewDecoder(resp.Body).Decode(&page)
}

// unfinished are the states a push leaves.
var unfinished = []string{"SCHEDULED", "PENDING", "IN_MEMORY", "RETRY"}

// waitDrained waits until no push is in a state it leaves, or timeout.
func waitDrained(ctx context.Context, base, apiKey string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := false
		for _, st := range unfinished {
			// A page may come back short, even empty, with more to follow
			// (pushes that moved on while it was read).
			for cursor := ""; !left; {
				page, err := getPage(ctx, base, apiKey, st, cursor, 100)
				if err != nil {
					return fmt.Errorf("loadtest: drain: %w", err)
				}
				left = len(page.Pushes) > 0
				if page.Next == nil {
					break
				}
				cursor = *page.Next
			}
		}
		if !left {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("loadtest: drain: pushes still unfinished after %s", timeout)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil { // polling the sender's answer
			return err
		}
	}
}

// account pages through every state and counts the accepted pushes in
// each (all of them must be SENT); it returns each one's attempts by its
// pushKey (the device, one per push here).
func (p *poster) account(ctx context.Context, rep *report.SenderReport) (map[string]int, error) {
	ours := make(map[string]bool, len(p.ids))
	for _, id := range p.ids {
		if id != "" {
			ours[id] = true
		}
	}
	attempts := make(map[string]int, len(ours))
	for _, st := range append(slices.Clone(unfinished), "SENT", "FAILED", "GIVEN_UP") {
		cursor := ""
		for {
			page, err := getPage(ctx, p.url, strings.TrimPrefix(p.auth, "Bearer "), st, cursor, 1000)
			if err != nil {
				return nil, err
			}
			for _, x := range page.Pushes {
				if ours[x.ID] {
					rep.States[st]++
					attempts[x.PushKey] = len(x.Attempts)
					if len(x.Attempts) > 1 {
						rep.Retried++
					}
				}
			}
			if page.Next == nil {
				break
			}
			cursor = *page.Next
		}
	}
	rep.Sent = rep.States["SENT"]
	return attempts, nil
}

// providerSide reads the fake's log: sends per second since the first,
// the rate over the window [warmup, warmup+measure), and duplicates:
// receipts of a push beyond the attempts its log shows (a retry after a
// timeout is a second receipt, and says so).
func providerSide(rep *report.SenderReport, fake *swrvefake.Fake, attempts map[string]int, warmup, measure time.Duration) {
	log := fake.Log()
	rep.Received = int64(len(log))
	seen := make(map[string]int, len(log))
	for _, x := range log {
		if seen[x.User]++; seen[x.User] > max(attempts[x.User], 1) {
			rep.Duplicates++
		}
	}
	if len(log) == 0 {
		return
	}
	first := log[0].At
	for _, x := range log {
		sec := int(x.At.Sub(first) / time.Second)
		for len(rep.PerSecond) <= sec {
			rep.PerSecond = append(rep.PerSecond, 0)
		}
		rep.PerSecond[sec]++
	}
	w0, w1 := int(warmup/time.Second), int((warmup+measure)/time.Second)
	rep.Window = [2]int{w0, w1}
	if w1 > len(rep.PerSecond) {
		w1 = len(rep.PerSecond) // the run ended early; the shortfall shows in the rate
	}
	n := 0
	rep.WindowMin = -1
	for _, c := range rep.PerSecond[min(w0, w1):w1] {
		n += c
		if rep.WindowMin < 0 || c < rep.WindowMin {
			rep.WindowMin = c
		}
		rep.WindowMax = max(rep.WindowMax, c)
	}
	rep.Measured = float64(n) / float64(rep.Window[1]-rep.Window[0])
	rep.RateError = rep.Measured/rep.ProviderRate - 1
}

// queueMin is the smallest queue sampled inside the window (seconds since
// the first send): a queue that ran dry would lower the rate for lack of
// pushes, not because of the sender.
func queueMin(samples []report.SenderSample, fake *swrvefake.Fake, started time.Time, window [2]int) int {
	log := fake.Log()
	if len(log) == 0 {
		return 0
	}
	first := log[0].At.Sub(started).Seconds()
	m := -1
	for _, s := range samples {
		if t := s.T - first; t >= float64(window[0]) && t < float64(window[1]) && (m < 0 || s.QueueSize < m) {
			m = s.QueueSize
		}
	}
	return max(m, 0)
}
