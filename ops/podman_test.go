package ops_test

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	et "github.com/autopush-go/autopush/engine/enginetest"
)

// stackScript runs docker/podman/stack.sh and returns its KEY=VALUE lines.
func stackScript(t *testing.T, args ...string) (map[string]string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "docker/podman/stack.sh")}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("stack.sh %s:\n%s", strings.Join(args, " "), lastLines(stderr.String(), 40))
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			vars[k] = v
		}
	}
	return vars, err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestComposeUnderPodman runs docker-compose.yml for real under podman
// (docker/podman/stack.sh: Cassandra in ScyllaDB's place, no Prometheus
// or Grafana): both tiers' health routes answer 200 through the published
// ports, the smoke test (pushsend smoke) goes through them, a push stored
// for a disconnected user agent survives a restart of every container and
// is delivered after, and down leaves no container, volume or network.
func TestComposeUnderPodman(t *testing.T) {
	if os.Getenv("AUTOPUSH_PODMAN") != "1" {
		t.Skip("AUTOPUSH_PODMAN=1 runs docker-compose.yml under podman (as root; installs podman, podman-compose, mmdebstrap; make test does)")
	}
	env, err := stackScript(t, "up")
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == 3 {
		if os.Getenv("CI") == "true" {
			t.Fatal("podman cannot run here (see the log above)")
		}
		t.Skip("podman cannot run here (see the log above)")
	}
	if err != nil {
		t.Fatalf("stack.sh up: %v", err)
	}
	t.Cleanup(func() {
		if _, err := stackScript(t, "down", env["STATE"]); err != nil {
			t.Errorf("stack.sh down: %v", err)
		}
	})
	ws, push, node := "127.0.0.1:"+env["WS_PORT"], "127.0.0.1:"+env["PUSH_PORT"], "127.0.0.1:"+env["NODE_PORT"]
	healthy(t, node, push)

	smoke := exec.Command(filepath.Join(root, "docker/prebuilt/pushsend"), "smoke", "-ws", "ws://"+ws+"/", "-timeout", "60s")
	if out, err := smoke.CombinedOutput(); err != nil {
		t.Fatalf("pushsend smoke through the published ports: %v\n%s", err, out)
	} else {
		t.Logf("pushsend smoke:\n%s", out)
	}

	// A push stored for a user agent that is away, across a restart.
	c := et.Dial(t, ws)
	uaid := c.Hello("")
	chid := uuid.NewString()
	reg := c.Register(chid, "")
	endpoint, _ := reg["pushEndpoint"].(string)
	if reg["status"] != 200.0 || !strings.HasPrefix(endpoint, "http://"+push+"/") {
		t.Fatalf("register: %v (want an endpoint on the published push port %s)", reg, push)
	}
	c.Close()
	req, _ := http.NewRequest(http.MethodPost, endpoint, nil)
	req.Header.Set("TTL", "3600")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("push to the away user agent: %d, want 201", resp.StatusCode)
	}
	if _, err := stackScript(t, "restart", env["STATE"]); err != nil {
		t.Fatalf("stack.sh restart: %v", err)
	}
	healthy(t, node, push)
	c = et.Dial(t, ws)
	if got := c.Hello(uaid); got != uaid {
		t.Fatalf("hello after the restart: uaid %s, want %s", got, uaid)
	}
	n := c.Read()
	if n["messageType"] != "notification" || n["channelID"] != chid {
		t.Fatalf("after the restart got %v, want the stored notification for %s", n, chid)
	}
	c.Ack(chid, n["version"].(string))
}

// healthy waits until the connection node's node API and the endpoint
// node answer /__heartbeat__ (storage reachable) and /__lbheartbeat__
// with 200.
func healthy(t *testing.T, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		for _, route := range []string{"/__heartbeat__", "/__lbheartbeat__"} {
			et.Eventually(t, 3*time.Minute, a+route+" answering 200", func() bool {
				resp, err := http.Get("http://" + a + route)
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			})
		}
	}
}
