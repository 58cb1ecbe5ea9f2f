package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
	"github.com/google/uuid"
)

// The binaries, built once for this test binary.
var (
	buildOnce sync.Once
	binDir    string // removed by TestMain
	built     bool
)

func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		var err error
		if binDir, err = os.MkdirTemp("", "autopush-e2e-bin-"); err != nil {
			t.Fatal(err)
		}
		e2etest.Build(t, binDir, "./engine/cmd/autoconnect", "./apitier/cmd/autoendpoint")
		built = true
	})
	if !built {
		t.Fatal("the binaries did not build (see the first test that failed)")
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// startTier runs bin with env settings and waits for its start line.
func startTier(t *testing.T, bin, startMsg string, env map[string]string) *proc.Proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), bin))
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return e2etest.Start(t, cmd, startMsg)
}

// TestTiersAsSeparateProcesses: autoconnect and autoendpoint as their own
// processes sharing one Cassandra-backed store: direct delivery, then the
// connection node killed (unreachable) while pushes arrive, then stored
// delivery on reconnect to a new node, with nothing lost or repeated.
// tiers runs autoendpoint and hands out autoconnect nodes, all sharing one
// fresh Cassandra keyspace.
type tiers struct {
	node func(extra map[string]string) *proc.Proc
	push func(endpoint, topic string) (int, string)
}

func startTiers(t *testing.T) *tiers {
	t.Helper()
	cfg := cqltest.Keyspace(t, "e2e")
	port := et.FreeAddr(t)
	storageEnv := func(prefix string) map[string]string {
		return map[string]string{
			prefix + "__STORAGE": "scylla", prefix + "__CQL_HOSTS": strings.Join(cfg.Hosts, ","),
			prefix + "__CQL_KEYSPACE": cfg.Keyspace, prefix + "__CQL_CONSISTENCY": "ONE",
			prefix + "__CRYPTO_KEY": et.TestKey, prefix + "__NODE_SECRET": et.TestSecret, prefix + "__ENDPOINT_URL": "http://" + port,
		}
	}
	aenv := storageEnv("AUTOENDPOINT")
	aenv["AUTOENDPOINT__LISTEN"], aenv["AUTOENDPOINT__METRICS_LISTEN"] = port, "127.0.0.1:0"
	startTier(t, "autoendpoint", "autoendpoint started", aenv)
	return &tiers{
		node: func(extra map[string]string) *proc.Proc {
			env := storageEnv("AUTOCONNECT")
			env["AUTOCONNECT__LISTEN"], env["AUTOCONNECT__ROUTER_LISTEN"] = "127.0.0.1:0", "127.0.0.1:0"
			for k, v := range extra {
				env[k] = v
			}
			return startTier(t, "autoconnect", "autoconnect started", env)
		},
		// push sends an empty push and returns the status and Location.
		push: func(endpoint, topic string) (int, string) {
			req, _ := http.NewRequest(http.MethodPost, endpoint, nil)
			req.Header.Set("TTL", "300")
			if topic != "" {
				req.Header.Set("Topic", topic)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode, resp.Header.Get("Location")
		},
	}
}

func TestTiersAsSeparateProcesses(t *testing.T) {
	tt := startTiers(t)
	push := func(endpoint, topic string) int { code, _ := tt.push(endpoint, topic); return code }
	node := func() *proc.Proc { return tt.node(nil) }

	a := node()
	c := et.Dial(t, a.Field("listen"))
	uaid := c.Hello("")
	chid := uuid.NewString()
	endpoint := c.Register(chid, "")["pushEndpoint"].(string)

	// Direct delivery through two processes.
	if code := push(endpoint, ""); code != http.StatusCreated {
		t.Fatalf("direct push: %d", code)
	}
	n := c.Read()
	if n["messageType"] != "notification" {
		t.Fatalf("direct: %v", n)
	}
	c.Ack(chid, n["version"].(string))

	// The node dies (SIGKILL): its router record still names it. Pushes
	// must be stored, not lost.
	a.Kill()
	c.Close()
	for i := range 3 {
		if code := push(endpoint, ""); code != http.StatusCreated {
			t.Fatalf("push %d to a dead node: %d", i, code)
		}
	}
	// Two versions of one topic while offline: only the newer survives.
	push(endpoint, "news")
	push(endpoint, "news")

	b := node()
	c2 := et.Dial(t, b.Field("listen"))
	if got := c2.Hello(uaid); got != uaid {
		t.Fatalf("uaid changed: %s", got)
	}
	seen := map[string]bool{}
	for range 4 { // one topic message, three timestamp messages
		m := c2.Read()
		v := m["version"].(string)
		if seen[v] {
			t.Fatalf("duplicate %s", v)
		}
		seen[v] = true
		c2.Ack(chid, v)
	}
	et.NothingMore(t, b.Field("node_url"), c2)
	c2.Close()

	// Acked means gone: a further reconnect gets nothing.
	c3 := et.Dial(t, b.Field("listen"))
	c3.Hello(uaid)
	et.NothingMore(t, b.Field("node_url"), c3)
}

// TestSeparateProcessesBusyDeleteAndRace: the same two binaries: a node
// busy with an unacked notification (the endpoint stores, the node delivers
// after the ack), DELETE /m of a stored message, and pushes racing
// reconnects: every push arrives, none twice.
func TestSeparateProcessesBusyDeleteAndRace(t *testing.T) {
	tt := startTiers(t)
	a := tt.node(map[string]string{"AUTOCONNECT__MAX_UNACKED": "1"})
	c := et.Dial(t, a.Field("listen"))
	uaid := c.Hello("")
	chid := uuid.NewString()
	endpoint := c.Register(chid, "")["pushEndpoint"].(string)

	// Busy: the first push is in flight unacked; the second is stored and
	// arrives once the first is acked.
	for i := range 2 {
		if code, _ := tt.push(endpoint, ""); code != http.StatusCreated {
			t.Fatalf("push %d: %d", i, code)
		}
	}
	first := c.Read()["version"].(string)
	et.NothingMore(t, a.Field("node_url"), c) // the second waits for the ack
	c.Ack(chid, first)
	second := c.Read()["version"].(string)
	c.Ack(chid, second)
	if first == second {
		t.Fatal("the same notification twice")
	}

	// DELETE /m: a message deleted by its sender is not delivered.
	c.Close()
	_, loc := tt.push(endpoint, "")
	req, _ := http.NewRequest(http.MethodDelete, loc, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE %s: %v %v", loc, resp, err)
	}
	resp.Body.Close()
	c = et.Dial(t, a.Field("listen"))
	c.Hello(uaid)
	et.NothingMore(t, a.Field("node_url"), c)

	// Pushes racing reconnects: every Location's message arrives once.
	sent := make(chan string, 64)
	go func() {
		defer close(sent)
		for range 24 {
			if code, loc := tt.push(endpoint, ""); code == http.StatusCreated {
				sent <- loc[strings.LastIndex(loc, "/")+1:]
			}
			time.Sleep(15 * time.Millisecond)
		}
	}()
	got := map[string]int{}
	for round := range 6 {
		deadline := time.Now().Add(100 * time.Millisecond)
		for time.Now().Before(deadline) {
			text, _, err := c.Next(time.Until(deadline))
			if err != nil {
				break
			}
			var m map[string]any
			json.Unmarshal([]byte(text), &m)
			if v, ok := m["version"].(string); ok {
				got[v]++
				c.Ack(chid, v)
			}
		}
		c.Close()
		c = et.Dial(t, a.Field("listen"))
		if u := c.Hello(uaid); u != uaid {
			t.Fatalf("round %d: uaid changed", round)
		}
	}
	var want []string
	for id := range sent {
		want = append(want, id)
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		text, _, err := c.Next(time.Second)
		if err != nil {
			continue
		}
		var m map[string]any
		json.Unmarshal([]byte(text), &m)
		if v, ok := m["version"].(string); ok {
			got[v]++
			c.Ack(chid, v)
		}
	}
	et.NothingMore(t, a.Field("node_url"), c)
	for _, id := range want {
		if got[id] != 1 {
			t.Errorf("message %s…: delivered %d times, want once", id[:12], got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("received %d distinct messages, sent %d", len(got), len(want))
	}
}
