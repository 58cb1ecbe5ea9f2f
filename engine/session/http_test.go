package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// httpRequest feeds a plain HTTP request to a new session.
func (h *harness) httpRequest(req string) *harness {
	h.t.Helper()
	h.step(h.s.Open)
	h.feed([]byte(req))
	return h
}

// response splits what the last transition wrote into status, headers and
// body.
func (h *harness) response() (status string, head string, body []byte) {
	h.t.Helper()
	head, b, ok := strings.Cut(string(h.out), "\r\n\r\n")
	if !ok {
		h.t.Fatalf("no HTTP response in %q", h.out)
	}
	status, _, _ = strings.Cut(head, "\r\n")
	return status, head, []byte(b)
}

func (h *harness) jsonResponse(wantStatus string) map[string]any {
	h.t.Helper()
	status, head, body := h.response()
	if !strings.HasPrefix(status, "HTTP/1.1 "+wantStatus+" ") {
		h.t.Fatalf("status line %q, want %s (%s)", status, wantStatus, body)
	}
	if !strings.Contains(head, "Content-Type: application/json\r\n") || strings.Contains(head, "text/plain") ||
		!strings.Contains(head, "Connection: close") {
		h.t.Fatalf("headers %q", head)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		h.t.Fatalf("body %q: %v", body, err)
	}
	if !h.close || !h.s.Closing() {
		h.t.Fatal("the connection is not closed after the answer")
	}
	return m
}

func get(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: push.example\r\n\r\n" }

func TestPublicPortRoutes(t *testing.T) {
	version := []byte(`{"version":"1.2.3","commit":"abc"}`)
	newH := func(t *testing.T) *harness {
		h := newHarness(t, nil)
		h.env.Version = version
		h.env.Connections = func() int64 { return 7 }
		return h
	}
	t.Run("lbheartbeat", func(t *testing.T) {
		h := newH(t).httpRequest(get("/__lbheartbeat__"))
		if m := h.jsonResponse("200"); m["status"] != "ok" {
			t.Fatalf("%v", m)
		}
		h.noJobs()
		h = newH(t)
		h.env.Draining.Store(true)
		h.httpRequest(get("/__lbheartbeat__?probe=1"))
		if m := h.jsonResponse("503"); m["status"] != "draining" {
			t.Fatalf("draining: %v", m)
		}
		if h.counter(`HTTP{route="lbheartbeat"}`) != 1 {
			t.Fatal("not counted")
		}
	})
	t.Run("version and status", func(t *testing.T) {
		h := newH(t).httpRequest(get("/__version__"))
		if _, _, body := h.response(); !bytes.Equal(body, version) {
			t.Fatalf("version %q", body)
		}
		h = newH(t).httpRequest(get("/status"))
		if m := h.jsonResponse("200"); m["status"] != "ok" || m["version"] != "1.2.3" {
			t.Fatalf("status %v", m)
		}
	})
	for _, tc := range []struct {
		path, route string
		err         error
		status      string
	}{
		{"/__heartbeat__", "heartbeat", nil, "200"},
		{"/__heartbeat__", "heartbeat", errors.New("down"), "503"},
		{"/health", "health", nil, "200"},
		{"/health", "health", errors.New("down"), "503"},
	} {
		t.Run(tc.path+" "+tc.status, func(t *testing.T) {
			h := newH(t).httpRequest(get(tc.path))
			job := h.job(JobHealth)
			if len(h.out) != 0 || h.close {
				t.Fatalf("answered %q before storage did", h.out)
			}
			// More input meanwhile is ignored.
			h.feed([]byte(get("/status")))
			if len(h.out) != 0 || len(h.jobs) != 0 {
				t.Fatalf("a second request was served: %q", h.out)
			}
			h.done(&Result{Job: job, Err: tc.err})
			m := h.jsonResponse(tc.status)
			want := map[bool]string{true: "ok", false: "error"}[tc.err == nil]
			if m["status"] != want || m["storage"] != want || m["draining"] != false {
				t.Fatalf("%v", m)
			}
			if tc.route == "health" && (m["version"] != "1.2.3" || m["connections"] != 7.0) {
				t.Fatalf("health %v", m)
			}
			if h.counter(`HTTP{route="`+tc.route+`"}`) != 1 {
				t.Fatal("not counted")
			}
		})
	}
	t.Run("storage never answers", func(t *testing.T) {
		h := newH(t).httpRequest(get("/__heartbeat__"))
		h.job(JobHealth)
		h.now = h.now.Add(testConfig.HelloTimeout)
		h.step(h.s.Tick)
		if status, _, _ := h.response(); !strings.HasPrefix(status, "HTTP/1.1 503 ") || !h.close {
			t.Fatalf("timeout: %q", h.out)
		}
		// A late answer writes nothing.
		h.done(&Result{Job: Job{Kind: JobHealth, Route: "__heartbeat__"}})
		if len(h.out) != 0 {
			t.Fatalf("late answer wrote %q", h.out)
		}
	})
	t.Run("health check shed when overloaded", func(t *testing.T) {
		h := newH(t).httpRequest(get("/health"))
		h.step(h.s.Overloaded)
		if status, _, _ := h.response(); !strings.HasPrefix(status, "HTTP/1.1 503 ") || !h.close {
			t.Fatalf("overloaded: %q", h.out)
		}
	})
	for _, req := range []string{
		get("/nope"),
		get("/push/" + strings.Repeat("ab", 16)), // never the node API
		get("/metrics"),
		"PUT /notif/" + strings.Repeat("ab", 16) + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"DELETE /notif/x/1 HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		t.Run("404 "+strings.Fields(req)[0]+" "+strings.Fields(req)[1], func(t *testing.T) {
			h := newH(t)
			h.step(h.s.Open)
			var n int
			b := []byte(req)
			h.step(func(x *Ctx) { n = h.s.Consume(x, b) })
			if n != len(b) {
				t.Fatalf("consumed %d of %d", n, len(b))
			}
			m := h.jsonResponse("404")
			if m["code"] != 404.0 || m["errno"] != 102.0 || m["error"] != "Not Found" {
				t.Fatalf("404 body %v", m)
			}
			if h.counter(`HTTP{route="not_found"}`) != 1 || h.counter("UpgradesBad") != 0 {
				t.Fatal("counted wrong")
			}
		})
	}
	t.Run("GET / without upgrade is 426", func(t *testing.T) {
		h := newH(t).httpRequest(get("/"))
		if status, _, _ := h.response(); !strings.HasPrefix(status, "HTTP/1.1 426 ") || !h.close {
			t.Fatalf("%q", h.out)
		}
		if h.counter("UpgradesBad") != 1 {
			t.Fatal("not counted as a bad upgrade")
		}
	})
	t.Run("a websocket upgrade on any path still works", func(t *testing.T) {
		h := newH(t)
		h.step(h.s.Open)
		h.feed([]byte(strings.Replace(upgradeRequest, "GET / ", "GET /__heartbeat__ ", 1)))
		if !bytes.HasPrefix(h.out, []byte("HTTP/1.1 101 ")) {
			t.Fatalf("%q", h.out)
		}
	})
	t.Run("timed like any connection", func(t *testing.T) {
		h := newH(t)
		h.step(h.s.Open)
		if h.due != h.now.Add(testConfig.HelloTimeout).UnixMilli() {
			t.Fatalf("due %d", h.due)
		}
		partial := []byte("GET /__heartbeat__ HTTP/1.1\r\nHost: x\r\n") // never finished
		h.step(func(x *Ctx) { h.s.Consume(x, partial) })
		h.now = h.now.Add(testConfig.HelloTimeout + time.Second)
		h.step(h.s.Tick)
		if !h.close {
			t.Fatal("an unfinished request outlived the hello timeout")
		}
	})
}
