package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/scylla"
	"github.com/autopush-go/autopush/tools/cql/localcluster"
)

// The sender nodes' settings in TestClusterSenderFaults.
const (
	// faultLease is short enough to expire within the test, and above
	// twice the provider's timeout (checked at start).
	faultLease   = 40 * time.Second
	faultTimeout = 15 * time.Second
	// faultLatency is the fake Swrve's answer time. The nodes' pools
	// are sized for 200 ms (swrve-average-latency): 112 sends, which
	// node a's calls held at the provider fill, so that its queue grows.
	faultLatency = 100 * time.Millisecond
)

// clusterFaultPushes is how many pushes TestClusterSenderFaults posts:
// SENDER_CLUSTER_FAULT_PUSHES, or 3,000 in make test's cluster step.
// `make sender-cluster-faults` posts 20,000.
func clusterFaultPushes(t *testing.T) int {
	v := os.Getenv("SENDER_CLUSTER_FAULT_PUSHES")
	if v == "" {
		return 3000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1000 {
		t.Fatalf("SENDER_CLUSTER_FAULT_PUSHES=%q is not a number of at least 1000", v)
	}
	return n
}

// TestClusterSenderFaults: two autoendpoint processes with their sender
// workers share a keyspace replicated 3 times on a real 3-node Cassandra
// cluster (the store's defaults: LOCAL_QUORUM, LWTs at LOCAL_SERIAL) and
// one fake Swrve account. Pushes are posted through the push API, one to
// each node in turn. Then:
//
//   - node a is SIGKILLed while it holds leases: pushes queued and calls
//     in flight at the provider. Node b takes them over as they expire;
//   - at node b's first takeover, Cassandra node 1 is SIGKILLed, and node
//     a is started again, whose recovery takes back at once the leases
//     node b has not claimed yet (their claims may race); Cassandra node
//     1 is restarted once all of node a's pushes were sent.
//
// The provider's log must show every push the API accepted accepted by
// the provider (answered 200) exactly once: none missing, none twice;
// and none the API refused, but those the refusing node logged as
// possibly sent (docs/sender.md, Durability). Node b must start no
// attempt on a lease of node a's before it expired.
//
// Node a's calls in flight at its kill are answered 503 by the provider
// (after the kill), so that none of them counts as sent: a call the
// provider accepted just before its node died is sent again under
// sender-interrupted=resend (docs/sender.md, Durability), which
// TestCrashMidStream bounds. Here every count is exact.
func TestClusterSenderFaults(t *testing.T) {
	localcluster.SkipUnlessGated(t, "make sender-cluster-faults")
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	began := time.Now()
	step := func(format string, args ...any) {
		t.Helper()
		t.Logf("%6.1fs "+format, append([]any{time.Since(began).Seconds()}, args...)...)
	}
	total := clusterFaultPushes(t)
	bin := filepath.Join(t.TempDir(), "autoendpoint")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the nodes' (cleanups run last first)
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	cfg := scylla.DefaultConfig()
	cfg.Hosts, cfg.Keyspace = c.Hosts, "senderfaults"
	if err := scylla.ApplySchema(ctx, cfg, localcluster.Replication(3)); err != nil {
		t.Fatal(err)
	}
	store, err := scylla.New(ctx, cfg) // the test's own reads
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	step("3 CQL nodes up, keyspace replicated 3 times")

	fake, err := swrvefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	fake.SetLatency(func() time.Duration { return faultLatency })
	a, b := startSenderNodes(t, bin, fake.URL(), c.Hosts, cfg.Keyspace, total)
	// Both hold a share of the account's pace before the pushes come, so
	// each queues what it accepts.
	et.Eventually(t, time.Minute, "the two nodes share the account's pace", func() bool {
		pa, pb := a.metric(`autosender_share_parts{provider="swrve"}`), b.metric(`autosender_share_parts{provider="swrve"}`)
		return pa > 0 && pb > 0 && pa+pb == 120
	})
	po := startPoster([2]string{a.base, b.base}, total)

	// (a) Node a sends; then the provider holds its calls (answered 503
	// once node a is gone), its pool fills and its queue grows, the
	// posts to it stop, and it is SIGKILLed.
	et.Eventually(t, 3*time.Minute, "node a sending", func() bool { return answered(fake, a.key) >= max(100, total/30) })
	fake.SetFaults(func(r swrvefake.Received) swrvefake.Fault {
		if r.PushKey == a.key {
			return swrvefake.Fault{Status: http.StatusServiceUnavailable, Delay: 10 * time.Minute}
		}
		return swrvefake.Fault{}
	})
	et.Eventually(t, 2*time.Minute, "node a's pool full and pushes queued", func() bool {
		return a.metric(`autosender_queue_size{provider="swrve"}`) >= float64(max(50, total/60))
	})
	po.stopA()
	// Every call the provider accepted from node a has its outcome
	// recorded, so that none is resent as interrupted.
	sentByA := usersOf(fake, a.key, http.StatusOK)
	et.Eventually(t, time.Minute, "node a's outcomes recorded", func() bool {
		ps, err := readPushes(ctx, store, po, sentByA)
		return err == nil && all(ps, func(p storage.Push) bool { return p.State == storage.PushSent })
	})
	queued, held := a.metric(`autosender_queue_size{provider="swrve"}`), countKey(fake, a.key, http.StatusServiceUnavailable)
	killed := time.Now()
	if err := a.p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.p.Exited()
	if n := answered(fake, a.key); n != len(sentByA) {
		t.Fatalf("the provider accepted %d calls of node a, %d when its outcomes were checked", n, len(sentByA))
	}
	// Its leases, from the store: its pushes IN_MEMORY under its name,
	// with their expiry. (Pushes it accepted while its share of the pace
	// had lapsed, its renewals late on a loaded machine, went PENDING.)
	ofA, err := readPushes(ctx, store, po, slices.Collect(maps.Keys(po.of("a"))))
	if err != nil {
		t.Fatal(err)
	}
	leased := map[string]int64{} // user -> lease expiry, ms
	inFlight := 0
	for u, p := range ofA {
		if p.State == storage.PushInMemory && p.Owner == a.name {
			leased[u] = p.At
			if at := p.LastAttempt(); at != nil && at.Status == storage.AttemptInProcess {
				inFlight++
			}
		}
	}
	if len(leased) == 0 {
		t.Fatal("node a held no lease at its kill")
	}
	step("node a SIGKILLed holding %d leases (%d calls in flight: %d held at the provider; %d queued by its metrics); %d of its calls accepted before",
		len(leased), inFlight, held, int(queued), len(sentByA))

	// (b) At node b's first takeover, CQL node 1 is killed and node a
	// starts again (its fault gone): its recovery and node b's claims
	// may race for the same pushes, with a replica down.
	leasedSent := func(key string) int {
		n := 0
		for _, r := range fake.Log() {
			if _, ok := leased[r.User]; ok && r.Status == http.StatusOK && (key == "" || r.PushKey == key) {
				n++
			}
		}
		return n
	}
	et.Eventually(t, faultLease+2*time.Minute, "node b taking node a's pushes over", func() bool { return leasedSent(b.key) > 0 })
	if err := c.Kill(ctx, 0); err != nil {
		t.Fatal(err)
	}
	cqlDown := time.Now()
	fake.SetFaults(nil)
	a.start(t, bin)
	step("node b took node a's first lease over; CQL node 1 SIGKILLed; node a started again")
	et.Eventually(t, 3*time.Minute, "node a's pushes sent with CQL node 1 down", func() bool { return leasedSent("") >= len(leased) })
	leasesDone := time.Now()
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	cqlBack := time.Now()
	step("node a's %d leased pushes sent (%d by node b); CQL node 1 restarted", len(leased), leasedSent(b.key))
	<-po.done
	accepted, refused := po.result()
	for _, err := range po.errs {
		t.Error(err)
	}

	// Every push final, then the provider's log counted.
	var final map[string]storage.Push
	for deadline := time.Now().Add(5 * time.Minute); ; {
		final, err = readPushes(ctx, store, po, slices.Collect(maps.Keys(accepted)))
		if err == nil && all(final, func(p storage.Push) bool { return p.State.Final() }) {
			break
		}
		if time.Now().After(deadline) {
			states := map[storage.PushState]int{}
			for u, p := range final {
				if states[p.State]++; !p.State.Final() && states[p.State] <= 10 {
					t.Errorf("%s (accepted by node %s) is %s: %+v", u, accepted[u].node, p.State, p)
				}
			}
			t.Fatalf("pushes not final 5 min after the last post: by state %v (%v); %d accepted by the provider",
				states, err, answered(fake, a.key)+answered(fake, b.key))
		}
		time.Sleep(time.Second) // polling the store
	}
	step("every push final")
	got := map[string]int{}
	var last time.Time
	for _, r := range fake.Log() {
		if r.Status == http.StatusOK {
			got[r.User]++
			last = r.At
		}
	}
	missing, twice := 0, 0
	for u, p := range final {
		switch n := got[u]; {
		case n == 0:
			missing++
			t.Errorf("%s (accepted by node %s) never accepted by the provider; it ended %s, attempts %+v", u, accepted[u].node, p.State, p.Attempts)
		case n > 1:
			twice++
			t.Errorf("%s (accepted by node %s) accepted by the provider %d times; attempts %+v", u, accepted[u].node, n, p.Attempts)
		}
		if p.State != storage.PushSent {
			t.Errorf("%s ended %s", u, p.State)
		}
	}
	// A refused push the provider got: the node that refused it must
	// have logged it as possibly sent (its FAILED could not be written:
	// docs/sender.md, Durability).
	refusedSent := 0
	for u := range got {
		if _, ok := accepted[u]; ok {
			continue
		}
		refusedSent++
		if !loggedMaybeSent(ctx, t, store, u, a, b) {
			t.Errorf("the provider accepted %s, which the push API refused (%d), and no node logged it as possibly sent", u, refused[u])
		}
	}

	// Node a's leases: node b's first attempt at each came after it
	// expired; the others node a took back after its restart.
	byB := 0
	var afterLease []time.Duration
	for u, expiry := range leased {
		p := final[u]
		for _, at := range p.Attempts {
			if at.Node != b.name {
				continue
			}
			if at.Started < expiry {
				t.Errorf("%s: node b started an attempt at %s, before node a's lease expired at %s",
					u, time.UnixMilli(at.Started).Format(time.StampMilli), time.UnixMilli(expiry).Format(time.StampMilli))
			}
			afterLease = append(afterLease, time.Duration(at.Started-expiry)*time.Millisecond)
			break
		}
		if at := p.LastAttempt(); at != nil && at.Node == b.name {
			byB++
		}
	}
	if len(afterLease) == 0 {
		t.Error("node b took none of node a's leases over")
	}
	slices.Sort(afterLease)
	t.Logf("%d pushes accepted (%d by node a, %d by node b) in %s, %d refused %v (%d of them sent, each logged); at the provider: %d missing, %d accepted twice, %d calls answered 503 (node a's, held at its kill)",
		len(accepted), po.count("a"), po.count("b"), po.took.Round(time.Second), len(refused), refused, refusedSent, missing, twice, held)
	if n := len(afterLease); n > 0 {
		t.Logf("node a's %d leases: %d sent by node b, %d by node a after its restart (its claims won/lost: recovery %v/%v, takeover %v/%v); node b started each %s to %s (median %s) after its lease expired",
			len(leased), byB, len(leased)-byB, a.metric(`autosender_claims_total{job="recover",result="claimed"}`),
			a.metric(`autosender_claims_total{job="recover",result="lost"}`),
			a.metric(`autosender_claims_total{job="send_scheduled",result="claimed"}`),
			a.metric(`autosender_claims_total{job="send_scheduled",result="lost"}`),
			afterLease[0].Round(time.Millisecond), afterLease[n-1].Round(time.Millisecond), afterLease[n/2].Round(time.Millisecond))
	}
	t.Logf("CQL node 1 down %s; from node a's kill: its last leased push sent %s, the last push %s; node b's storage errors (receive, attempt, queue, share): %v %v %v %v; whole test %s",
		cqlBack.Sub(cqlDown).Round(time.Second), leasesDone.Sub(killed).Round(time.Second), last.Sub(killed).Round(time.Second),
		b.metric(`autosender_storage_errors_total{stage="receive"}`), b.metric(`autosender_storage_errors_total{stage="attempt"}`),
		b.metric(`autosender_storage_errors_total{stage="queue"}`), b.metric(`autosender_storage_errors_total{stage="share"}`),
		time.Since(began).Round(time.Second))
}

// loggedMaybeSent reports whether a node logged a stored push of user's
// (found by its key) as refused yet possibly sent.
func loggedMaybeSent(ctx context.Context, t *testing.T, store storage.PushStore, user string, nodes ...*senderNode) bool {
	t.Helper()
	ps, _, err := store.PushesByKey(ctx, storage.AllClients, user, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		for run := 1; run <= n.runs; run++ {
			out, err := os.ReadFile(filepath.Join(n.logs, fmt.Sprintf("%s-%d.log", n.name, run)))
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(string(out)) {
				for _, p := range ps {
					if strings.Contains(line, "may be sent") && strings.Contains(line, p.ID.String()) {
						return true
					}
				}
			}
		}
	}
	return false
}

// senderNode is one autoendpoint process with its sender workers.
type senderNode struct {
	name, key string // its sender-node name, and the push_key its keys file maps Hello to
	args      []string
	logs      string // its runs' output: logs/name-run.log
	runs      int
	p         *proc.Proc
	base      string // http://host:port of its public listener
	metrics   string // its /metrics URL
}

// startSenderNodes starts node-a and node-b on keyspace, sending through
// the fake Swrve at url; node-a's keys file maps Hello to push_key k-a,
// node-b's to k-b, so the provider's log says which node called. Their
// output is kept in a directory of its own when the test fails.
func startSenderNodes(t *testing.T, bin, url string, hosts []string, keyspace string, total int) (a, b *senderNode) {
	t.Helper()
	dir := t.TempDir()
	logs, err := os.MkdirTemp("", "TestClusterSenderFaults-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the nodes' output is in %s", logs)
			return
		}
		os.RemoveAll(logs)
	})
	a, b = &senderNode{name: "node-a", key: "k-a", logs: logs}, &senderNode{name: "node-b", key: "k-b", logs: logs}
	for _, n := range []*senderNode{a, b} {
		keys := filepath.Join(dir, n.name+".yaml")
		if err := os.WriteFile(keys, []byte("swrve:\n  messagePrototypePushKeys:\n    Hello:\n      IOS: "+n.key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		n.args = []string{"-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0",
			"-crypto-key", "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=", "-node-secret", "cluster-test-secret", "-push-api-keys", "k",
			"-storage", "scylla", "-cql-hosts", strings.Join(hosts, ","), "-cql-keyspace", keyspace,
			"-sender-node", n.name, "-swrve-url", url, "-swrve-keys-file", keys,
			"-swrve-timeout", faultTimeout.String(), "-swrve-average-latency", "200ms",
			"-sender-lease", faultLease.String(), "-sender-retry-delay", "2s", "-sender-queue-capacity", strconv.Itoa(total + 1000),
			"-sender-scheduled-start-delay", "0s", "-sender-pending-start-delay", "0s", "-request-log=false"}
		n.start(t, bin)
		t.Cleanup(func() { n.p.Stop(30 * time.Second) })
	}
	return a, b
}

func (n *senderNode) start(t *testing.T, bin string) {
	t.Helper()
	n.runs++
	p, err := proc.Start(context.Background(), exec.Command(bin, n.args...), proc.Config{StartMsg: "autoendpoint started",
		LogPath: filepath.Join(n.logs, fmt.Sprintf("%s-%d.log", n.name, n.runs))})
	if err != nil {
		t.Fatal(err)
	}
	n.p, n.base, n.metrics = p, "http://"+p.Field("listen"), "http://"+p.Field("metrics")+"/metrics"
}

// metric is one series of the node's /metrics (0 when absent or the
// node does not answer).
func (n *senderNode) metric(series string) float64 {
	m, err := promtext.Scrape(context.Background(), nil, n.metrics)
	if err != nil {
		return 0
	}
	return m[series]
}

// acceptedPush is one push the API answered 201: the node it was posted
// to ("a" or "b") and its Location.
type acceptedPush struct{ node, loc string }

// poster posts pushes in the background (32 at a time), users u00000,
// u00001, ..., one to each node in turn until stopA, then all to node b.
type poster struct {
	bases [2]string
	done  chan struct{} // closed when every post has its answer
	took  time.Duration // from the first post to the last answer (once done)
	inA   sync.WaitGroup

	mu       sync.Mutex
	toA      bool
	accepted map[string]acceptedPush
	refused  map[string]int // user -> status (0: no answer)
	errs     []error        // read once done
}

func startPoster(bases [2]string, n int) *poster {
	p := &poster{bases: bases, done: make(chan struct{}), toA: true,
		accepted: map[string]acceptedPush{}, refused: map[string]int{}}
	go p.run(n)
	return p
}

func (p *poster) run(n int) {
	defer close(p.done)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		node := 1
		p.mu.Lock()
		if i%2 == 0 && p.toA {
			node = 0
			p.inA.Add(1)
		}
		p.mu.Unlock()
		go func() {
			defer func() {
				<-sem
				wg.Done()
				if node == 0 {
					p.inA.Done()
				}
			}()
			p.post(node, fmt.Sprintf("u%05d", i))
		}()
	}
	wg.Wait()
	p.took = time.Since(start)
}

// post sends user's push to node; a refusal is 503 with Retry-After (the
// store unavailable), anything else an error.
func (p *poster) post(node int, user string) {
	body := `{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"` + user + `","message":"m"}`
	req, _ := http.NewRequest("POST", p.bases[node]+"/push", bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	status, retryAfter := 0, ""
	if err == nil {
		status, retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
		resp.Body.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if status == http.StatusCreated {
		p.accepted[user] = acceptedPush{node: string(rune('a' + node)), loc: resp.Header.Get("Location")}
		return
	}
	p.refused[user] = status
	if status != http.StatusServiceUnavailable || retryAfter == "" {
		p.errs = append(p.errs, fmt.Errorf("POST %s to node %c: %d (Retry-After %q) %v", user, 'a'+node, status, retryAfter, err))
	}
}

// stopA sends the pushes not yet posted to node b, and returns once every
// post to node a has its answer.
func (p *poster) stopA() {
	p.mu.Lock()
	p.toA = false
	p.mu.Unlock()
	p.inA.Wait()
}

// get is the accepted push of user (zero if not accepted).
func (p *poster) get(user string) acceptedPush {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted[user]
}

// of is the pushes node accepted so far, by user.
func (p *poster) of(node string) map[string]acceptedPush {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]acceptedPush{}
	for u, a := range p.accepted {
		if a.node == node {
			out[u] = a
		}
	}
	return out
}

// count is how many pushes node accepted so far.
func (p *poster) count(node string) int { return len(p.of(node)) }

// result is every accepted push, by user, and the statuses of the posts
// refused (0: no answer), by user; call once done.
func (p *poster) result() (map[string]acceptedPush, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.refused
}

// readPushes reads the pushes of users from the store, 16 at a time;
// users whose posts were refused are left out.
func readPushes(ctx context.Context, store storage.PushStore, po *poster, users []string) (map[string]storage.Push, error) {
	var mu sync.Mutex
	out := map[string]storage.Push{}
	var first error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, u := range users {
		loc := po.get(u).loc
		if loc == "" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			id, err := uuid.Parse(strings.TrimPrefix(loc, "/push/"))
			var p storage.Push
			if err == nil {
				p, err = store.GetPush(ctx, id)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				first = cmp.Or(first, fmt.Errorf("%s: %w", u, err))
				return
			}
			out[u] = p
		}()
	}
	wg.Wait()
	return out, first
}

func all(ps map[string]storage.Push, ok func(storage.Push) bool) bool {
	for _, p := range ps {
		if !ok(p) {
			return false
		}
	}
	return true
}

// countKey is how many requests with push_key key the fake answered
// status.
func countKey(f *swrvefake.Fake, key string, status int) int {
	return len(usersOf(f, key, status))
}

// answered is how many requests with push_key key the fake accepted.
func answered(f *swrvefake.Fake, key string) int { return countKey(f, key, http.StatusOK) }

// usersOf are the users of the requests with push_key key the fake
// answered status, in arrival order.
func usersOf(f *swrvefake.Fake, key string, status int) []string {
	var us []string
	for _, r := range f.Log() {
		if r.PushKey == key && r.Status == status {
			us = append(us, r.User)
		}
	}
	return us
}
