package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/endpointdiag"
	"github.com/autopush-go/autopush/internal/token"
)

// diagTool builds tools/cmd/endpointdiag into the test's directory.
func diagTool(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "endpointdiag")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../tools/cmd/endpointdiag").CombinedOutput(); err != nil {
		t.Fatalf("go build endpointdiag: %v\n%s", err, out)
	}
	return bin
}

// adminGet asks the metrics listener's route with query and token ("":
// no Authorization), and returns the status and body.
func adminGet(t *testing.T, metrics, query, tok string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+metrics+endpointdiag.Route+"?"+query, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	et.Must(t, err, "GET "+endpointdiag.Route)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// wantErrno checks an error answer: status, JSON with the errno (nil for
// errno null) and a message holding each of says.
func wantErrno(t *testing.T, what string, code int, body string, wantCode int, wantErrno any, says ...string) {
	t.Helper()
	var e struct {
		Code    int
		Errno   any
		Message string
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != wantCode || e.Code != wantCode || e.Errno != wantErrno {
		t.Errorf("%s: %d %s, want %d JSON with errno %v", what, code, body, wantCode, wantErrno)
		return
	}
	for _, s := range says {
		if !strings.Contains(e.Message, s) {
			t.Errorf("%s: message %q does not say %q", what, e.Message, s)
		}
	}
}

const diagAdminToken = "diag-test-admin-token"

// TestEndpointDiagnosisLive: the endpoint diagnosis of a running server,
// asked on its metrics listener with an admin token (admin-tokens),
// answers what tools/cmd/endpointdiag prints for the same endpoint on the
// same data once the server is stopped, byte for byte, as JSON and as
// text. While the server runs, the tool cannot open its data: its error
// names the server's PID and command line, and the route. The route
// refuses a request without the token (401, errno 109) and bad input
// (400, a JSON error saying what is wrong).
func TestEndpointDiagnosisLive(t *testing.T) {
	bin, tool := binary(t), diagTool(t)
	dir := t.TempDir()
	vals := minimal(t, dir)
	vals["crypto-key"] = token.GenerateKey()
	vals["admin-tokens"] = diagAdminToken
	p := start(t, fromFlags, vals)
	metrics := vals["metrics-listen"]

	// A subscription whose user agent left, with two pushes waiting.
	c := et.Dial(t, vals["connect-listen"])
	uaid := c.Hello("")
	endpoint, _ := c.Register(uuid.NewString(), "")["pushEndpoint"].(string)
	c.Leave()
	(&probeRun{vals: vals}).noConnection(t)
	for _, body := range []string{"one", "two"} {
		if code := push(t, endpoint, body, "600"); code != http.StatusCreated {
			t.Fatalf("push: %d", code)
		}
	}

	checkAdminRefusals(t, metrics, uaid)
	byEndpoint := "endpoint=" + url.QueryEscape(endpoint)
	code, live, hdr := adminGet(t, metrics, byEndpoint, diagAdminToken)
	var rep endpointdiag.Report
	if err := json.Unmarshal([]byte(live), &rep); code != 200 || err != nil || rep.UAID != uaid || len(rep.Pending) != 2 ||
		rep.Registered == nil || !*rep.Registered || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("the live diagnosis: %d %s (%v)", code, live, err)
	}
	_, liveText, _ := adminGet(t, metrics, byEndpoint+"&format=text", diagAdminToken)
	if code, body, _ := adminGet(t, metrics, "uaid="+uaid+"&limit=1", diagAdminToken); code != 200 ||
		!strings.Contains(body, `"router_record"`) || strings.Contains(body, `"channel_registered"`) || strings.Count(body, `"version"`) != 1 {
		t.Errorf("the diagnosis of the UAID, one message listed: %d %s", code, body)
	}

	args := []string{"-crypto-key", vals["crypto-key"], "-data-dir", vals["data-dir"]}
	out, err := exec.Command(tool, append(args, "-json", endpoint)...).CombinedOutput()
	holder := fmt.Sprintf("in use by process %d (%s)", p.PID(), bin)
	if err == nil || !strings.Contains(string(out), holder) || !strings.Contains(string(out), "GET "+endpointdiag.Route) ||
		strings.Contains(string(out), vals["crypto-key"]) {
		t.Errorf("endpointdiag on the live data: %v\n%s\nwant an error naming %q and the route, not the server's arguments", err, out, holder)
	}

	et.Must(t, p.Stop(time.Minute), "stop the server")
	for _, f := range []struct{ flag, live string }{{"-json", live}, {"-json=false", liveText}} {
		out, err := exec.Command(tool, append(args, f.flag, endpoint)...).Output()
		if err != nil || string(out) != f.live {
			t.Errorf("endpointdiag %s on the stopped server's data (%v):\n%s\nthe live route answered:\n%s", f.flag, err, out, f.live)
		}
	}
}

// checkAdminRefusals: without the token, or with another, 401 errno 109;
// bad input 400 (errno null) saying what is wrong.
func checkAdminRefusals(t *testing.T, metrics, uaid string) {
	t.Helper()
	for _, tok := range []string{"", "not-the-admin-token-at-all"} {
		code, body, hdr := adminGet(t, metrics, "uaid="+uaid, tok)
		wantErrno(t, "no or a wrong admin token", code, body, 401, float64(109), "admin token")
		if hdr.Get("WWW-Authenticate") == "" {
			t.Error("a 401 without WWW-Authenticate")
		}
	}
	for query, says := range map[string]string{
		"":                                    "exactly one of endpoint",
		"uaid=" + uaid + "&endpoint=x":        "exactly one of endpoint",
		"uaid=" + uaid + "&uaid=" + uaid:      "more than once",
		"uaid=" + uaid + "&verbose=1":         `unknown parameter "verbose"`,
		"uaid=zz":                             "not 32 hex digits",
		"endpoint=https://x/wpush/v1/garbage": "endpoint",
		"endpoint=" + uaid:                    "is not one",
		"uaid=" + uaid + "&limit=0":           "limit",
		"uaid=" + uaid + "&format=xml":        "format",
	} {
		code, body, _ := adminGet(t, metrics, query, diagAdminToken)
		wantErrno(t, "?"+query, code, body, 400, nil, says)
	}
}
