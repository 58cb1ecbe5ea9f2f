package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/sender/node"
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// shippedEnv reads ops/systemd/autopush.env's variables, its paths moved
// under dir and its loopback ports made free ones (127.0.0.1:0: the
// endpoint URL it sets names the public address, not the listener's),
// and metrics-listen, which it leaves at its fixed default, on a free port
// too.
func shippedEnv(t *testing.T, dir string) []string {
	t.Helper()
	port := regexp.MustCompile(`^127\.0\.0\.1:\d+$`)
	env := []string{single.Prefix + "__METRICS_LISTEN=127.0.0.1:0"}
	for _, line := range shippedVars(t) {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("autopush.env line %q", line)
		}
		switch {
		case port.MatchString(v):
			v = "127.0.0.1:0"
		case strings.HasPrefix(v, "/var/lib/autopush/"):
			v = filepath.Join(dir, strings.TrimPrefix(v, "/var/lib/autopush/"))
		}
		env = append(env, k+"="+v)
	}
	return env
}

// TestShippedEnvStartsQuiet: the server started as the systemd unit
// starts it, with ops/systemd/autopush.env as shipped (a WebPush-only
// deployment: no push provider, no push API client) and in its state
// directory, logs no warning and no error: not on its first start (which
// makes the crypto-key), not through real traffic (a websocket hello,
// a subscription, a push delivered and acked), not through its SIGTERM
// drain. It says in one info line that the outbound sender is off.
func TestShippedEnvStartsQuiet(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(binary(t))
	cmd.Dir = dir // the unit's WorkingDirectory: its StateDirectory
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, single.Prefix+"__") && !strings.HasPrefix(kv, "GOGC=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, shippedEnv(t, dir)...)
	p := e2etest.Start(t, cmd, single.ReadyMsg)

	c := et.Dial(t, p.Field("ws_listen"))
	defer c.Close()
	c.Hello("")
	chid := uuid.NewString()
	endpoint, _ := c.Register(chid, "")["pushEndpoint"].(string)
	// The endpoint names the public URL nginx serves; the test is nginx.
	public := p.Field("endpoint_url")
	if !strings.HasPrefix(endpoint, public+"/wpush/") {
		t.Fatalf("endpoint %q is not under %s", endpoint, public)
	}
	if code := push(t, "http://"+p.Field("push_api")+strings.TrimPrefix(endpoint, public), "quiet", "60"); code != http.StatusCreated {
		t.Fatalf("push: %d", code)
	}
	n := c.Read()
	if n["messageType"] != "notification" || n["channelID"] != chid {
		t.Fatalf("notification %v", n)
	}
	// No admin-tokens: the admin routes are closed.
	code, body, _ := adminGet(t, p.Field("metrics"), "uaid=00000000000000000000000000000001", "")
	wantErrno(t, "the admin route without admin-tokens", code, body, 401, float64(109), "closed", "admin-tokens")
	version, _ := n["version"].(string)
	c.Ack(chid, version)
	c.Barrier() // the ack handled: the node answered what followed it
	c.Close()
	et.Must(t, p.Stop(time.Minute), "stop with SIGTERM")
	if code := p.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}

	out := p.Output()
	if !bytes.Contains(out, []byte(node.NoProviderMsg)) {
		t.Errorf("no line saying the outbound sender is off:\n%s", out)
	}
	for line := range bytes.Lines(out) {
		var rec struct {
			Severity *int
			Fields   map[string]any
		}
		if err := json.Unmarshal(line, &rec); err != nil || rec.Severity == nil {
			t.Errorf("a line that is not a MozLog record: %s", line)
			continue
		}
		if *rec.Severity <= 4 { // syslog: 4 warning, 3 error
			t.Errorf("severity %d: %s", *rec.Severity, rec.Fields["msg"])
		}
	}
}

// push posts body (an aes128gcm payload to the server, which does not
// decrypt it) to endpoint with ttl, and returns the status.
func push(t *testing.T, endpoint, body, ttl string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	req.Header.Set("TTL", ttl)
	req.Header.Set("Content-Encoding", "aes128gcm")
	resp, err := http.DefaultClient.Do(req)
	et.Must(t, err, "push")
	resp.Body.Close()
	return resp.StatusCode
}
