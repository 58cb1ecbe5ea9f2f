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
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/loadtest/cluster"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/monitor"
	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
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
