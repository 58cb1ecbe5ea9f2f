// Package outbound is the load tester's sender scenario (make
// sender-bench, make bridge-bench; docs/sender.md, docs/benchmarks.md):
// autoendpoint with its sender workers (loadtest/cluster) against a fake
// provider in this process (Swrve, or FCM for pushes to bridged phones),
// pushes offered open loop above the provider's rate (POST /push, or
// WebPush POSTs to the phones' endpoints), the provider's rate measured
// over a window and in any second, the pool's bound checked, and every
// accepted push accounted for. No user agents: it drives no workers.
//
// It is the only part of the load tester that links the fake providers
// (sender/sendertest); no service binary does.
package outbound

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/loadtest/appserver"
	"github.com/autopush-go/autopush/loadtest/cluster"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/monitor"
	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
)

// Run runs the sender scenario of cfg into the run's report (out.Sender,
// out.Cluster, out.Series), followed by mon; its processes log to
// logDir.
func Run(ctx context.Context, cfg *scenario.Config, out *report.Report, mon *monitor.Monitor, logDir string) error {
	defer mon.StopProgress()
	rep := &report.SenderReport{Provider: cfg.Provider, Offered: cfg.PushRate, ProviderRate: cfg.ProviderRate, Pace: cfg.Pace(),
		States: map[string]int64{}}
	out.Sender = rep
	fake, provLatency, err := startFake(cfg.Provider, cfg.ProviderLatency)
	if err != nil {
		return err
	}
	defer fake.close()
	node, keys, err := cluster.StartSender(ctx, cfg, logDir, mon.Log(), fake.provider)
	if err != nil {
		return err
	}
	apiKey := keys[0]
	defer node.Stop()
	out.Cluster = node.Info()
	mon.Logf("autoendpoint (pid %d) on %s storage, its sender paced at %.0f/s (limit %.0f/s) against a fake %s at %s (%s latency)",
		node.Endpoint.PID(), node.Storage, cfg.Pace(), cfg.ProviderRate, fake.name, fake.url, cfg.ProviderLatency)

	p := newPoster(cfg, node.EndpointURL, keys)
	if fake.name == "fcm" {
		if p.endpoints, err = registerPhones(ctx, p.client, node.EndpointURL, cfg.Devices); err != nil {
			return monitor.StepError("registering phones", err)
		}
		rep.Phones = len(p.endpoints)
		mon.Logf("%d phones registered through the bridge registration API", len(p.endpoints))
	}
	metricsURL := node.APIMetricsURL
	stopSampling := sampleSender(ctx, mon, cfg, p, fake, node, metricsURL)
	events := schedule(cfg)
	count := len(events)
	rep.Scheduled = int64(count)
	mon.SetPhase("post", int64(count), func(s report.Sample) int64 { return s.Sent })
	t0, start := mon.Now(), time.Now()
	p.run(ctx, events)
	rep.PostSeconds = time.Since(start).Seconds()
	postEnd := time.Now()
	rep.CPU = mon.AvgCPU(t0, mon.Now())
	rep.Accepted, rep.Errors, rep.Response = p.accepted.Load(), p.errors(), hist.Summarize(p.total)
	rep.Achieved = float64(rep.Accepted) / rep.PostSeconds
	mon.Logf("POSTs done: %d of %d accepted in %.1fs; waiting for every accepted push to be SENT", rep.Accepted, count, rep.PostSeconds)

	mon.SetPhase("drain", rep.Accepted, func(s report.Sample) int64 { return s.Received })
	drainErr := waitDrained(ctx, node.EndpointURL, apiKey, cfg.DrainTimeout)
	rep.DrainSeconds = time.Since(postEnd).Seconds()
	samples := stopSampling()
	rep.Samples = samples
	out.Series = mon.Series()
	if drainErr != nil {
		mon.Logf("%v", drainErr)
	}
	if m, err := promtext.Scrape(ctx, nil, metricsURL); err == nil {
		rep.WentPending = int64(m["autosender_pushes_went_pending_total"])
		rep.CallerRuns = int64(m[`autosender_caller_runs_total{provider="`+fake.name+`"}`])
		rep.PoolSize = int(m[`autosender_pool_size{provider="`+fake.name+`"}`])
	}
	attempts, calls, err := p.account(ctx, rep)
	if err != nil {
		return monitor.StepError("accounting", err)
	}
	receipts := fake.receipts()
	providerSide(rep, receipts, attempts, calls, cfg.Warmup, cfg.Measure)
	rep.Latency = provLatency.summary()
	if cfg.Clients > 1 {
		rep.Clients = p.clientReports(cfg, receipts)
	}
	for _, c := range p.byClient {
		rep.TooMany += c.tooMany
	}
	rep.ProviderMaxNow = fake.maxInFlight()
	for _, s := range samples {
		rep.PoolBusyMax = max(rep.PoolBusyMax, s.PoolBusy)
	}
	rep.QueueMin = queueMin(samples, receipts, mon.Started(), rep.Window)
	return nil
}

// providerFake is the fake provider of a sender run, as the run reads it.
type providerFake struct {
	name, url                    string
	provider                     cluster.Provider // what the sender node is pointed at
	inFlight, maxInFlight, count func() int
	receipts                     func() []receipt // in the fake's log order (providerSide sorts them)
	close                        func() error
}

// receipt is one send the fake received: when, and the push it carried
// (Swrve: its user, one per push; FCM: the payload, unique per push).
type receipt struct {
	at  time.Time
	key string
}

// startFake starts the fake provider answering after latency ("seed":
// Swrve's measured distribution, swrvefake.MeasuredLatency; else a fixed
// duration).
func startFake(name, latency string) (*providerFake, *latencies, error) {
	draw, l := latencyFunc(latency)
	if name == "fcm" {
		f, err := fcmfake.Start()
		if err != nil {
			return nil, nil, err
		}
		f.SetLatency(draw)
		acct, err := f.NewAccount("loadtest")
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return &providerFake{name: "fcm", url: f.URL(), provider: cluster.Provider{Name: "fcm", URL: f.URL(), FCMAccount: acct.JSON()},
			inFlight: f.InFlight, maxInFlight: f.MaxInflight, count: f.Sends,
			receipts: func() []receipt { return fcmReceipts(f.Log()) }, close: f.Close}, l, nil
	}
	f, err := swrvefake.Start()
	if err != nil {
		return nil, nil, err
	}
	f.SetLatency(draw)
	return &providerFake{name: "swrve", url: f.URL(), provider: cluster.Provider{Name: "swrve", URL: f.URL()}, inFlight: f.InFlight, maxInFlight: f.MaxInflight, count: f.Count,
		receipts: func() []receipt {
			log := f.Log()
			out := make([]receipt, len(log))
			for i, x := range log {
				out[i] = receipt{x.At, x.User}
			}
			return out
		}, close: f.Close}, l, nil
}

// fcmReceipts reads each FCM message's payload (data.body, base64url).
func fcmReceipts(log []fcmfake.Received) []receipt {
	out := make([]receipt, len(log))
	for i, x := range log {
		var m struct {
			Message struct {
				Android struct {
					Data map[string]string `json:"data"`
				} `json:"android"`
			} `json:"message"`
		}
		out[i].at = x.At
		if json.Unmarshal(x.Body, &m) == nil {
			b, _ := base64.RawURLEncoding.DecodeString(m.Message.Android.Data["body"])
			out[i].key = string(b)
		}
	}
	return out
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

// latencyFunc is a fake's answer time ("seed": Swrve's measured
// distribution; else a fixed duration), each drawn recorded in l.
func latencyFunc(latency string) (func() time.Duration, *latencies) {
	draw := func() time.Duration { return 0 }
	if latency == "seed" {
		draw = swrvefake.MeasuredLatency(rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	} else if d, err := time.ParseDuration(latency); err == nil {
		draw = func() time.Duration { return d }
	}
	l := &latencies{h: hist.New()}
	return func() time.Duration {
		d := draw()
		l.mu.Lock()
		l.h.RecordValue(max(d.Microseconds(), 1))
		l.mu.Unlock()
		return d
	}, l
}

// event is one push of the run: when it is due after the start, and
// which client posts it.
type event struct {
	at     time.Duration
	client int
}

// schedule is the run's pushes in time order: one client at PushRate;
// or, with Clients above 1, the first at PushRate (the flood) and each
// other at ClientRate, all for Duration.
func schedule(cfg *scenario.Config) []event {
	var out []event
	add := func(client int, rate float64) {
		period := time.Duration(float64(time.Second) / rate)
		for i := range int(rate * cfg.Duration.Seconds()) {
			out = append(out, event{time.Duration(i) * period, client})
		}
	}
	add(0, cfg.PushRate)
	for c := 1; c < cfg.Clients; c++ {
		add(c, cfg.ClientRate)
	}
	slices.SortStableFunc(out, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	return out
}

// poster is the application back-end: POST /push open loop, each push at
// its scheduled time on its own goroutine whatever happened to the ones
// before, its latency counted from that time.
type poster struct {
	client *http.Client
	url    string
	auth   string   // the run's queries
	auths  []string // each client's
	max    int64
	// endpoints are the bridged phones' push endpoints (-provider fcm):
	// the i-th push is a WebPush POST to endpoints[i % len].
	endpoints []string
	inFlight  atomic.Int64
	posted    atomic.Int64
	accepted  atomic.Int64
	wg        sync.WaitGroup

	mu       sync.Mutex
	errs     map[string]int64
	total    *hdrhistogram.Histogram // every POST
	interval *hdrhistogram.Histogram // since the last sample
	ids      []string                // by sequence: the push's id, "" when not accepted
	events   []event                 // by sequence
	due      []time.Time             // by sequence: when it was due (its POST's latency counts from then)
	byClient []clientCounts
	sentIDs  map[string]bool // the accepted pushes account found SENT
}

// clientCounts are one client's POSTs by answer.
type clientCounts struct{ posted, accepted, tooMany, failed int64 }

func newPoster(cfg *scenario.Config, endpointURL string, keys []string) *poster {
	tr := &http.Transport{MaxConnsPerHost: cfg.AppServerConns, MaxIdleConnsPerHost: cfg.AppServerConns, IdleConnTimeout: time.Minute}
	p := &poster{client: &http.Client{Transport: tr, Timeout: cfg.PushTimeout}, url: endpointURL, auth: "Bearer " + keys[0],
		max: int64(cfg.MaxInFlight), errs: map[string]int64{}, total: hist.New(), interval: hist.New()}
	clients := keys[:1]
	if len(keys) > 1 {
		clients = keys[1:]
	}
	for _, k := range clients {
		p.auths = append(p.auths, "Bearer "+k)
	}
	p.byClient = make([]clientCounts, len(p.auths))
	return p
}

// run posts the events' pushes, each at its time after it starts, and
// returns once every one was answered.
func (p *poster) run(ctx context.Context, events []event) {
	count := len(events)
	p.ids, p.events, p.due = make([]string, count), events, make([]time.Time, count)
	start := time.Now()
	for i, e := range events {
		at := start.Add(e.at)
		p.due[i] = at
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
		p.clientCount(e.client, func(c *clientCounts) { c.posted++ })
		if p.inFlight.Load() >= p.max {
			p.count("loadtest: in-flight cap")
			p.clientCount(e.client, func(c *clientCounts) { c.failed++ })
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
	req, err := p.request(i)
	if err != nil {
		p.count("loadtest: request: " + err.Error())
		return
	}
	resp, err := p.client.Do(req)
	took := max(time.Since(at).Microseconds(), 1)
	p.mu.Lock()
	p.total.RecordValue(took)
	p.interval.RecordValue(took)
	p.mu.Unlock()
	client := p.events[i].client
	if err != nil {
		p.count("transport: " + appserver.TransportReason(err))
		p.clientCount(client, func(c *clientCounts) { c.failed++ })
		return
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	loc := resp.Header.Get("Location")
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		p.count(appserver.StatusReason(resp.StatusCode, reply))
		p.clientCount(client, func(c *clientCounts) { c.tooMany++ })
		return
	case resp.StatusCode != http.StatusCreated:
		p.count(appserver.StatusReason(resp.StatusCode, reply))
		p.clientCount(client, func(c *clientCounts) { c.failed++ })
		return
	case p.endpoints != nil && strings.Contains(loc, "/m/"):
		// A WebPush answer names the message, not the sender's push:
		// account counts every push of this run's fresh store.
	case strings.HasPrefix(loc, "/push/"):
		p.ids[i] = strings.TrimPrefix(loc, "/push/")
	default:
		p.count(appserver.StatusReason(resp.StatusCode, reply))
		p.clientCount(client, func(c *clientCounts) { c.failed++ })
		return
	}
	p.accepted.Add(1)
	p.clientCount(client, func(c *clientCounts) { c.accepted++ })
}

func (p *poster) clientCount(client int, fn func(*clientCounts)) {
	p.mu.Lock()
	fn(&p.byClient[client])
	p.mu.Unlock()
}

// clientReports are each client's POSTs, its pushes SENT (account's
// sentIDs) and the time from each push's due POST to its first receipt at the
// provider (receipts: keyed by pushKey, lt-<sequence>).
func (p *poster) clientReports(cfg *scenario.Config, receipts []receipt) []report.ClientReport {
	first := make(map[string]time.Time, len(receipts))
	for _, r := range receipts {
		if t, ok := first[r.key]; !ok || r.at.Before(t) {
			first[r.key] = r.at
		}
	}
	out := make([]report.ClientReport, len(p.auths))
	lat := make([]*hdrhistogram.Histogram, len(p.auths))
	for c := range out {
		n := p.byClient[c]
		out[c] = report.ClientReport{Name: fmt.Sprintf("client-%d", c+1), Offered: cfg.ClientRate, Posted: n.posted,
			Accepted: n.accepted, TooMany: n.tooMany, Failed: n.failed}
		lat[c] = hist.New()
	}
	out[0].Offered, out[0].Flooding = cfg.PushRate, true
	for i, id := range p.ids {
		if id == "" {
			continue
		}
		c := p.events[i].client
		if p.sentIDs[id] {
			out[c].Sent++
		}
		if t, ok := first[pushKey(i)]; ok {
			lat[c].RecordValue(max(t.Sub(p.due[i]).Microseconds(), 1))
		}
	}
	for c := range out {
		out[c].ToProvider = hist.Summarize(lat[c])
	}
	return out
}

// request is the i-th push: a POST /push to the sender, or a WebPush POST
// to a bridged phone whose payload (opaque to the service, as an encrypted
// one is) names the push, so the provider's receipts can be matched.
func (p *poster) request(i int) (*http.Request, error) {
	if p.endpoints != nil {
		req, err := http.NewRequest(http.MethodPost, p.endpoints[i%len(p.endpoints)], strings.NewReader(pushPayload(i)))
		if err == nil {
			req.Header.Set("TTL", "3600")
			req.Header.Set("Content-Encoding", "aes128gcm")
		}
		return req, err
	}
	platform := [2]string{"IOS", "ANDROID"}[i%2]
	body := fmt.Sprintf(`{"platform":%q,"messagePrototypeKey":"Hello","pushKey":%q,"message":"loadtest push %d","cronExpression":null}`,
		platform, pushKey(i), i)
	req, err := http.NewRequest(http.MethodPost, p.url+"/push", strings.NewReader(body))
	if err == nil {
		req.Header.Set("Authorization", p.auths[p.events[i].client])
		req.Header.Set("Content-Type", "application/json")
	}
	return req, err
}

// pushKey is the i-th push's device (Swrve's user): one per push.
func pushKey(i int) string { return fmt.Sprintf("lt-%08d", i) }

// pushPayload is the i-th WebPush payload: the size of a small encrypted
// message (an aes128gcm header and a few dozen bytes).
func pushPayload(i int) string {
	return fmt.Sprintf("loadtest push %08d", i) + strings.Repeat(".", 100)
}

// registerPhones registers n FCM phones through the bridge registration
// API, a few at a time, and returns their push endpoints.
func registerPhones(ctx context.Context, client *http.Client, base string, n int) ([]string, error) {
	endpoints := make([]string, n)
	errs := make(chan error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				body := fmt.Sprintf(`{"token":"loadtest-phone-%08d"}`, i)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/fcm/"+cluster.FCMApp+"/registration", strings.NewReader(body))
				if err != nil {
					errs <- err
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				var r struct{ Endpoint string }
				err = json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || err != nil || r.Endpoint == "" {
					errs <- fmt.Errorf("register phone %d: %d (%v)", i, resp.StatusCode, err)
					continue
				}
				endpoints[i] = r.Endpoint
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return endpoints, nil
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

// sampleSender starts sampling (mon.Start) and returns its stop, which
// returns the sender's own samples; the series gets the POSTs, the
// provider's receipts and the endpoint's memory and CPU.
func sampleSender(ctx context.Context, mon *monitor.Monitor, cfg *scenario.Config, p *poster, fake *providerFake, node *cluster.Cluster, metricsURL string) (stop func() []report.SenderSample) {
	var out []report.SenderSample // the monitor's goroutine appends; read after stop
	pid := node.Endpoint.PID()
	client := &http.Client{Timeout: cfg.SampleEvery}
	stopMonitor := mon.Start(func() report.Sample {
		now := mon.Now()
		ss := report.SenderSample{T: now, ProviderInFlight: fake.inFlight(), Received: int64(fake.count())}
		if m, err := promtext.Scrape(ctx, client, metricsURL); err == nil {
			ss.QueueSize = int(m[`autosender_queue_size{provider="`+fake.name+`"}`])
			ss.PoolBusy = int(m[`autosender_pool_busy{provider="`+fake.name+`"}`])
		}
		out = append(out, ss)
		s := report.Sample{T: now, Sent: p.posted.Load(), Accepted: p.accepted.Load(), Received: ss.Received,
			Response: p.takeInterval(), CPU: mon.ReadCPU(nil, []int{pid}, []int{os.Getpid()})}
		s.PostErrors = s.Sent - s.Accepted - p.inFlight.Load()
		s.EndpointRSS, _ = probe.ProcRSS(pid)
		s.Phase = mon.Phase()
		return s
	})
	return func() []report.SenderSample { stopMonitor(); return out }
}

// listPage is one answer of GET /push?state=.
type listPage struct {
	Pushes []struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		PushKey  string `json:"pushKey"`
		Attempts []struct {
			Called *time.Time `json:"called"`
		} `json:"attempts"`
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
		if err := monitor.Sleep(ctx, 250*time.Millisecond); err != nil { // polling the sender's answer
			return err
		}
	}
}

// account pages through every state and counts the accepted pushes in
// each (all of them must be SENT); it returns each one's attempts by its
// pushKey (the device, one per push with Swrve), and when each attempt
// that reached the provider's client was let through its gate, ascending.
// WebPush answers do not name the sender's push: then every push of the
// run's store counts.
func (p *poster) account(ctx context.Context, rep *report.SenderReport) (map[string]int, []time.Time, error) {
	ours := make(map[string]bool, len(p.ids))
	for _, id := range p.ids {
		if id != "" {
			ours[id] = true
		}
	}
	all := p.endpoints != nil
	attempts := make(map[string]int, len(ours))
	p.sentIDs = make(map[string]bool, len(ours))
	var calls []time.Time
	for _, st := range append(slices.Clone(unfinished), "SENT", "FAILED", "GIVEN_UP") {
		cursor := ""
		for {
			page, err := getPage(ctx, p.url, strings.TrimPrefix(p.auth, "Bearer "), st, cursor, 1000)
			if err != nil {
				return nil, nil, err
			}
			for _, x := range page.Pushes {
				if all || ours[x.ID] {
					rep.States[st]++
					if st == "SENT" {
						p.sentIDs[x.ID] = true
					}
					attempts[x.PushKey] = len(x.Attempts)
					for _, a := range x.Attempts {
						if a.Called != nil {
							calls = append(calls, *a.Called)
						}
					}
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
	slices.SortFunc(calls, time.Time.Compare)
	return attempts, calls, nil
}

// providerSide reads the fake's receipts (sorting them by arrival)
// against the sender's calls (ascending): sends per second since the
// first, the most calls and receipts in any second and the transit
// spread between them, the rate over the window [warmup,
// warmup+measure), and duplicates: receipts of a push beyond the attempts
// its log shows (a retry after a timeout is a second receipt, and says
// so).
func providerSide(rep *report.SenderReport, log []receipt, attempts map[string]int, calls []time.Time, warmup, measure time.Duration) {
	// A fake stamps a receipt before it logs it, so receipts handled at
	// once may be logged out of order: sorted here (in place, for
	// queueMin too), as the seconds since the first, the sliding window
	// and the pairing with the calls need.
	slices.SortStableFunc(log, func(a, b receipt) int { return a.at.Compare(b.at) })
	rep.Received = int64(len(log))
	seen := make(map[string]int, len(log))
	times := make([]time.Time, len(log))
	for i, x := range log {
		if seen[x.key]++; seen[x.key] > max(attempts[x.key], 1) {
			rep.Duplicates++
		}
		times[i] = x.at
	}
	rep.Distinct = int64(len(seen))
	rep.MaxAnySecond = fcmfake.MaxInWindow(times, time.Second)
	rep.CallsMaxAnySecond = fcmfake.MaxInWindow(calls, time.Second)
	rep.TransitSpreadMs = transitSpread(calls, times)
	if len(log) == 0 {
		return
	}
	first := log[0].at
	for _, x := range log {
		sec := int(x.at.Sub(first) / time.Second)
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
	rep.RateError = rep.Measured/rep.Pace - 1
}

// transitSpread is how much the time from a call to its arrival varied,
// in ms, plus the 1 ms the calls' times are truncated to; -1 unless every
// call arrived (as many of each). Both are ascending. Any pairing of
// arrivals with calls bounds the arrivals in a window by the calls in a
// window longer by its delays' spread; the k-th arrival with the k-th
// call is the pairing of least spread, and needs no push ids.
func transitSpread(calls, arrivals []time.Time) float64 {
	if len(calls) != len(arrivals) || len(calls) == 0 {
		return -1
	}
	lo, hi := arrivals[0].Sub(calls[0]), arrivals[0].Sub(calls[0])
	for k := range calls {
		d := arrivals[k].Sub(calls[k])
		lo, hi = min(lo, d), max(hi, d)
	}
	return float64(hi-lo+time.Millisecond) / float64(time.Millisecond)
}

// queueMin is the smallest queue sampled inside the window (seconds since
// the first send; log sorted by providerSide): a queue that ran dry would
// lower the rate for lack of pushes, not because of the sender.
func queueMin(samples []report.SenderSample, log []receipt, started time.Time, window [2]int) int {
	if len(log) == 0 {
		return 0
	}
	first := log[0].at.Sub(started).Seconds()
	m := -1
	for _, s := range samples {
		if t := s.T - first; t >= float64(window[0]) && t < float64(window[1]) && (m < 0 || s.QueueSize < m) {
			m = s.QueueSize
		}
	}
	return max(m, 0)
}
