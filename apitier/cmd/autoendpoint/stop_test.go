package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
	"github.com/autopush-go/autopush/storage/scylla"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
)

// The settings of the stop and takeover rounds: the fake Swrve answers in
// stopLatency; the account's limit is Swrve's default (300 calls a
// second), its pace 250 (swrve-delay 4 ms).
const (
	stopLatency = 300 * time.Millisecond
	// slowLatency is node-a's answer time until it is stopped: its pool
	// (sized for stopLatency) fills, and most of what is posted to it
	// stays queued, as with a provider that answers slowly.
	slowLatency = 3 * time.Second
	stopLimit   = 300
	stopPace    = 250.0
	// stopBudget is autoendpoint's whole stop: 1.5 × shutdown-timeout
	// (10 s by default).
	stopBudget = 15 * time.Second
	// takeoverLease is the sender-lease of the takeover round: short, to
	// expire within the test, above twice takeoverTimeout.
	takeoverLease   = 12 * time.Second
	takeoverTimeout = 5 * time.Second
)

// stopSettings are the rounds and pushes of TestStopHandsBack and
// TestKillTakeover: SENDER_STOP_ROUNDS and SENDER_STOP_PUSHES, or 1 round
// of 1,500 in make test. `make sender-stop` runs 5 rounds of 5,000.
func stopSettings(t *testing.T) (rounds, pushes int) {
	return roundSettings(t, "SENDER_STOP_ROUNDS", "SENDER_STOP_PUSHES")
}

// roundSettings reads a long run's rounds and pushes from the variables
// named, each a positive number; 1 round of 1,500 pushes when unset (the
// size make test runs).
func roundSettings(t *testing.T, roundsVar, pushesVar string) (rounds, pushes int) {
	rounds, pushes = 1, 1500
	for name, v := range map[string]*int{roundsVar: &rounds, pushesVar: &pushes} {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q is not a positive number", name, s)
			}
			*v = n
		}
	}
	return rounds, pushes
}

// TestStopHandsBack SIGTERMs a sender node (autoendpoint with its
// workers) holding thousands of queued pushes, and counts at the fake
// Swrve:
//
//   - the node exits within its stop budget, and its log line and the
//     store say that nothing is left under its lease;
//   - every push is then sent exactly once (a stop lets the calls in
//     flight finish: none is sent twice), by the other node on the same
//     Cassandra keyspace, or, on the embedded store, by the node started
//     again;
//   - no second holds more calls than the account's limit.
//
// Before the fix, a node on Cassandra handed back one push per LWT after
// waiting for its calls in flight, ran out of its budget with most of its
// queue still under its lease, and the other node sent those only once
// the lease (5 minutes) expired.
func TestStopHandsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	rounds, pushes := stopSettings(t)
	for _, backend := range []string{"embedded", "scylla"} {
		t.Run(backend, func(t *testing.T) {
			for round := range rounds {
				r := stopRound(t, bin, backend, pushes)
				t.Logf("%s, round %d: %d accepted; at the SIGTERM %d queued on node-a; node-a exited %.1fs after it "+
					"(handed back %d, changed %d, left %d); the rest sent by %s from %.1fs after the SIGTERM at %.0f calls/s "+
					"(pace %.0f); at most %d calls in any second",
					backend, round+1, r.accepted, r.queued, r.exit.Seconds(), r.handed, r.changed, r.left, r.by,
					r.resumed.Seconds(), r.rate, stopPace, r.maxSecond)
			}
		})
	}
}

// stopResult is what one stop round measured.
type stopResult struct {
	accepted, queued      int
	exit, resumed         time.Duration // from the SIGTERM
	handed, changed, left int           // node-a's log line
	by                    string
	rate                  float64 // the sending node's calls a second after the stop
	maxSecond             int
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "autoendpoint")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// stopNode is one sender node of these rounds.
type stopNode struct {
	name, key string
	args      []string
	p         *proc.Proc
	base      string
	metrics   string
	mu        sync.Mutex
	stopped   map[string]any // the fields of its "sender stopped" line
}

// newStopNodes makes the nodes' settings: node-a's keys file maps Hello
// to push_key k-a, node-b's to k-b, so the provider's log says which node
// called. Their queues hold every push.
func newStopNodes(t *testing.T, url string, store []string, pushes int, extra ...string) (a, b *stopNode) {
	dir := t.TempDir()
	a, b = &stopNode{name: "node-a", key: "k-a"}, &stopNode{name: "node-b", key: "k-b"}
	for _, n := range []*stopNode{a, b} {
		keys := filepath.Join(dir, n.name+".yaml")
		if err := os.WriteFile(keys, []byte("swrve:\n  messagePrototypePushKeys:\n    Hello:\n      IOS: "+n.key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		n.args = append([]string{"-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0",
			"-crypto-key", "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=", "-node-secret", "stop-test-secret", "-push-api-keys", "k",
			"-sender-node", n.name, "-swrve-url", url, "-swrve-keys-file", keys, "-swrve-average-latency", "1s",
			"-sender-queue-capacity", strconv.Itoa(2*pushes + 1000), "-sender-scheduled-start-delay", "0s",
			"-sender-pending-start-delay", "0s", "-request-log=false"}, store...)
		n.args = append(n.args, extra...)
	}
	return a, b
}

func (n *stopNode) start(t *testing.T, bin string) {
	t.Helper()
	n.stopped = nil
	p, err := proc.Start(context.Background(), exec.Command(bin, n.args...), proc.Config{StartMsg: "autoendpoint started",
		Name: n.name, Watch: n.watch})
	if err != nil {
		t.Fatal(err)
	}
	n.p, n.base, n.metrics = p, "http://"+p.Field("listen"), "http://"+p.Field("metrics")+"/metrics"
	t.Cleanup(func() { p.Stop(30 * time.Second) })
}

// watch keeps the fields of the sender's stop line.
func (n *stopNode) watch(line []byte) {
	if !strings.Contains(string(line), "sender stopped") {
		return
	}
	var l struct{ Fields map[string]any }
	if json.Unmarshal(line, &l) == nil {
		n.mu.Lock()
		n.stopped = l.Fields
		n.mu.Unlock()
	}
}

// stopLine is the count field of node's stop line (-1: no such line).
func (n *stopNode) stopLine(field string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.stopped[field].(float64)
	if !ok {
		return -1
	}
	return int(v)
}

func (n *stopNode) queueSize(t *testing.T) int {
	return int(scrapeOne(t, n.metrics, `autosender_queue_size{provider="swrve"}`))
}

// stopRound posts pushes to node-a (node-b idle beside it on Cassandra),
// SIGTERMs node-a once they are stored, and judges the provider's log
// once every push is final.
func stopRound(t *testing.T, bin, backend string, pushes int) stopResult {
	t.Helper()
	fake, slow := startFake(t)
	var store []string
	var cfg scylla.Config
	dataDir := filepath.Join(t.TempDir(), "data")
	if backend == "embedded" {
		store = []string{"-data-dir", dataDir}
	} else {
		cfg = cqltest.Keyspace(t, "stop")
		store = []string{"-storage", "scylla", "-cql-hosts", strings.Join(cfg.Hosts, ","),
			"-cql-keyspace", cfg.Keyspace, "-cql-consistency", "ONE"}
	}
	a, b := newStopNodes(t, fake.URL(), store, pushes)
	a.start(t, bin)
	if backend == "scylla" {
		b.start(t, bin)
	}
	ids := postAll(t, a.base, pushes)
	res := stopResult{accepted: len(ids), queued: a.queueSize(t)}
	term := time.Now()
	resumeFrom := term // when the node that sends the rest may start
	a.p.Signal(syscall.SIGTERM)
	select {
	case <-a.p.Exited():
	case <-time.After(2 * stopBudget): // a stop past its budget is a failure either way
		t.Fatalf("node-a still running %s after its SIGTERM", 2*stopBudget)
	}
	res.exit = time.Since(term)
	slow.Store(false)
	if res.exit > stopBudget {
		t.Errorf("node-a exited %.1fs after its SIGTERM, over its budget of %s", res.exit.Seconds(), stopBudget)
	}
	res.handed, res.changed, res.left = a.stopLine("handed_back"), a.stopLine("changed"), a.stopLine("left")
	if res.left != 0 || res.handed < 0 {
		t.Errorf("node-a's stop line: handed back %d, left %d; want every queued push handed back", res.handed, res.left)
	}
	// The store's word, not the node's: nothing IN_MEMORY under node-a.
	var ps storage.PushStore
	if backend == "embedded" {
		s, err := embedded.Open(embedded.Config{Dir: dataDir})
		if err != nil {
			t.Fatal(err)
		}
		ps = s
		if n := ownedBy(t, ps, a.name); n != 0 {
			t.Errorf("%d pushes IN_MEMORY under node-a's lease after its stop", n)
		}
		s.Close()
		resumeFrom = time.Now()
		a.start(t, bin) // the same node again sends them
		res.by = "node-a restarted"
	} else {
		s, err := scylla.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if n := ownedBy(t, s, a.name); n != 0 {
			t.Errorf("%d pushes IN_MEMORY under node-a's lease after its stop", n)
		}
		res.by = "node-b"
	}
	sender := a
	if backend == "scylla" {
		sender = b
	}
	waitFinal(t, sender.base, ids, 3*time.Minute)
	judgeOnce(t, fake, ids, res.accepted)
	log := fake.Log()
	times := make([]time.Time, len(log))
	var after []time.Time
	for i, r := range log {
		times[i] = r.At
		if r.PushKey == sender.key && r.At.After(resumeFrom) {
			after = append(after, r.At)
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	if res.maxSecond = fcmfake.MaxInWindow(times, time.Second); res.maxSecond > stopLimit {
		t.Errorf("the provider received %d calls in one second, above the account's %d", res.maxSecond, stopLimit)
	}
	if len(after) > 1 {
		res.resumed = after[0].Sub(term)
		res.rate = float64(len(after)-1) / after[len(after)-1].Sub(after[0]).Seconds()
	}
	return res
}

// startFake starts a fake Swrve answering every call in stopLatency,
// node-a's in slowLatency while slow holds.
func startFake(t *testing.T) (*swrvefake.Fake, *atomic.Bool) {
	t.Helper()
	fake, err := swrvefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	slow := new(atomic.Bool)
	slow.Store(true)
	fake.SetLatency(func() time.Duration { return stopLatency })
	fake.SetFaults(func(r swrvefake.Received) swrvefake.Fault {
		if r.PushKey == "k-a" && slow.Load() {
			return swrvefake.Fault{Delay: slowLatency - stopLatency}
		}
		return swrvefake.Fault{}
	})
	return fake, slow
}

// ownedBy counts the pushes IN_MEMORY under node's lease.
func ownedBy(t *testing.T, s storage.PushStore, node string) int {
	t.Helper()
	n, cursor := 0, ""
	for {
		ps, next, err := s.ListPushes(context.Background(), storage.PushInMemory, cursor, storage.MaxPushPage)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Owner == node {
				n++
			}
		}
		if next == "" {
			return n
		}
		cursor = next
	}
}

// waitFinal waits until every push of ids (Locations) is final.
func waitFinal(t *testing.T, base string, ids []string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for _, loc := range ids {
		for {
			v := getPush(t, base, loc)
			if v.State == "SENT" || v.State == "GIVEN_UP" || v.State == "FAILED" {
				if v.State != "SENT" {
					t.Errorf("%s ended %s; the provider answers every call 200", loc, v.State)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still %s %s after the stop", loc, v.State, limit)
			}
			time.Sleep(50 * time.Millisecond) // polling the node's answer
		}
	}
}

// judgeOnce checks that the provider accepted every user's push exactly
// once.
func judgeOnce(t *testing.T, fake *swrvefake.Fake, ids []string, accepted int) {
	t.Helper()
	got := map[string]int{}
	for _, r := range fake.Log() {
		if r.Status == http.StatusOK {
			got[r.User]++
		}
	}
	twice := 0
	for u, n := range got {
		if n > 1 {
			twice++
			if twice <= 5 {
				t.Errorf("%s was sent %d times", u, n)
			}
		}
	}
	if len(got) != accepted || twice > 0 {
		t.Errorf("the provider accepted %d users' pushes (%d of them more than once) of %d accepted", len(got), twice, accepted)
	}
}

// TestKillTakeover SIGKILLs a sender node holding thousands of queued
// pushes and counts, at the fake Swrve, how the other node on the same
// Cassandra keyspace takes them over once their leases expire: every push
// sent, only those in flight at the kill twice, at the account's pace.
// Before, a node read expired leases once per tenth of a lease, a portion
// at a time: about 7 pushes a second.
func TestKillTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	rounds, pushes := stopSettings(t)
	for round := range rounds {
		fake, _ := startFake(t)
		cfg := cqltest.Keyspace(t, "takeover")
		store := []string{"-storage", "scylla", "-cql-hosts", strings.Join(cfg.Hosts, ","),
			"-cql-keyspace", cfg.Keyspace, "-cql-consistency", "ONE"}
		a, b := newStopNodes(t, fake.URL(), store, pushes, "-sender-lease", takeoverLease.String(), "-swrve-timeout", takeoverTimeout.String())
		a.start(t, bin)
		b.start(t, bin)
		ids := postAll(t, a.base, pushes)
		queued := a.queueSize(t)
		killed := time.Now()
		a.p.Kill()
		waitFinal(t, b.base, ids, 3*time.Minute)
		// A push node-a called within its answer time before the kill
		// may have been answered after it: sent again, as documented.
		var first []time.Time
		seen := map[string]time.Time{}
		inFlight := 0
		for _, r := range fake.Log() {
			if at, ok := seen[r.User]; ok {
				if r.PushKey != b.key || at.Before(killed.Add(-slowLatency-recordWindow)) {
					t.Errorf("%s received again at %s (first at %s, killed at %s)", r.User, r.At.Format(time.StampMilli),
						at.Format(time.StampMilli), killed.Format(time.StampMilli))
				}
				inFlight++
				continue
			}
			seen[r.User] = r.At
			if r.PushKey == b.key && r.At.After(killed) {
				first = append(first, r.At)
			}
		}
		if len(seen) != len(ids) {
			t.Errorf("the provider received %d users' pushes of %d accepted", len(seen), len(ids))
		}
		var rate float64
		if len(first) > 1 {
			rate = float64(len(first)-1) / first[len(first)-1].Sub(first[0]).Seconds()
		}
		t.Logf("round %d: %d accepted, %d queued on node-a at its SIGKILL; node-b took %d over from %.1fs after the kill "+
			"(lease %s) at %.0f calls/s (pace %.0f); %d sent again (in flight at the kill)",
			round+1, len(ids), queued, len(first), first[0].Sub(killed).Seconds(), takeoverLease, rate, stopPace, inFlight)
	}
}

// scrapeOne reads one series of a node's /metrics.
func scrapeOne(t *testing.T, url, series string) float64 {
	t.Helper()
	m, err := promtext.Scrape(context.Background(), nil, url)
	if err != nil {
		t.Fatal(err)
	}
	return m[series]
}
