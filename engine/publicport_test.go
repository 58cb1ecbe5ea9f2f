package engine_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
)

// publicGet sends one plain HTTP request to the websocket port.
func publicCall(t *testing.T, srv *engine.Server, method, path string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+srv.Addr()+path, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, body
}

// TestPublicPortAnswersLikeAWebServer: load balancers health-check the
// websocket port; it answers the dockerflow routes, 404 (the API tier's
// JSON error) for anything else, 426 for GET / without an upgrade, and
// never serves the node API.
func TestPublicPortAnswersLikeAWebServer(t *testing.T) {
	version := filepath.Join(t.TempDir(), "version.json")
	os.WriteFile(version, []byte(`{"version":"9.9.9","commit":"c"}`), 0o600)
	srv, _ := node(t, func(c *engine.Config) { c.VersionFile = version })
	c := et.Dial(t, srv.Addr())
	c.Hello("")
	for _, tc := range []struct {
		method, path string
		status       int
		want         map[string]any
	}{
		{"GET", "/__lbheartbeat__", 200, map[string]any{"status": "ok"}},
		{"GET", "/__heartbeat__", 200, map[string]any{"status": "ok", "storage": "ok", "draining": false}},
		{"GET", "/health", 200, map[string]any{"status": "ok", "storage": "ok", "version": "9.9.9", "connections": 2.0, "draining": false}}, // the websocket and this request
		{"GET", "/status", 200, map[string]any{"status": "ok", "version": "9.9.9"}},
		{"GET", "/__version__", 200, map[string]any{"version": "9.9.9", "commit": "c"}},
		{"GET", "/nope", 404, nil},
		{"GET", "/metrics", 404, nil},
		{"PUT", "/push/" + strings.Repeat("ab", 16), 404, nil},
		{"PUT", "/notif/" + strings.Repeat("ab", 16), 404, nil},
		{"DELETE", "/notif/" + strings.Repeat("ab", 16) + "/1", 404, nil},
		{"POST", "/", 404, nil},
		{"HEAD", "/__lbheartbeat__", 404, nil},
	} {
		if tc.path == "/health" {
			// The requests before it closed their connections; the node
			// counts a close when its event loop handles it, which may
			// come after the client has its answer.
			et.Eventually(t, 10*time.Second, "only the websocket connected", func() bool {
				v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_connections")
				return v == 1
			})
		}
		status, hdr, body := publicCall(t, srv, tc.method, tc.path)
		if status != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, status, body, tc.status)
			continue
		}
		if tc.method == "HEAD" {
			continue
		}
		if ct := hdr.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", tc.method, tc.path, ct)
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Errorf("%s %s: body %q: %v", tc.method, tc.path, body, err)
			continue
		}
		want := tc.want
		if tc.status == 404 {
			want = map[string]any{"code": 404.0, "errno": 102.0, "error": "Not Found", "message": "Not Found",
				"more_info": got["more_info"]}
		}
		if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
			t.Errorf("%s %s: %s, want %s", tc.method, tc.path, g, w)
		}
	}
	if status, _, _ := publicCall(t, srv, "GET", "/"); status != 426 {
		t.Errorf("GET / without upgrade: %d, want 426", status)
	}
	if v, _ := et.Metric(t, srv.NodeURL(), `autoconnect_http_requests_total{route="not_found"}`); v != 7 {
		t.Errorf("not_found counted %v, want 7", v)
	}
	// The websocket still works next to them.
	c.Barrier()
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The runtime profiles are served on the node API's listener only when
// pprof is on, and never on the public port.
func TestPprofOnlyWhenOn(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv, _ := node(t, func(c *engine.Config) { c.Pprof = on })
		resp, err := http.Get(srv.NodeURL() + "/debug/pprof/heap")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: 404, true: 200}[on]; resp.StatusCode != want {
			t.Errorf("pprof %v: GET /debug/pprof/heap on the node API: %d, want %d", on, resp.StatusCode, want)
		}
		if status, _, body := publicCall(t, srv, "GET", "/debug/pprof/heap"); status != 404 {
			t.Errorf("pprof %v: public port answered /debug/pprof/heap %d: %s", on, status, body)
		}
	}
}
