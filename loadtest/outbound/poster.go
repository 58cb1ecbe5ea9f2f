package outbound

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/autopush-go/autopush/loadtest/appserver"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
)

// The application back-end of a sender run: its pushes' schedule, posted
// open loop, and each client's answers.

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
