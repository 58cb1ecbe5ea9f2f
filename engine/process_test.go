package engine_test

// Tests that run the real autoconnect binary as separate processes: what
// only a process boundary shows (eviction between nodes over the node API,
// SIGTERM handling, the exit status, the store shared by two nodes).
//
// Two processes cannot share the embedded Pebble store, so the tests with
// two nodes use the scylla backend on CQL_HOSTS (tools/cql/start.sh, which
// `make test` runs), each in a fresh keyspace. Without CQL_HOSTS they fail
// in CI and skip elsewhere, saying why. Single-node tests use the embedded
// store and always run.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/nodeapi"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/scylla"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
	"github.com/gobwas/ws"
	"github.com/google/uuid"
)

// Timeouts generous enough for a loaded 2-core machine that also runs the
// Cassandra node.
const (
	procStartTimeout = 90 * time.Second // process start to its "autoconnect started" line
	procExitTimeout  = 60 * time.Second // SIGTERM to exit
	procDrainWindow  = time.Second
	procSlack        = 20 * time.Second
)

// TestMain removes the autoconnect binary the process tests build (once per
// test binary, on first use).
func TestMain(m *testing.M) {
	code := m.Run()
	if procBinDir != "" {
		os.RemoveAll(procBinDir)
	}
	os.Exit(code)
}

var (
	procBuildOnce sync.Once
	procBinDir    string
	procBin       string
	procBuildErr  error
)

// autoconnectBinary builds engine/cmd/autoconnect once per test binary.
func autoconnectBinary(t *testing.T) string {
	t.Helper()
	procBuildOnce.Do(func() {
		procBinDir, procBuildErr = os.MkdirTemp("", "autoconnect-proctest-")
		if procBuildErr != nil {
			return
		}
		procBin = filepath.Join(procBinDir, "autoconnect")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", procBin, "github.com/autopush-go/autopush/engine/cmd/autoconnect")
		if out, err := cmd.CombinedOutput(); err != nil {
			procBuildErr = fmt.Errorf("go build autoconnect: %v\n%s", err, out)
		}
	})
	if procBuildErr != nil {
		t.Fatal(procBuildErr)
	}
	return procBin
}

// procKeyspace creates a fresh keyspace with the schema, dropped when the
// test ends (after the processes, whose cleanups run first), and returns a
// store on it for the test's own checks.
func procKeyspace(t *testing.T) (scylla.Config, storage.Store) {
	t.Helper()
	cfg := cqltest.Keyspace(t, "proc")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := scylla.New(ctx, cfg)
	if err != nil {
		t.Fatalf("scylla.New: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	return cfg, store
}

// procNode is one running autoconnect process.
type procNode struct {
	*proc.Proc
	name string

	// From the process's "autoconnect started" line.
	Listen  string // websocket address
	NodeAPI string // node API address
	NodeURL string // node API URL stored in router records
}

// procEnv is the environment of a node: the parent's minus any
// AUTOCONNECT__ setting, plus the node's settings.
func procEnv(settings map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AUTOCONNECT__") {
			env = append(env, kv)
		}
	}
	for k, v := range settings {
		env = append(env, "AUTOCONNECT__"+k+"="+v)
	}
	return env
}

// procSettings are the settings every test node gets: loopback listeners
// on free ports, the test key, the given drain window.
func procSettings(t *testing.T) map[string]string {
	return map[string]string{
		"LISTEN":          "127.0.0.1:0",
		"ROUTER_LISTEN":   "127.0.0.1:0",
		"CRYPTO_KEY":      et.TestKey,
		"NODE_SECRET":     et.TestSecret,
		"ENDPOINT_URL":    "http://127.0.0.1:8082",
		"DRAIN_WINDOW":    procDrainWindow.String(),
		"STORAGE_TIMEOUT": "10s",
		"VERSION_FILE":    "",
		"LOG_LEVEL":       "debug",
		"DATA_DIR":        t.TempDir(),
		"STORAGE":         "embedded",
	}
}

// scyllaSettings points a node at the keyspace.
func scyllaSettings(t *testing.T, cfg scylla.Config) map[string]string {
	s := procSettings(t)
	s["STORAGE"] = "scylla"
	s["CQL_HOSTS"] = strings.Join(cfg.Hosts, ",")
	s["CQL_KEYSPACE"] = cfg.Keyspace
	s["CQL_CONSISTENCY"] = "ONE"
	return s
}

// startProc starts autoconnect with settings and waits for its start line.
// The process is killed (by PID) in Cleanup if it still runs, and its
// output is logged if the test failed.
func startProc(t *testing.T, name string, settings map[string]string) *procNode {
	t.Helper()
	return startProcCmd(t, name, exec.Command(autoconnectBinary(t)), settings)
}

// startProcCmd is startProc running cmd, which execs autoconnect.
func startProcCmd(t *testing.T, name string, cmd *exec.Cmd, settings map[string]string) *procNode {
	t.Helper()
	cmd.Env = procEnv(settings)
	p, err := proc.Start(context.Background(), cmd, proc.Config{StartMsg: "autoconnect started", StartTimeout: procStartTimeout})
	if err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	n := &procNode{Proc: p, name: name, Listen: p.Field("listen"), NodeAPI: p.Field("node_api"), NodeURL: p.Field("node_url")}
	t.Cleanup(func() {
		n.Kill()
		if t.Failed() {
			t.Logf("---- node %s (pid %d, exit %d) ----\n%s", name, n.PID(), n.ExitCode(), n.Output())
		}
	})
	if n.Listen == "" || n.NodeAPI == "" || n.NodeURL == "" {
		t.Fatalf("node %s: start line without listen/node_api/node_url", name)
	}
	t.Logf("node %s: pid %d, websocket %s, node API %s", name, n.PID(), n.Listen, n.NodeAPI)
	return n
}

// signal sends sig to the node's PID.
func (n *procNode) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := n.Signal(sig); err != nil {
		t.Fatalf("signal %v to node %s: %v", sig, n.name, err)
	}
}

// waitExit waits for the process to exit and returns its exit code.
func (n *procNode) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-n.Exited():
	case <-time.After(timeout):
		t.Fatalf("node %s still running %v after SIGTERM", n.name, timeout)
	}
	return n.ExitCode() // -1 when killed by a signal
}

// procHTTP never keeps connections open: an idle keep-alive connection
// would hold a goroutine in the node and delay its exit.
var procHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// get returns the status and body of a GET on the node API.
func (n *procNode) get(path string) (int, string, error) {
	resp, err := procHTTP.Get("http://" + n.NodeAPI + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// metric returns the value of one sample of the node's /metrics.
func (n *procNode) metric(t *testing.T, name string) float64 {
	t.Helper()
	v, ok := et.Metric(t, n.NodeURL, name)
	if !ok {
		t.Fatalf("node %s: no metric %s in /metrics", n.name, name)
	}
	return v
}

// health returns the node's /health document.
func (n *procNode) health(t *testing.T) map[string]any {
	t.Helper()
	code, body, err := n.get("/health")
	if err != nil || code != http.StatusOK {
		t.Fatalf("node %s /health: %d %v", n.name, code, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("node %s /health: %v: %q", n.name, err, body)
	}
	return m
}

// procPush delivers a notification through a node's internal API, as the
// endpoint tier does, and returns the status.
func procPush(t *testing.T, n *procNode, uaid string, notif *protocol.Notification) int {
	t.Helper()
	body := nodeapi.AppendNotification(nil, notif)
	return et.NodeCall(t, http.MethodPut, n.NodeURL+"/push/"+uaid, string(body), "")
}

// readNotification reads one message and checks it is a notification.
func readNotification(t *testing.T, c *et.Client, timeout time.Duration) (chid, version string) {
	t.Helper()
	text, code, err := c.Next(timeout)
	if err != nil {
		t.Fatalf("waiting for a notification: %v (close code %d)", err, code)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil || m["messageType"] != "notification" {
		t.Fatalf("want a notification, got %q", text)
	}
	chid, _ = m["channelID"].(string)
	version, _ = m["version"].(string)
	return chid, version
}

// TestEvictionAcrossProcesses: a user agent that reconnects to another
// node is dropped from the first (close 4000) through the node API, and
// the router record names the new node.
func TestEvictionAcrossProcesses(t *testing.T) {
	cfg, store := procKeyspace(t)
	a := startProc(t, "A", scyllaSettings(t, cfg))
	b := startProc(t, "B", scyllaSettings(t, cfg))

	c1 := et.Dial(t, a.Listen)
	uaid := c1.Hello("")
	u := parseUAID(t, uaid)
	if r := c1.Register(uuid.NewString(), ""); r["status"] != 200.0 {
		t.Fatalf("register on A: %v", r)
	}
	rec, err := store.GetUser(context.Background(), u)
	if err != nil || rec.NodeID != a.NodeURL {
		t.Fatalf("router record after hello on A: %+v %v (want node %s)", rec, err, a.NodeURL)
	}

	c2 := et.Dial(t, b.Listen)
	start := time.Now()
	if got := c2.Hello(uaid); got != uaid {
		t.Fatalf("B replaced the uaid: %s -> %s", uaid, got)
	}
	// The hello on B evicts the older connection on A before it answers,
	// so the close is on its way already; "a few seconds" on a busy box.
	text, code, err := c1.Next(et.Patience)
	if !errors.Is(err, et.ErrClosed) || code != 4000 {
		t.Fatalf("client on A: got %q code %d err %v, want close 4000 (connected elsewhere)", text, code, err)
	}
	t.Logf("client on A closed with 4000 %v after the hello on B", time.Since(start).Round(time.Millisecond))

	// The client on B works.
	c2.SendRaw(`{}`)
	if r := c2.Read(); len(r) != 0 {
		t.Fatalf("ping on B: %v, want {}", r)
	}

	// A dropped the session, and its ClearNode (conditional on A's older
	// connected_at) must leave B's record alone.
	et.Eventually(t, 10*time.Second, "A to drop the evicted client", func() bool {
		return a.health(t)["clients"] == 0.0
	})
	et.Settle(t, a.NodeURL) // A's leave job (ClearNode) runs on a worker
	rec, err = store.GetUser(context.Background(), u)
	if err != nil || rec.NodeID != b.NodeURL {
		t.Fatalf("router record after eviction: %+v %v (want node %s)", rec, err, b.NodeURL)
	}
	if got := a.metric(t, "autoconnect_evictions_total"); got != 1 {
		t.Errorf("A evictions_total %v, want 1", got)
	}
	if got := b.metric(t, "autoconnect_evictions_total"); got != 1 {
		t.Errorf("B evictions_total %v, want 1 (the remote eviction answered 200)", got)
	}
}

// TestDrainOnSIGTERMLosesNothing: direct notifications written to clients
// and not acked when the node gets SIGTERM are stored as the clients are
// closed (1001), and delivered once, exactly, by the next node. Half the
// clients ack one of them after the node's close frame and then answer
// it: that one is not delivered again; the others just disconnect.
func TestDrainOnSIGTERMLosesNothing(t *testing.T) {
	const clients, perClient = 6, 4 // perClient <= max-unacked (10)
	cfg, store := procKeyspace(t)
	a := startProc(t, "A", scyllaSettings(t, cfg))

	type agent struct {
		c        *et.Client
		uaid     string
		chid     string
		versions []string
	}
	agents := make([]*agent, clients)
	for i := range agents {
		ag := &agent{c: et.Dial(t, a.Listen), chid: uuid.NewString()}
		ag.uaid = ag.c.Hello("")
		if r := ag.c.Register(ag.chid, ""); r["status"] != 200.0 {
			t.Fatalf("register: %v", r)
		}
		agents[i] = ag
	}
	for i, ag := range agents {
		for j := range perClient {
			v := fmt.Sprintf("v-%d-%d-%s", i, j, uuid.NewString())
			if code := procPush(t, a, ag.uaid, et.Notification(ag.chid, v, "")); code != http.StatusOK {
				t.Fatalf("push %d to client %d: status %d, want 200", j, i, code)
			}
			ag.versions = append(ag.versions, v)
		}
		// Delivered to the socket, and deliberately not acked.
		for range perClient {
			chid, v := readNotification(t, ag.c, et.Patience)
			if chid != ag.chid || !slices.Contains(ag.versions, v) {
				t.Fatalf("client %d got %s/%s, want one of %v on %s", i, chid, v, ag.versions, ag.chid)
			}
		}
	}
	if got := a.metric(t, "autoconnect_notifications_in_flight"); got != clients*perClient {
		t.Fatalf("in flight on A: %v, want %d", got, clients*perClient)
	}

	// SIGTERM, and watch the load balancer heartbeat while the node drains.
	lb := make(chan []int, 1)
	stopLB := make(chan struct{})
	sigAt := time.Now()
	a.signal(t, syscall.SIGTERM)
	go func() {
		var seen []int
		defer func() { lb <- seen }()
		for {
			select {
			case <-stopLB:
				return
			case <-a.Exited():
				return
			default:
			}
			if code, _, err := a.get("/__lbheartbeat__"); err == nil {
				if len(seen) == 0 || seen[len(seen)-1] != code {
					seen = append(seen, code)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	deadline := sigAt.Add(procDrainWindow + procSlack)
	var lastClose time.Duration
	for i, ag := range agents {
		text, code, err := ag.c.Next(time.Until(deadline))
		if !errors.Is(err, et.ErrClosed) || code != ws.StatusGoingAway {
			t.Fatalf("client %d: got %q code %d err %v, want close 1001 within %v of SIGTERM",
				i, text, code, err, procDrainWindow+procSlack)
		}
		lastClose = max(lastClose, time.Since(sigAt))
		if i%2 == 1 {
			ag.c.Close() // gone without answering
			continue
		}
		// As Firefox does when the close crosses its ack: the ack, then
		// the answer to the close. The node reads the ack before it
		// closes, so that notification is not stored for the next node.
		ag.c.Ack(ag.chid, ag.versions[0])
		ag.versions = ag.versions[1:]
		ag.c.AnswerClose()
	}
	t.Logf("all %d clients closed with 1001 within %v of SIGTERM (drain window %v)", clients, lastClose.Round(time.Millisecond), procDrainWindow)

	exit := a.waitExit(t, procExitTimeout)
	close(stopLB)
	seen := <-lb
	t.Logf("node A exited %d %v after SIGTERM; /__lbheartbeat__ answered %v while draining", exit, time.Since(sigAt).Round(time.Millisecond), seen)
	if exit != 0 {
		t.Fatalf("node A exit status %d, want 0", exit)
	}
	if !slices.Contains(seen, http.StatusServiceUnavailable) {
		t.Errorf("/__lbheartbeat__ never answered 503 during the drain: %v", seen)
	}
	if i := slices.Index(seen, http.StatusServiceUnavailable); i >= 0 && slices.Contains(seen[i:], http.StatusOK) {
		t.Errorf("/__lbheartbeat__ went back to 200 after 503: %v", seen)
	}
	if !strings.Contains(string(a.Output()), `"msg":"draining"`) {
		t.Errorf("node A logged no draining line")
	}

	// A new node on the same store delivers each client exactly its
	// unacked notifications.
	b := startProc(t, "B", scyllaSettings(t, cfg))
	for i, ag := range agents {
		c := et.Dial(t, b.Listen)
		if got := c.Hello(ag.uaid); got != ag.uaid {
			t.Fatalf("client %d: uaid replaced %s -> %s", i, ag.uaid, got)
		}
		var got []string
		for range ag.versions {
			chid, v := readNotification(t, c, et.Patience)
			if chid != ag.chid {
				t.Fatalf("client %d: notification on channel %s, want %s", i, chid, ag.chid)
			}
			got = append(got, v)
		}
		et.NothingMore(t, b.NodeURL, c) // nothing beyond the N
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(ag.versions))) {
			t.Fatalf("client %d: redelivered %v, want %v", i, got, ag.versions)
		}
		for _, v := range got {
			c.Ack(ag.chid, v)
		}
		// The acks delete the stored messages: wait until storage agrees
		// before reconnecting, so the check below is about redelivery and
		// not about a delete still in flight.
		u := parseUAID(t, ag.uaid)
		et.Eventually(t, 20*time.Second, fmt.Sprintf("client %d's acked messages deleted", i), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ms, err := store.TimestampMessages(ctx, u, 0, 100)
			return err == nil && len(ms) == 0
		})
		c.Close()
	}
	for i, ag := range agents {
		c := et.Dial(t, b.Listen)
		if got := c.Hello(ag.uaid); got != ag.uaid {
			t.Fatalf("client %d: uaid replaced %s -> %s", i, ag.uaid, got)
		}
		et.NothingMore(t, b.NodeURL, c) // acked: never delivered again
		c.Close()
	}
}

// TestSIGTERMExitsZeroWhenIdle: a node with no clients survives a SIGHUP,
// then drains at once on SIGTERM and exits 0. It needs no CQL server (one process: the embedded store).
func TestSIGTERMExitsZeroWhenIdle(t *testing.T) {
	n := startProc(t, "idle", procSettings(t))
	// The start line is logged just before main installs its signal
	// handler; a successful API call shows the process is well past it.
	et.Eventually(t, 10*time.Second, "the node API", func() bool {
		code, _, err := n.get("/__lbheartbeat__")
		return err == nil && code == http.StatusOK
	})
	// A reload (systemctl reload, a HUP to every unit) is logged and
	// changes nothing: the node keeps serving.
	n.signal(t, syscall.SIGHUP)
	et.Eventually(t, 10*time.Second, "the SIGHUP's log line", func() bool {
		return strings.Contains(string(n.Output()), "SIGHUP: autoconnect has nothing to reload")
	})
	if code, _, err := n.get("/__lbheartbeat__"); err != nil || code != http.StatusOK {
		t.Fatalf("after SIGHUP: %d %v", code, err)
	}
	start := time.Now()
	n.signal(t, syscall.SIGTERM)
	if code := n.waitExit(t, procExitTimeout); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	t.Logf("idle node exited 0 %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	var drained bool
	sc := bufio.NewScanner(strings.NewReader(string(n.Output())))
	for sc.Scan() {
		var rec struct{ Fields map[string]any }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Fields["msg"] == "draining" {
			drained = rec.Fields["clients"] == 0.0
		}
	}
	if !drained {
		t.Errorf("no draining line with clients=0 in the log")
	}
}

// TestSIGTERMRightAfterStartLine: the start line is the node's readiness
// signal, so a supervisor may send SIGTERM the moment it appears; the node
// must drain and exit 0 then too, not die of the signal's default action.
// Repeated because the window is small.
func TestSIGTERMRightAfterStartLine(t *testing.T) {
	for i := range 8 {
		n := startProc(t, fmt.Sprintf("early-%d", i), procSettings(t))
		n.signal(t, syscall.SIGTERM)
		if code := n.waitExit(t, procExitTimeout); code != 0 {
			t.Fatalf("run %d: exit status %d (-1: killed by the signal) for a SIGTERM right after the start line, want 0 "+
				"(main must call signal.Notify before srv.Start logs the start line)", i, code)
		}
	}
}

// TestHelloDuringSIGTERMDrainIsClosed: a connection upgraded before SIGTERM whose
// hello arrives during the drain must not outlive it: it is closed (1001)
// or refused within the drain window, and the node exits in time. None of
// these clients answers the node's close frame: the node waits for their
// answers until pong-timeout after its last close, then drops them.
func TestHelloDuringSIGTERMDrainIsClosed(t *testing.T) {
	// Registered clients keep the drain window open long enough for the
	// late hello to land inside it, even on a loaded machine.
	const window, pong = 3 * time.Second, 2 * time.Second
	settings := procSettings(t)
	settings["DRAIN_WINDOW"] = window.String()
	settings["PONG_TIMEOUT"] = pong.String()
	n := startProc(t, "A", settings)
	for range 10 {
		c := et.Dial(t, n.Listen)
		c.Hello("")
	}
	late := et.Dial(t, n.Listen) // upgraded, no hello yet
	sigAt := time.Now()
	n.signal(t, syscall.SIGTERM)
	et.Eventually(t, 10*time.Second, "the drain to start (/__lbheartbeat__ 503)", func() bool {
		code, _, err := n.get("/__lbheartbeat__")
		return err == nil && code == http.StatusServiceUnavailable
	})
	late.Send(map[string]any{"messageType": "hello", "use_webpush": true, "broadcasts": map[string]any{}})
	deadline := sigAt.Add(window + pong + procSlack)
	for {
		text, code, err := late.Next(time.Until(deadline))
		if errors.Is(err, et.ErrClosed) {
			t.Logf("late client closed with %d %v after SIGTERM", code, time.Since(sigAt).Round(time.Millisecond))
			break
		}
		if err != nil {
			t.Fatalf("late client: %v %v after SIGTERM, want a close frame within %v (drain window %v)",
				err, time.Since(sigAt).Round(time.Millisecond), window+pong+procSlack, window)
		}
		t.Logf("late client got %s", text)
	}
	if code := n.waitExit(t, time.Until(deadline)+time.Second); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	t.Logf("node exited %v after SIGTERM", time.Since(sigAt).Round(time.Millisecond))
}

// TestBinaryNeedsNodeSecret: autoconnect refuses to start without a node
// secret (its node API would otherwise trust any caller).
func TestBinaryNeedsNodeSecret(t *testing.T) {
	settings := procSettings(t)
	delete(settings, "NODE_SECRET")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, autoconnectBinary(t))
	cmd.Env = procEnv(settings)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "node-secret is required") {
		t.Fatalf("autoconnect without a node secret: %v\n%s", err, out)
	}
}

// TestDeafAutoconnectExits: when gnet stops the websocket listener (it
// does at the first accept that fails: here the node API's connections
// hold every descriptor of a process limited to 300 when a client
// connects), autoconnect does not run on as a node no client can reach:
// it stops and exits 1, saying why, for its supervisor to restart it.
func TestDeafAutoconnectExits(t *testing.T) {
	s := procSettings(t)
	s["NODE_API_HEADER_TIMEOUT"] = "2m" // the crowd below stays until the end
	cmd := exec.Command("bash", "-c", `ulimit -n 300 && exec "$0"`, autoconnectBinary(t))
	n := startProcCmd(t, "deaf", cmd, s)
	var crowd []net.Conn
	defer func() {
		for _, c := range crowd {
			c.Close()
		}
	}()
	for range 600 {
		c, err := net.DialTimeout("tcp", n.NodeAPI, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d to the node API: %v", len(crowd)+1, err)
		}
		crowd = append(crowd, c)
	}
	et.Eventually(t, 30*time.Second, "the node API out of descriptors", func() bool {
		return strings.Contains(string(n.Output()), "node API: accept failed")
	})
	et.ConnectUntil(t, n.Listen, n.Exited(), time.Minute)
	if code := n.waitExit(t, time.Second); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(string(n.Output()), "no client can reach this node any more") {
		t.Errorf("no log line says why the node stopped")
	}
}
