package apitier

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/promtext"
)

// Hostile clients on a real listener: every stall ends with the
// documented JSON answer and the connection closed, nothing is stored
// from a body that did not arrive whole, and every answer Hertz would
// give itself is JSON. The deadlines are short so the tests are quick;
// a server without them never answers, and the test fails at
// apitiertest.RawWait.

// quick sets short listener deadlines.
func quick(c *Config) {
	c.HeaderTimeout, c.BodyTimeout = 300*time.Millisecond, 300*time.Millisecond
}

// wantJSONError checks an answer read from a Raw connection.
func wantJSONError(t *testing.T, a apitiertest.Answer, code int) {
	t.Helper()
	apitiertest.WantError(t, a, code, errno.None)
	if a.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("Content-Type %q", a.Header.Get("Content-Type"))
	}
}

func pushHead(path string, extra ...string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: x\r\nTTL: 60\r\nContent-Encoding: aes128gcm\r\n" + strings.Join(extra, "")
}

// TestDeadlines: a request whose header, or whose body after the header,
// stops arriving gets 408 (JSON) at its deadline and is closed.
func TestDeadlines(t *testing.T) {
	s := startServer(t, newStore(t), quick)
	u := subscribe(t, s, "", nil)
	for name, sent := range map[string]string{
		"nothing":                   "",
		"half a request line":       "POST /wpu",
		"half a header":             pushHead(u.path) + "Content-Len",
		"a header without its end":  pushHead(u.path, "Content-Length: 4\r\n"),
		"keep-alive, then stalling": "GET /status HTTP/1.1\r\nHost: x\r\n\r\nGET /sta",
		"mid-body":                  pushHead(u.path, "Content-Length: 100\r\n\r\n0123456789"),
		"after the header, no body": pushHead(u.path, "Content-Length: 100\r\n\r\n"),
		"mid-chunk":                 pushHead(u.path, "Transfer-Encoding: chunked\r\n\r\n10\r\n01234567"),
		"the last chunk never sent": pushHead(u.path, "Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n"),
	} {
		t.Run(name, func(t *testing.T) {
			c := apitiertest.Dial(t, s.Addr())
			c.Write(sent)
			if strings.HasPrefix(sent, "GET /status") {
				if a := c.Answer(); a.Status != 200 {
					t.Fatalf("first request: %d %s", a.Status, a.Body)
				}
			}
			wantJSONError(t, c.Answer(), http.StatusRequestTimeout)
			c.WantClosed()
		})
	}
	if n := len(stored(t, s, u.uaid)); n != 0 {
		t.Fatalf("stored %d messages from requests that never arrived", n)
	}
}

// TestIncompleteBody: a body that ends before its end (the client
// half-closes) is refused and nothing is stored or delivered.
func TestIncompleteBody(t *testing.T) {
	s := startServer(t, newStore(t), nil)
	u := subscribe(t, s, "", nil)
	for name, sent := range map[string]string{
		"chunked without its last chunk": pushHead(u.path, "Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n"),
		"chunked, cut mid-chunk":         pushHead(u.path, "Transfer-Encoding: chunked\r\n\r\n10\r\n0123"),
		"short Content-Length":           pushHead(u.path, "Content-Length: 100\r\n\r\n0123456789"),
		"malformed chunk size":           pushHead(u.path, "Transfer-Encoding: chunked\r\n\r\nzz\r\nabcd\r\n0\r\n\r\n"),
	} {
		t.Run(name, func(t *testing.T) {
			c := apitiertest.Dial(t, s.Addr())
			c.Write(sent)
			c.CloseWrite()
			wantJSONError(t, c.Answer(), http.StatusBadRequest)
			c.WantClosed()
		})
	}
	if n := len(stored(t, s, u.uaid)); n != 0 {
		t.Fatalf("stored %d messages from incomplete bodies", n)
	}
	// The same chunked body, complete, is taken.
	c := apitiertest.Dial(t, s.Addr())
	c.Write(pushHead(u.path, "Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n"))
	wantCreated(t, s, fromRaw(c.Answer()), "60")
	if n := len(stored(t, s, u.uaid)); n != 1 {
		t.Fatalf("stored %d messages, want 1", n)
	}
}

// fromRaw makes a response of an apitiertest.Answer.
func fromRaw(a apitiertest.Answer) response {
	return response{code: a.Status, header: a.Header, body: a.Body}
}

// TestSlowBodyIsNotAStorageError: a valid body that takes longer than
// the storage timeout to arrive is taken; the storage deadline starts
// once it is in.
func TestSlowBodyIsNotAStorageError(t *testing.T) {
	s := startServer(t, newStore(t), func(c *Config) { c.StorageTimeout = 100 * time.Millisecond })
	u := subscribe(t, s, "", nil)
	c := apitiertest.Dial(t, s.Addr())
	c.Write(pushHead(u.path, "Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n"))
	time.Sleep(3 * s.cfg.StorageTimeout) // the client is slow, not the server
	c.Write("4\r\nefgh\r\n0\r\n\r\n")
	wantCreated(t, s, fromRaw(c.Answer()), "60")
}

// TestExpectContinue: an over-limit body announced with Expect:
// 100-continue is refused at once, before the client sends it.
func TestExpectContinue(t *testing.T) {
	s := startServer(t, newStore(t), nil)
	u := subscribe(t, s, "", nil)
	c := apitiertest.Dial(t, s.Addr())
	c.Write(pushHead(u.path, "Expect: 100-continue\r\nContent-Length: 10000000\r\n\r\n"))
	a := c.Answer()
	apitiertest.WantError(t, a, http.StatusRequestEntityTooLarge, errno.PayloadTooLarge)
	c.WantClosed()

	// Within the limit: 100 Continue, then the push.
	c = apitiertest.Dial(t, s.Addr())
	c.Write(pushHead(u.path, "Expect: 100-continue\r\nContent-Length: 4\r\n\r\n"))
	if a := c.Answer(); a.Status != http.StatusContinue {
		t.Fatalf("status %d, want 100", a.Status)
	}
	c.Write("abcd")
	wantCreated(t, s, fromRaw(c.Answer()), "60")
}

// TestUnreadBodyNotDrained: an answer given without reading the body
// (an error before it, or a route that takes none) closes the connection
// instead of waiting for a body the client may never send.
func TestUnreadBodyNotDrained(t *testing.T) {
	s := startServer(t, newStore(t), quick)
	for name, head := range map[string]string{
		"405":     "POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n",
		"chunked": "DELETE /m/nope HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c := apitiertest.Dial(t, s.Addr())
			c.Write(head)
			if a := c.Answer(); a.Status < 400 {
				t.Fatalf("status %d", a.Status)
			}
			c.WantClosed()
		})
	}
}

// TestHTTPErrorsAreJSON: the answers Hertz gives itself are JSON too.
func TestHTTPErrorsAreJSON(t *testing.T) {
	s := startServer(t, newStore(t), quick)
	for name, c := range map[string]struct {
		sent string
		code int
	}{
		"header too large":   {"GET /status HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 40<<10) + "\r\n\r\n", 431},
		"garbage":            {"\x16\x03\x01 not http\r\n\r\n", 400},
		"Content-Length abc": {"POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400},
		"missing Host":       {"GET /status HTTP/1.1\r\n\r\n", 400},
		"both CL and TE":     {"POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		"bad Content-Length": {"POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400},
	} {
		t.Run(name, func(t *testing.T) {
			raw := apitiertest.Dial(t, s.Addr())
			raw.Write(c.sent)
			wantJSONError(t, raw.Answer(), c.code)
			raw.WantClosed()
		})
	}
}

// TestAllow: a 405 names the methods the path takes (RFC 9110 §15.5.6).
func TestAllow(t *testing.T) {
	s := startServer(t, newStore(t), nil)
	for path, want := range map[string]string{
		"/wpush/v1/abc": "POST, OPTIONS",
		"/wpush/abc":    "POST, OPTIONS",
		"/m/abc":        "DELETE, OPTIONS",
		"/status":       "GET, OPTIONS",
		"/metrics":      "GET, OPTIONS",
	} {
		method := "PUT"
		r := send(t, s, method, path, nil)
		wantError(t, r, http.StatusMethodNotAllowed, errno.None)
		if got := r.header.Get("Allow"); got != want {
			t.Errorf("%s %s: Allow %q, want %q", method, path, got, want)
		}
	}
}

// TestConnectionCap: connections beyond max-connections get 503 JSON
// and are closed, counted; once one closes, a new one is served.
func TestConnectionCap(t *testing.T) {
	s := startServer(t, newStore(t), func(c *Config) { c.MaxConnections = 2 })
	metric := func(name string) float64 {
		var b bytes.Buffer
		s.metrics.set.WritePrometheus(&b)
		m, err := promtext.Parse(&b)
		et.Must(t, err, "parse metrics")
		return m[name]
	}
	held := []*apitiertest.Raw{apitiertest.Dial(t, s.Addr()), apitiertest.Dial(t, s.Addr())}
	et.Eventually(t, 10*time.Second, "2 connections open", func() bool { return metric(mConnections) == 2 })
	over := apitiertest.Dial(t, s.Addr())
	a := over.Answer()
	wantJSONError(t, a, http.StatusServiceUnavailable)
	if a.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	over.WantClosed()
	if got := metric(mConnsRefused); got != 1 {
		t.Fatalf("%s = %v, want 1", mConnsRefused, got)
	}
	held[0].Write("GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if a := held[0].Answer(); a.Status != 200 {
		t.Fatalf("held connection: %d", a.Status)
	}
	held[0].WantClosed()
	et.Eventually(t, 10*time.Second, "1 connection open", func() bool { return metric(mConnections) == 1 })
	next := apitiertest.Dial(t, s.Addr())
	next.Write("GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
	if a := next.Answer(); a.Status != 200 {
		t.Fatalf("after a slot freed: %d %s", a.Status, a.Body)
	}
}
