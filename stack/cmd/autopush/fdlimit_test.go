package main

import (
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// fdLimit is the open-files limit the server runs under in these tests:
// about 30 descriptors are its own at rest, and the connection node
// takes the ceiling less its reserve of 256 as max-connections (44).
const fdLimit = 300

// startLimited starts the server with both open-files limits at fdLimit
// (bash's ulimit, then exec: the PID is the server's).
func startLimited(t *testing.T, set map[string]string) (*proc.Proc, map[string]string) {
	t.Helper()
	vals := minimal(t, t.TempDir())
	vals["crypto-key"] = token.GenerateKey()
	for k, v := range set {
		vals[k] = v
	}
	args := []string{"-c", `ulimit -n "$0" && exec "$@"`, strconv.Itoa(fdLimit), binary(t)}
	for k, v := range vals {
		args = append(args, "-"+k+"="+v)
	}
	cmd := exec.Command("bash", args...)
	cmd.Env = childEnv()
	p := e2etest.Start(t, cmd, single.ReadyMsg)
	if got := p.Field("ws_listen"); got != vals["connect-listen"] {
		t.Fatalf("ready line's ws_listen %q, want %q", got, vals["connect-listen"])
	}
	return p, vals
}

// flood opens n connections to addr that send nothing, waiting up to
// wait on each for what the server answers at once (a refusal), so that
// the server has taken each before the next comes; refused counts those
// answered. The caller closes them.
func flood(t *testing.T, addr string, n int, wait time.Duration) (conns []net.Conn, refused int) {
	t.Helper()
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d of the flood: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
		c.SetReadDeadline(time.Now().Add(wait))
		if k, _ := c.Read(make([]byte, 64)); k > 0 {
			refused++
		}
	}
	return conns, refused
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

func lbHeartbeat(addr string) int {
	cl := http.Client{Timeout: 5 * time.Second}
	r, err := cl.Get("http://" + addr + "/__lbheartbeat__")
	if err != nil {
		return 0
	}
	r.Body.Close()
	return r.StatusCode
}

// TestOutOfFileDescriptors: a server at its open-files limit degrades,
// it does not go deaf. A crowd of connections that never upgrade is
// refused at accept once the node holds max-connections (before, each
// held a descriptor until its hello timeout, the process ran out, and
// gnet stopped listening for good). A crowd on the push API that uses up
// every descriptor is waited out: the API answers again once it leaves
// (before, Hertz stopped serving at the first failed accept).
func TestOutOfFileDescriptors(t *testing.T) {
	p, vals := startLimited(t, nil)

	conns, refused := flood(t, vals["connect-listen"], 2*fdLimit, 50*time.Millisecond)
	closeAll(conns)
	if refused < fdLimit {
		t.Errorf("websocket port: %d of %d silent connections refused at once, want at least %d (all beyond max-connections)", refused, len(conns), fdLimit)
	}
	et.Dial(t, vals["connect-listen"]).Hello("")

	conns, _ = flood(t, vals["endpoint-listen"], 2*fdLimit, time.Millisecond)
	closeAll(conns)
	et.Eventually(t, 10*time.Second, "the push API answering after the crowd left", func() bool {
		return lbHeartbeat(vals["endpoint-listen"]) == http.StatusOK
	})
	if !strings.Contains(string(p.Output()), "accept failed (file descriptors or kernel memory short)") {
		t.Error("the push API's shortage was not logged")
	}
	et.Dial(t, vals["connect-listen"]).Hello("")
	select {
	case <-p.Exited():
		t.Fatalf("the server exited: %s", p.Tail())
	default:
	}
}

// TestDeafNodeExits: when the websocket listener stops anyway (gnet
// stops listening for good at a failed accept; here the push API holds
// every descriptor when a client connects), the server does not go on
// as a node no client can reach with a healthy load-balancer check: it
// stops and exits 1, for its supervisor to restart it.
func TestDeafNodeExits(t *testing.T) {
	// The push API holds every descriptor it can take, and keeps them:
	// under its per-source cap (256 by default, less than the limit
	// leaves it) it would refuse the rest and free descriptors while
	// it did, and its timeouts would close the crowd.
	p, vals := startLimited(t, map[string]string{
		"endpoint-max-connections-per-source": "4096",
		"request-timeout":                     "2m",
		"idle-timeout":                        "2m",
	})
	conns, _ := flood(t, vals["endpoint-listen"], 2*fdLimit, time.Millisecond)
	defer closeAll(conns)
	et.Eventually(t, 10*time.Second, "the push API out of descriptors", func() bool {
		return strings.Contains(string(p.Output()), "accept failed (file descriptors or kernel memory short)")
	})
	et.ConnectUntil(t, vals["connect-listen"], p.Exited(), time.Minute)
	if code := p.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(string(p.Output()), "no client can reach the connection node any more") {
		t.Errorf("no log line says why the server stopped: %s", p.Tail())
	}
}
