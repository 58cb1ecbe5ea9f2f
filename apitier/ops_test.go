package apitier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/listener"
	"github.com/autopush-go/autopush/internal/mozlog"
)

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	for _, path := range []string{"/", "/nope", "/wpush/", "/wpush/v1/", "/m/", "/wpush/v1/a/b"} {
		wantError(t, perform(s, "POST", path, nil), 404, errno.InvalidEndpoint)
	}
	for _, c := range [][2]string{{"GET", "/wpush/v1/abc"}, {"PUT", "/wpush/abc"}, {"GET", "/m/abc"}, {"POST", "/__heartbeat__"}} {
		wantError(t, perform(s, c[0], c[1], nil), 405, errno.None)
	}
}

func TestCORS(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	u := subscribe(t, s, "", nil)
	r := perform(s, "OPTIONS", u.path, nil, hdr("Origin", "https://app.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "ttl, content-encoding, authorization")...)
	if r.code != 200 || r.header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "DELETE") ||
		r.header.Get("Access-Control-Allow-Headers") != "ttl, content-encoding, authorization" ||
		r.header.Get("Access-Control-Max-Age") != "3600" {
		t.Fatalf("preflight: %d %v", r.code, r.header)
	}
	r = perform(s, "OPTIONS", "/m/abc", nil)
	if r.code != 200 || !strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "ttl") {
		t.Fatalf("preflight without requested headers: %d %v", r.code, r.header)
	}
	// Actual responses: allowed origin and Location exposed, errors too.
	r = perform(s, "POST", u.path, nil, hdr("TTL", "60", "Origin", "https://app.example")...)
	wantCreated(t, s, r, "60")
	if r.header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "location") {
		t.Fatalf("CORS headers of a 201: %v", r.header)
	}
	r = perform(s, "POST", u.path, nil, hdr("Origin", "https://app.example")...)
	if r.code != 400 || r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("CORS headers of an error: %d %v", r.code, r.header)
	}
}

func TestStorageUnavailable(t *testing.T) {
	fs := &failingStore{Store: newStore(t)}
	s := newServer(t, fs, nil)
	u := subscribe(t, s, "", nil)
	id := wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), "60")

	fs.set("GetUser", true)
	wantError(t, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), 503, errno.RetryBackoff)
	fs.set("GetUser", false)

	fs.set("SaveMessage", true)
	wantError(t, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), 503, errno.RetryBackoff)
	// TTL 0 never reaches storage.
	wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "0")...), "0")
	fs.set("SaveMessage", false)

	fs.set("DeleteMessage", true)
	wantError(t, perform(s, "DELETE", "/m/"+id, nil), 503, errno.RetryBackoff)
	fs.set("DeleteMessage", false)
	if r := perform(s, "DELETE", "/m/"+id, nil); r.code != 204 {
		t.Fatalf("DELETE: %d", r.code)
	}
	if h := perform(s, "POST", u.path, nil, hdr("TTL", "60")...).header.Get("Retry-After"); h != "" {
		t.Fatalf("Retry-After on a 201: %q", h)
	}
}

func TestOperationsRoutes(t *testing.T) {
	dir := t.TempDir()
	version := `{"source":"https://example.com/autopush-go","version":"1.2.3","commit":"abc","build":"42"}`
	et.Must(t, os.WriteFile(filepath.Join(dir, "version.json"), []byte(version), 0o600), "write version")
	fs := &failingStore{Store: newStore(t)}
	s := startServer(t, fs, func(c *Config) { c.VersionFile = filepath.Join(dir, "version.json") })

	get := func(path string) (int, map[string]any) {
		r := send(t, s, "GET", path, nil)
		var m map[string]any
		json.Unmarshal(r.body, &m)
		return r.code, m
	}
	if code, m := get("/__heartbeat__"); code != 200 || m["status"] != "ok" || m["storage"] != "ok" {
		t.Fatalf("heartbeat %d %v", code, m)
	}
	if code, m := get("/__lbheartbeat__"); code != 200 || m["status"] != "ok" {
		t.Fatalf("lbheartbeat %d %v", code, m)
	}
	if r := send(t, s, "GET", "/__version__", nil); r.code != 200 || string(r.body) != version {
		t.Fatalf("version %d %s", r.code, r.body)
	}
	if code, m := get("/status"); code != 200 || m["status"] != "ok" || m["version"] != "1.2.3" {
		t.Fatalf("status %d %v", code, m)
	}
	if code, m := get("/health"); code != 200 || m["status"] != "ok" || m["version"] != "1.2.3" {
		t.Fatalf("health %d %v", code, m)
	}
	fs.set("Health", true)
	if code, m := get("/__heartbeat__"); code != 503 || m["status"] != "error" {
		t.Fatalf("heartbeat with storage down %d %v", code, m)
	}
	if code, _ := get("/health"); code != 503 {
		t.Fatalf("health with storage down %d", code)
	}
	if code, _ := get("/status"); code != 200 {
		t.Fatalf("status with storage down %d", code)
	}
	if code, _ := get("/__lbheartbeat__"); code != 200 {
		t.Fatalf("lbheartbeat with storage down %d", code)
	}
	fs.set("Health", false)

	// Some traffic, then the metrics.
	u := subscribe(t, s, "", nil)
	wantCreated(t, s, send(t, s, "POST", u.path, []byte("x"), "TTL", "60", "Content-Encoding", "aes128gcm"), "60")
	wantError(t, send(t, s, "POST", u.path, nil), 400, errno.MissingHeader)
	wantError(t, send(t, s, "POST", u.path, nil, "TTL", "60", "Authorization", "vapid t=x,k=y"), 401, errno.InvalidAuth)
	// Not on the public port: strangers get 404 there.
	wantError(t, send(t, s, "GET", "/metrics", nil), http.StatusNotFound, errno.InvalidEndpoint)
	r := fromRaw(apitiertest.Send(t, "GET", "http://"+s.MetricsAddr()+"/metrics", nil))
	if r.code != http.StatusOK {
		t.Fatalf("GET /metrics on metrics-listen: %d", r.code)
	}
	for _, want := range []string{
		`autoendpoint_requests_total{route="wpush_v1",code="201"} 1`,
		`autoendpoint_requests_total{route="wpush_v1",code="400"} 1`,
		`autoendpoint_errors_total{errno="111"} 1`,
		`autoendpoint_errors_total{errno="109"} 1`,
		`autoendpoint_notifications_total{outcome="stored"} 1`,
		`autoendpoint_notification_encoding_total{encoding="aes128gcm"} 1`,
		`autoendpoint_vapid_failures_total{rule="key"} 1`,
		// Latencies and sizes are Prometheus histograms (le buckets, for
		// histogram_quantile), present before their first observation.
		`autoendpoint_request_seconds_bucket{route="wpush_v1",le="+Inf"} 3`,
		`autoendpoint_request_seconds_bucket{route="wpush_v1",le="0.0001"} `,
		`autoendpoint_storage_seconds_bucket{le="10"} `,
		`autoendpoint_node_call_seconds_bucket{call="push",le="+Inf"} 0`,
		`autoendpoint_notification_data_bytes_bucket{le="0"} 0`,
		`autoendpoint_notification_data_bytes_bucket{le="64"} 1`,
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestShutdown: lbheartbeat fails once shutting down; a request in
// flight finishes; Shutdown returns.
func TestShutdown(t *testing.T) {
	node := newFakeNode(t, 200, 200)
	release := make(chan struct{})
	node.hook = func(nodeCallRec) { <-release }
	s := newServer(t, newStore(t), func(c *Config) { c.NodeTimeout = 5 * time.Second; c.ShutdownTimeout = 5 * time.Second })
	et.Must(t, s.Start(), "start")
	u := subscribe(t, s, node.URL, nil)
	// An idle keep-alive connection does not hold the shutdown.
	idle := &http.Client{}
	if r, err := idle.Get("http://" + s.Addr() + "/status"); err != nil || r.StatusCode != 200 {
		t.Fatalf("status: %v", err)
	} else {
		r.Body.Close()
	}

	var wg sync.WaitGroup
	var inFlight response
	wg.Add(1)
	go func() {
		defer wg.Done()
		inFlight = send(t, s, "POST", u.path, nil, "TTL", "60")
	}()
	et.Eventually(t, 5*time.Second, "push in flight", func() bool { return len(node.recorded()) == 1 })
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	et.Eventually(t, 5*time.Second, "draining", s.draining.Load)
	r := perform(s, "GET", "/__lbheartbeat__", nil)
	if r.code != 503 {
		t.Fatalf("lbheartbeat while shutting down: %d", r.code)
	}
	close(release)
	wg.Wait()
	wantCreated(t, s, inFlight, "60")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Shutdown did not return within a second of the last request")
	}
	if _, err := http.Get("http://" + s.Addr() + "/__lbheartbeat__"); err == nil {
		t.Fatal("still serving after Shutdown")
	}
}

// TestRequestLog: one MozLog JSON line per request, with the errno of
// errors and the outcome of pushes.
func TestRequestLog(t *testing.T) {
	var buf apitiertest.SyncBuffer
	cfg := testConfig()
	cfg.RequestLog = true
	store := newStore(t)
	s, err := New(cfg, store, mozlog.New(&buf, "autoendpoint", "info"))
	et.Must(t, err, "New")
	u := subscribe(t, s, "", nil)
	perform(s, "POST", u.path, []byte("x"), hdr("TTL", "60", "Content-Encoding", "aes128gcm", "User-Agent", "pywebpush/2.0")...)
	perform(s, "POST", u.path, nil, hdr("TTL", "x")...)
	var lines []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		et.Must(t, json.Unmarshal([]byte(l), &m), "log line "+l)
		if f := m["Fields"].(map[string]any); f["msg"] == "request" {
			lines = append(lines, f)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("request lines %v", lines)
	}
	ok, bad := lines[0], lines[1]
	if ok["code"] != 201.0 || ok["outcome"] != "stored" || ok["route"] != "wpush_v1" || ok["encoding"] != "aes128gcm" ||
		ok["user_agent"] != "pywebpush/2.0" || ok["method"] != "POST" {
		t.Fatalf("summary of a push %v", ok)
	}
	if bad["code"] != 400.0 || bad["errno"] != "112" {
		t.Fatalf("summary of an error %v", bad)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"no crypto key":         func(c *Config) { c.CryptoKey = "" },
		"no listen":             func(c *Config) { c.Listen = "" },
		"storage":               func(c *Config) { c.Storage = "mysql" },
		"endpoint url":          func(c *Config) { c.EndpointURL = "push.example.com" },
		"endpoint scheme":       func(c *Config) { c.EndpointURL = "ftp://push.example.com" },
		"max data":              func(c *Config) { c.MaxDataBytes = 0 },
		"max data storage":      func(c *Config) { c.MaxDataBytes = MaxMaxDataBytes + 1 },
		"node timeout":          func(c *Config) { c.NodeTimeout = 0 },
		"idle conns":            func(c *Config) { c.NodeIdleConns = 0 },
		"vapid skew":            func(c *Config) { c.VAPIDSkew = -time.Second },
		"short broadcast token": func(c *Config) { c.BroadcastTokens = []string{"short"} },
		"spaced reader token":   func(c *Config) { c.BroadcastReaderTokens = []string{"a token with spaces in it"} },
	} {
		cfg := testConfig()
		mutate(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
	}
	cfg := testConfig()
	et.Must(t, cfg.Validate(), "test config")
	for in, want := range map[string]string{
		"https://Push.Example.com:443/base/": "https://push.example.com",
		"http://127.0.0.1:8082":              "http://127.0.0.1:8082",
		"http://[::1]:80":                    "http://[::1]",
	} {
		if got, err := origin(in); err != nil || got != want {
			t.Errorf("origin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// The runtime profiles are served on metrics-listen only when pprof is
// on, and never on the public port.
func TestPprofOnlyWhenOn(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := startServer(t, newStore(t), func(c *Config) { c.Pprof = on })
		r := fromRaw(apitiertest.Send(t, "GET", "http://"+s.MetricsAddr()+"/debug/pprof/heap", nil))
		if want := map[bool]int{false: 404, true: 200}[on]; r.code != want {
			t.Errorf("pprof %v: GET /debug/pprof/heap on metrics-listen: %d, want %d", on, r.code, want)
		}
		wantError(t, send(t, s, "GET", "/debug/pprof/heap", nil), http.StatusNotFound, errno.InvalidEndpoint)
	}
}

// TestListenInUse: a second node on a host, whose metrics-listen (or
// listen) another process holds, does not start, and its error names the
// setting and how to change it: the default metrics-listen,
// 127.0.0.1:8084, is the same for every node.
func TestListenInUse(t *testing.T) {
	addr := et.HeldAddr(t)
	for setting, mutate := range map[string]func(*Config){
		"metrics-listen": func(c *Config) { c.MetricsListen = addr },
		"listen":         func(c *Config) { c.Listen = addr },
	} {
		err := newServer(t, newStore(t), mutate).Start()
		var le *listener.ListenError
		if !errors.As(err, &le) || le.Tier != "autoendpoint" || le.Setting != setting || le.Addr != addr {
			t.Fatalf("%s held: %#v", setting, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, setting+" "+addr+": address already in use") || !strings.Contains(msg, "set "+setting+" to a free address") ||
			strings.Contains(msg, `"" to turn it off`) != (setting == "metrics-listen") {
			t.Errorf("%s held: %q", setting, msg)
		}
	}
}
