package outage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/google/uuid"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/storage/scylla"
	"github.com/autopush-go/autopush/tools/cql/localcluster"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

const (
	// outageFor is how long every CQL node stays down (issue 23, item 5).
	outageFor = 30 * time.Second
	// recoveryBudget: once every node answers CQL again, a stored push is
	// answered 201 and a hello succeeds within it.
	recoveryBudget = 10 * time.Second
	// pushEvery paces the application server: 20 pushes a second, the
	// whole time.
	pushEvery = 50 * time.Millisecond
	// helloEvery paces the user agents that connect during the run.
	helloEvery = 400 * time.Millisecond
	// beatEvery paces the health checks of every tier's /__heartbeat__.
	beatEvery = 250 * time.Millisecond
	// afterRecovery is how long pushes keep coming once the service has
	// recovered.
	afterRecovery = 5 * time.Second
)

// TestClusterStorageOutage runs two autoconnect and two autoendpoint
// processes on a fresh three-node cluster (keyspace replicated 3 times,
// LOCAL_QUORUM), user agents connected to both engines and others
// offline, pushes at 20/s to all of them through both endpoints, signed
// with VAPID, new hellos every 400 ms and health checks every 250 ms.
// Then every CQL node is stopped, left down 30 s, and started again.
//
//   - no tier process exits, and none logs a panic; both stop cleanly on
//     SIGTERM afterwards;
//   - every push is answered 201, or 503 with errno 201 and Retry-After
//     (no other status, no timeout or reset);
//   - every push answered 201 reaches its user agent exactly once: the
//     online ones at once, the offline ones when they come back, among
//     them pushes accepted just before the outage for an agent that stays
//     away, for one whose connection drops during the outage with them
//     unacked, and for one that acks stored messages during the outage
//     (not sent again);
//   - a hello during the outage is refused: the upgrade answered 503 with
//     Retry-After once the engine knows storage is down, or the hello
//     closed with 1013 (docs/operations.md, Storage outage);
//   - every /__heartbeat__ (the endpoints', the engines' node API and
//     public port) answers 503 during the outage and 200 after;
//   - within 10 s of every node answering CQL again, a push that must be
//     stored is answered 201, and hellos (a new user agent and a known
//     one) succeed. The times are logged for docs/capacity.md.
func TestClusterStorageOutage(t *testing.T) {
	localcluster.SkipUnlessGated(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	bins := t.TempDir()
	build := make(chan error, 1)
	go func() { build <- buildBinaries(bins) }() // beside the cluster's start
	cluster, err := localcluster.Start(ctx, localcluster.Options{Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cluster.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := <-build; err != nil {
		t.Fatal(err)
	}
	cfg := scylla.DefaultConfig()
	cfg.Hosts, cfg.Keyspace = cluster.Hosts, "outage"
	if err := scylla.ApplySchema(ctx, cfg, localcluster.Replication(3)); err != nil {
		t.Fatal(err)
	}

	sys := startSystem(t, bins, cluster.Hosts, cfg.Keyspace)
	signer, err := pushcrypto.NewVAPIDSigner("mailto:ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := signer.Token(sys.endpointURL, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	key := base64.RawURLEncoding.EncodeToString(signer.PublicKey())
	led := newLedger()

	// User agents: six online on each engine (reading and acking all the
	// time), six offline, one offline that gets a push just before the
	// outage, and one whose uaid the hello probe reconnects with.
	var online, offline []*agent
	for e := range sys.engines {
		for range 6 {
			a := subscribe(t, sys.engines[e], key)
			a.read(led)
			online = append(online, a)
		}
	}
	for i := range 7 {
		a := subscribe(t, sys.engines[i%2], key)
		a.c.Leave()
		offline = append(offline, a)
	}
	parked, offline := offline[6], offline[:6]
	known := subscribe(t, sys.engines[0], key)
	known.c.Leave()
	// holder takes its notifications and never acks them: it loses its
	// connection during the outage. acker is sent stored messages before
	// the outage and acks them during it.
	holder := subscribe(t, sys.engines[1], key)
	acker := subscribe(t, sys.engines[0], key)
	acker.c.Leave()
	// Left: each offline agent's node_id is cleared, so its pushes are
	// stored by the endpoint (a push routed to the closing connection would
	// be stored by the node under another id).
	store, err := scylla.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range append([]*agent{parked, known, acker}, offline...) {
		et.Eventually(t, 10*time.Second, "the offline agents' node_id cleared", func() bool {
			u, err := store.GetUser(ctx, uuid.MustParse(a.uaid))
			if err != nil {
				t.Fatalf("router record of %s: %v", a.name, err)
			}
			return u.NodeID == ""
		})
	}
	store.Close()

	targets := append(append([]*agent{}, online...), offline...)
	p := &pusher{sys: sys, auth: signer.Authorization(tok), led: led, targets: targets,
		client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	hp := &helloProber{sys: sys, known: known.uaid}
	hb := &beats{}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	for _, run := range []func(<-chan struct{}){p.run, hp.run, func(s <-chan struct{}) { hb.run(sys, s) }} {
		bg.Add(1)
		go func() { defer bg.Done(); run(stop) }()
	}
	stopped := false
	stopAll := func() {
		if !stopped {
			stopped = true
			close(stop)
			bg.Wait()
		}
	}
	defer stopAll()

	// Steady state: stored and direct pushes accepted, hellos served.
	et.Eventually(t, 60*time.Second, "pushes and hellos served before the outage", func() bool {
		return p.count(func(r pushResult) bool { return r.status == 201 && !r.online }) >= 10 &&
			p.count(func(r pushResult) bool { return r.status == 201 && r.online }) >= 10 &&
			hp.count(func(r helloResult) bool { return r.outcome == helloOK }) >= 4
	})
	// Pushes accepted just before the outage: two stored for acker, who
	// connects and reads them; three written to holder's connection,
	// unread; one stored for parked, who stays away.
	var extra []pushResult
	accept := func(a *agent, n int) {
		for i := range n {
			r := p.push(a, i)
			if r.status != 201 {
				t.Fatalf("a push to %s just before the outage: %+v", a.name, r)
			}
			extra = append(extra, r)
		}
	}
	accept(acker, 2)
	acker.c = et.Dial(t, acker.engine.Field("listen"))
	if got := acker.c.Hello(acker.uaid); got != acker.uaid {
		t.Fatalf("acker's hello: uaid %s", got)
	}
	var ackerGot []string
	for range 2 {
		m := acker.c.Read()
		ackerGot = append(ackerGot, m["version"].(string))
		led.deliver(m["version"].(string))
	}
	accept(holder, 3)
	accept(parked, 1)

	// Every CQL node down. Stopped (SIGTERM), not killed: Cassandra's
	// periodic commit log (tools/cql, and Cassandra's default) acks a
	// write before it is in the file, and SIGKILLed it loses the last
	// milliseconds of acknowledged writes, pushes answered 201 among them
	// (docs/operations.md, Storage outage).
	var wg sync.WaitGroup
	stopping := time.Now()
	for i := range cluster.Nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cluster.Stop(ctx, i); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	down := time.Now()
	t.Logf("all %d CQL nodes stopped (SIGTERM) in %v", cluster.Nodes(), down.Sub(stopping).Round(time.Millisecond))
	et.Eventually(t, outageFor, "every /__heartbeat__ to answer 503", func() bool {
		return hb.allSince(down, func(code int) bool { return code == 503 })
	})
	refusing := time.Now()
	t.Logf("every /__heartbeat__ answered 503 within %v", refusing.Sub(down).Round(time.Millisecond))
	// During the outage: holder's connection drops with its three
	// notifications unacked; acker acks its two and leaves.
	holder.c.Close()
	for _, v := range ackerGot {
		acker.c.Ack(acker.chid, v)
	}
	acker.c.Leave()
	time.Sleep(time.Until(down.Add(outageFor))) // the outage's length, not a wait for something

	// Every node back.
	restarting := time.Now()
	up := make([]time.Time, cluster.Nodes())
	for i := range cluster.Nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cluster.Restart(ctx, i); err != nil {
				t.Error(err)
			}
			up[i] = time.Now()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	back := slices.MaxFunc(up, time.Time.Compare)
	quorum := slices.SortedFunc(slices.Values(up), time.Time.Compare)[1]
	t.Logf("all %d CQL nodes answer CQL again after %v down (two of them %v before the last)",
		cluster.Nodes(), back.Sub(down).Round(time.Millisecond), back.Sub(quorum).Round(time.Millisecond))

	// Recovery: a stored push accepted, hellos served, heartbeats 200.
	var storedAt, freshAt, knownAt time.Time
	et.Eventually(t, 2*time.Minute, "the service to recover", func() bool {
		storedAt = p.first(down, func(r pushResult) bool { return r.status == 201 && !r.online })
		freshAt = hp.first(down, func(r helloResult) bool { return r.outcome == helloOK && !r.known })
		knownAt = hp.first(down, func(r helloResult) bool { return r.outcome == helloOK && r.known })
		return !storedAt.IsZero() && !freshAt.IsZero() && !knownAt.IsZero() &&
			hb.allSince(back, func(code int) bool { return code == 200 })
	})
	beatsAt := hb.lastFirst(back, 200)
	since := func(at time.Time) time.Duration { return max(at.Sub(back), 0).Round(time.Millisecond) }
	sinceQuorum := func(at time.Time) time.Duration { return at.Sub(quorum).Round(time.Millisecond) }
	t.Logf("recovery after every node answers CQL (after two of them): first stored push 201 in %v (%v), "+
		"first new hello in %v (%v), first reconnecting hello in %v (%v), every /__heartbeat__ 200 in %v (%v)",
		since(storedAt), sinceQuorum(storedAt), since(freshAt), sinceQuorum(freshAt),
		since(knownAt), sinceQuorum(knownAt), since(beatsAt), sinceQuorum(beatsAt))
	for what, at := range map[string]time.Time{"a stored push answered 201": storedAt,
		"a new user agent's hello": freshAt, "a known user agent's hello": knownAt} {
		if at.Sub(back) > recoveryBudget {
			t.Errorf("%s took %v after the cluster's return, over %v", what, since(at), recoveryBudget)
		}
	}

	time.Sleep(afterRecovery) // pushes keep flowing for a while after
	stopAll()

	// Every answer.
	results := p.all()
	tally := map[string]int{}
	for _, r := range results {
		switch {
		case r.err != "":
			t.Errorf("push %d (%s, %s): no answer: %s", r.n, r.target, r.via, r.err)
		case r.status == 201:
			tally["201"]++
		case r.status == 503 && r.errno == 201 && r.retryAfter != "":
			tally["503"]++
		default:
			t.Errorf("push %d (%s, %s) sent %s: %d errno %d Retry-After %q: %s", r.n, r.target, r.via,
				r.sent.Sub(down).Round(time.Millisecond), r.status, r.errno, r.retryAfter, r.body)
		}
	}
	t.Logf("%d pushes: %d answered 201, %d 503 errno 201 with Retry-After", len(results), tally["201"], tally["503"])
	if tally["503"] == 0 {
		t.Error("no push was refused during the outage")
	}
	// Nothing accepted while nothing could be stored: from when every
	// tier reported the outage until the nodes were started again. (A push
	// delivered straight to a connected client would be one the engine
	// could not store should the client leave before acking it.)
	for _, r := range results {
		if r.status == 201 && r.sent.After(refusing) && r.answer.Before(restarting) {
			t.Errorf("push %d (%s, %s) answered 201 during the outage (sent %v after the stop)", r.n, r.target, r.via,
				r.sent.Sub(down).Round(time.Millisecond))
		}
	}

	// Hellos during the outage: refused cleanly.
	outcomes := map[string]int{}
	for _, r := range hp.all() {
		outcomes[r.outcome]++
		if r.outcome == helloBad {
			t.Errorf("hello probe at %v (engine %d, known %v): %s", r.at.Sub(down).Round(time.Millisecond), r.engine, r.known, r.detail)
		}
	}
	t.Logf("hello probes: %v", outcomes)
	if outcomes[helloRefused] == 0 {
		t.Error("no upgrade was refused with 503 during the outage")
	}
	for _, bad := range hb.bad() {
		t.Error(bad)
	}

	// Deliveries: the offline agents come back; every online one is
	// drained.
	for _, a := range append(append([]*agent{}, offline...), parked, holder, acker) {
		a.drainOffline(t, led)
	}
	for _, a := range online {
		a.finish(t, led)
	}
	for _, e := range led.errs() {
		t.Error(e)
	}
	got := led.snapshot()
	accepted := map[string]bool{}
	lost := 0
	for _, r := range append(results, extra...) {
		if r.status != 201 {
			continue
		}
		accepted[r.msgID] = true
		if got[r.msgID] == 0 {
			lost++
			t.Errorf("push %d (%s, %s, sent %v after the stop) answered 201, never delivered",
				r.n, r.target, r.via, r.sent.Sub(down).Round(time.Millisecond))
		}
	}
	twice, unaccepted := 0, 0
	for v, n := range got {
		if n > 1 {
			twice++
			t.Errorf("message %s delivered %d times", v, n)
		}
		if !accepted[v] {
			// Refused with 503, yet stored: a write that failed on the
			// client's side after the cluster had it. A retry of the push
			// would be a second message; nothing accepted is lost.
			unaccepted++
		}
	}
	t.Logf("deliveries: %d of %d accepted pushes lost, %d messages delivered more than once, "+
		"%d delivered that were refused with 503", lost, len(accepted), twice, unaccepted)

	// The processes lived through it, and stop cleanly.
	for _, pr := range sys.procs() {
		select {
		case <-pr.p.Exited():
			t.Errorf("%s (pid %d) exited during the run: %v", pr.name, pr.p.PID(), pr.p.Wait())
			continue
		default:
		}
		if err := pr.p.Stop(time.Minute); err != nil {
			t.Errorf("%s: %v", pr.name, err)
		} else if code := pr.p.ExitCode(); code != 0 {
			t.Errorf("%s exited %d on SIGTERM", pr.name, code)
		}
		out := string(pr.p.Output())
		for _, bad := range []string{"panic:", "fatal error:", "DATA RACE"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s logged %q:\n%s", pr.name, bad, pr.p.Tail())
			}
		}
	}
}

// buildBinaries builds autoconnect and autoendpoint into dir.
func buildBinaries(dir string) error {
	for _, pkg := range []string{"./engine/cmd/autoconnect", "./apitier/cmd/autoendpoint"} {
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), pkg)
		cmd.Dir = e2etest.ModuleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return nil
}

// system is the service under test: its processes and where they listen.
type system struct {
	endpoints   []*proc.Proc // autoendpoint
	endpointAt  []string     // their base URLs
	endpointURL string       // the URL push endpoints are minted under (the first's)
	engines     []*proc.Proc // autoconnect
}

type namedProc struct {
	name string
	p    *proc.Proc
}

func (s *system) procs() []namedProc {
	var out []namedProc
	for i, p := range s.endpoints {
		out = append(out, namedProc{fmt.Sprintf("autoendpoint %d", i+1), p})
	}
	for i, p := range s.engines {
		out = append(out, namedProc{fmt.Sprintf("autoconnect %d", i+1), p})
	}
	return out
}

// startSystem starts two autoendpoint and two autoconnect processes on
// the keyspace, with their default storage settings (LOCAL_QUORUM). Both
// endpoints take the pushes of any endpoint URL: they share the first's
// as endpoint-url (the VAPID audience), as two nodes behind one load
// balancer would share its name.
func startSystem(t *testing.T, bins string, hosts []string, keyspace string) *system {
	t.Helper()
	s := &system{}
	addrs := []string{et.FreeAddr(t), et.FreeAddr(t)}
	s.endpointURL = "http://" + addrs[0]
	shared := func(prefix string) []string {
		return []string{prefix + "__STORAGE=scylla", prefix + "__CQL_HOSTS=" + strings.Join(hosts, ","),
			prefix + "__CQL_KEYSPACE=" + keyspace, prefix + "__CRYPTO_KEY=" + et.TestKey,
			prefix + "__NODE_SECRET=" + et.TestSecret, prefix + "__ENDPOINT_URL=" + s.endpointURL}
	}
	for _, addr := range addrs {
		cmd := exec.Command(filepath.Join(bins, "autoendpoint"))
		cmd.Env = append(append(os.Environ(), shared("AUTOEND")...),
			"AUTOEND__LISTEN="+addr, "AUTOEND__METRICS_LISTEN=127.0.0.1:0")
		s.endpoints = append(s.endpoints, e2etest.Start(t, cmd, "autoendpoint started"))
		s.endpointAt = append(s.endpointAt, "http://"+addr)
	}
	for range 2 {
		cmd := exec.Command(filepath.Join(bins, "autoconnect"))
		cmd.Env = append(append(os.Environ(), shared("AUTOCONNECT")...),
			"AUTOCONNECT__LISTEN=127.0.0.1:0", "AUTOCONNECT__ROUTER_LISTEN=127.0.0.1:0",
			"AUTOCONNECT__DRAIN_WINDOW=1s")
		s.engines = append(s.engines, e2etest.Start(t, cmd, "autoconnect started"))
	}
	return s
}

// heartbeats lists every /__heartbeat__ of the system: each endpoint's,
// each engine's on its node API and on its public port.
func (s *system) heartbeats() []string {
	var urls []string
	for _, base := range s.endpointAt {
		urls = append(urls, base+"/__heartbeat__")
	}
	for _, e := range s.engines {
		urls = append(urls, e.Field("node_url")+"/__heartbeat__", "http://"+e.Field("listen")+"/__heartbeat__")
	}
	return urls
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) { l.t.Logf("%s", p); return len(p), nil }

// ---- user agents

// agent is a user agent with one subscription (a v2 endpoint bound to the
// application server's VAPID key).
type agent struct {
	name                 string
	engine               *proc.Proc
	uaid, chid, endpoint string
	c                    *et.Client
	replies              chan map[string]any // what read() gets besides notifications
	done                 chan struct{}       // read() has returned
	leaving              atomic.Bool
}

var agents atomic.Int32

func subscribe(t *testing.T, engine *proc.Proc, key string) *agent {
	t.Helper()
	a := &agent{name: fmt.Sprintf("agent %d", agents.Add(1)), engine: engine, chid: uuid.NewString(),
		c: et.Dial(t, engine.Field("listen"))}
	a.uaid = a.c.Hello("")
	r := a.c.Register(a.chid, key)
	ep, _ := r["pushEndpoint"].(string)
	if r["status"] != 200.0 || ep == "" {
		t.Fatalf("register: %v", r)
	}
	a.endpoint = ep
	return a
}

// read reads the agent's connection on a goroutine of its own until it
// ends: notifications are recorded and acked at once, anything else goes
// to replies. It uses only the client's calls that return their errors.
func (a *agent) read(led *ledger) {
	a.replies, a.done = make(chan map[string]any, 16), make(chan struct{})
	go func() {
		defer close(a.done)
		for {
			text, code, err := a.c.Next(time.Hour)
			if err != nil {
				if !a.leaving.Load() {
					led.errorf("%s: connection ended during the run: %v (close code %d)", a.name, err, code)
				}
				return
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(text), &m); err != nil {
				led.errorf("%s: not JSON: %q", a.name, text)
				continue
			}
			if m["messageType"] != "notification" {
				a.replies <- m
				continue
			}
			v, _ := m["version"].(string)
			led.deliver(v)
			if err := a.send(map[string]any{"messageType": "ack",
				"updates": []any{map[string]any{"channelID": m["channelID"], "version": v, "code": 100}}}); err != nil {
				led.errorf("%s: ack: %v", a.name, err)
			}
		}
	}()
}

func (a *agent) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return a.c.TrySendFrame(ws.OpText, b)
}

// finish ends an online agent: a round trip, the engine settled, a second
// round trip (so anything more the engine had for it arrives and is
// counted), then a clean close.
func (a *agent) finish(t *testing.T, led *ledger) {
	t.Helper()
	for i := range 2 {
		chid := uuid.NewString()
		if err := a.send(map[string]any{"messageType": "register", "channelID": chid}); err != nil {
			t.Fatalf("%s: register: %v", a.name, err)
		}
		timeout := time.After(et.Patience)
	wait:
		for {
			select {
			case m := <-a.replies:
				if m["messageType"] == "register" && m["channelID"] == chid {
					break wait
				}
				t.Errorf("%s: unexpected %v", a.name, m)
			case <-a.done:
				t.Fatalf("%s: connection ended before the final round trip", a.name)
			case <-timeout:
				t.Fatalf("%s: no register reply", a.name)
			}
		}
		if i == 0 {
			et.Settle(t, a.engine.Field("node_url"))
		}
	}
	a.leaving.Store(true)
	a.c.TrySendFrame(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
	select {
	case <-a.done:
	case <-time.After(et.Patience):
		t.Errorf("%s: the engine did not answer the close", a.name)
	}
}

// drainOffline connects an offline agent again and takes (and acks)
// everything stored for it.
func (a *agent) drainOffline(t *testing.T, led *ledger) {
	t.Helper()
	c := et.Dial(t, a.engine.Field("listen"))
	if got := c.Hello(a.uaid); got != a.uaid {
		t.Fatalf("%s: hello gave uaid %s, want %s", a.name, got, a.uaid)
	}
	et.Drain(t, a.engine.Field("node_url"), c, func(text string) {
		var m map[string]any
		if err := json.Unmarshal([]byte(text), &m); err != nil || m["messageType"] != "notification" {
			t.Fatalf("%s: %q", a.name, text)
		}
		led.deliver(m["version"].(string))
		c.Ack(a.chid, m["version"].(string))
	})
	c.Leave()
}

// ledger counts deliveries by message id (the notification's version, the
// last part of the push's Location) and collects the readers' errors.
type ledger struct {
	mu     sync.Mutex
	got    map[string]int
	errors []string
}

func newLedger() *ledger { return &ledger{got: map[string]int{}} }

func (l *ledger) deliver(version string) {
	l.mu.Lock()
	l.got[version]++
	l.mu.Unlock()
}

func (l *ledger) errorf(format string, args ...any) {
	l.mu.Lock()
	l.errors = append(l.errors, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *ledger) errs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errors)
}

func (l *ledger) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.got)
}

// ---- the application server

// pusher posts one push every pushEvery, round robin over its targets,
// alternately through each endpoint, each on its own goroutine so that a
// slow answer never slows the pace.
type pusher struct {
	sys     *system
	auth    string
	led     *ledger
	targets []*agent
	client  *http.Client
	results[pushResult]

	mu sync.Mutex
	n  int
}

type pushResult struct {
	n            int
	target, via  string
	online       bool
	sent, answer time.Time
	status       int
	errno        int
	retryAfter   string
	body, err    string
	msgID        string
}

func (p *pusher) run(stop <-chan struct{}) {
	tick := time.NewTicker(pushEvery)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		a := p.targets[i%len(p.targets)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.add(p.push(a, i))
		}()
	}
}

// push posts one empty push (TTL 600) to a through endpoint i%2.
func (p *pusher) push(a *agent, i int) pushResult {
	p.mu.Lock()
	p.n++
	r := pushResult{n: p.n, target: a.name, online: a.replies != nil}
	p.mu.Unlock()
	base := p.sys.endpointAt[i%len(p.sys.endpointAt)]
	r.via = base
	url := base + strings.TrimPrefix(a.endpoint, p.sys.endpointURL)
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		r.err = err.Error()
		return r
	}
	req.Header.Set("TTL", "600")
	req.Header.Set("Authorization", p.auth)
	r.sent = time.Now()
	resp, err := p.client.Do(req)
	r.answer = time.Now()
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		r.err = "reading the answer: " + err.Error()
	}
	r.status, r.retryAfter, r.body = resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
	if r.status == 201 {
		loc := resp.Header.Get("Location")
		r.msgID = loc[strings.LastIndex(loc, "/")+1:]
	} else {
		var e struct{ Errno int }
		json.Unmarshal(body, &e)
		r.errno = e.Errno
	}
	return r
}

// first is the earliest answer to a push sent after since that f
// accepts; zero when none.
func (p *pusher) first(since time.Time, f func(pushResult) bool) time.Time {
	var at time.Time
	for _, r := range p.all() {
		if r.sent.After(since) && f(r) && (at.IsZero() || r.answer.Before(at)) {
			at = r.answer
		}
	}
	return at
}

// results is what a prober recorded, safe for concurrent use.
type results[T any] struct {
	mu   sync.Mutex
	list []T
}

func (r *results[T]) add(v T) {
	r.mu.Lock()
	r.list = append(r.list, v)
	r.mu.Unlock()
}

func (r *results[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}

func (r *results[T]) count(f func(T) bool) int {
	n := 0
	for _, v := range r.all() {
		if f(v) {
			n++
		}
	}
	return n
}
