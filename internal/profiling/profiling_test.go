package profiling

import (
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve runs Register's routes behind a server whose WriteTimeout (1s)
// is shorter than the profiles asked for, as the tiers' listeners are.
func serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	Register(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second, WriteTimeout: time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp.StatusCode, b
}

// A CPU profile longer than the listener's WriteTimeout arrives whole: a
// gzip stream (pprof's protobuf) read to its end.
func TestProfileOutlastsWriteTimeout(t *testing.T) {
	base := serve(t)
	code, body := get(t, base+"/debug/pprof/profile?seconds=2")
	if code != http.StatusOK {
		t.Fatalf("profile: status %d: %s", code, body)
	}
	zr, err := gzip.NewReader(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("profile is not gzip: %v (%d bytes)", err, len(body))
	}
	if n, err := io.Copy(io.Discard, zr); err != nil || n == 0 {
		t.Fatalf("profile: %d bytes, %v", n, err)
	}
}

func TestTraceOutlastsWriteTimeout(t *testing.T) {
	base := serve(t)
	code, body := get(t, base+"/debug/pprof/trace?seconds=2")
	if code != http.StatusOK || !strings.HasPrefix(string(body), "go 1.") {
		t.Fatalf("trace: status %d, %d bytes starting %q", code, len(body), body[:min(len(body), 16)])
	}
}

func TestBadSecondsRefused(t *testing.T) {
	base := serve(t)
	for _, q := range []string{"0", "-1", "x", "121", "1e3"} {
		code, body := get(t, base+"/debug/pprof/profile?seconds="+q)
		if code != http.StatusBadRequest {
			t.Errorf("seconds=%s: status %d, want 400: %s", q, code, body)
		}
	}
}

func TestNamedProfiles(t *testing.T) {
	base := serve(t)
	for _, p := range []string{"", "heap", "goroutine?debug=1", "allocs", "cmdline"} {
		if code, body := get(t, base+"/debug/pprof/"+p); code != http.StatusOK || len(body) == 0 {
			t.Errorf("/debug/pprof/%s: status %d, %d bytes", p, code, len(body))
		}
	}
}
