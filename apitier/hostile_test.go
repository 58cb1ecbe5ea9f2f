package apitier

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
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
	c.RequestTimeout = 300 * time.Millisecond
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
	metric := func(name string) float64 { return seriesValue(t, s, name) }
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

// TestBroadcastRouteHardened: the publish route is behind the same guard
// as the push route: a version body that stalls gets 408 at
// request-timeout, an incomplete one 400, one too long or sent without a
// valid token is refused (the connection closes), and nothing of them is
// stored; a whole chunked version is taken.
func TestBroadcastRouteHardened(t *testing.T) {
	const tok = "hostile-test-publisher"
	store := newStore(t)
	s := startServer(t, store, func(c *Config) {
		quick(c)
		c.BroadcastTokens = []string{tok}
	})
	head := func(auth, extra string) string {
		return "PUT /v1/broadcasts/probe/hostile HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + auth + "\r\n" + extra
	}
	for name, tc := range map[string]struct {
		sent     string
		halfShut bool
		status   int
	}{
		"mid-body":            {head(tok, "Content-Length: 100\r\n\r\n\"v1"), false, http.StatusRequestTimeout},
		"mid-chunk":           {head(tok, "Transfer-Encoding: chunked\r\n\r\n10\r\n\"v1"), false, http.StatusRequestTimeout},
		"incomplete chunked":  {head(tok, "Transfer-Encoding: chunked\r\n\r\n3\r\n\"v1\r\n"), true, http.StatusBadRequest},
		"too long, announced": {head(tok, "Content-Length: 1000000\r\n\r\n"), false, http.StatusBadRequest},
		"too long, chunked":   {head(tok, "Transfer-Encoding: chunked\r\n\r\n200\r\n"+strings.Repeat("v", 512)+"\r\n"), false, http.StatusBadRequest},
		"no token":            {head("wrong-token-0123456789", "Content-Length: 4\r\n\r\n\"v1\""), false, http.StatusUnauthorized},
		// The node reads a body of up to the largest any route takes
		// before routing it: one announced and never sent is a request
		// that never arrived.
		"no token, body never sent": {head("wrong-token-0123456789", "Content-Length: 100\r\n\r\n"), false, http.StatusRequestTimeout},
	} {
		t.Run(name, func(t *testing.T) {
			c := apitiertest.Dial(t, s.Addr())
			c.Write(tc.sent)
			if tc.halfShut {
				c.CloseWrite()
			}
			a := c.Answer()
			if tc.status == http.StatusUnauthorized {
				apitiertest.WantError(t, a, tc.status, errno.InvalidAuth)
			} else {
				wantJSONError(t, a, tc.status)
			}
			c.WantClosed()
		})
	}
	if all, err := store.Broadcasts(t.Context()); err != nil || len(all) != 0 {
		t.Fatalf("stored %v (%v) from versions that never arrived whole", all, err)
	}
	c := apitiertest.Dial(t, s.Addr())
	c.Write(head(tok, "Transfer-Encoding: chunked\r\n\r\n3\r\n\"v1\r\n1\r\n\"\r\n0\r\n\r\n"))
	if a := c.Answer(); a.Status != http.StatusCreated {
		t.Fatalf("a whole chunked version: %d %s", a.Status, a.Body)
	}
	if all, err := store.Broadcasts(t.Context()); err != nil || all["probe/hostile"] != `"v1"` {
		t.Fatalf("stored %v (%v), want probe/hostile at \"v1\"", all, err)
	}
}

// TestRequestTimeoutFromFirstByte: however a client stalls, the node
// closes the connection request-timeout after the request's first byte
// (after accept for the first request), not later: measured from the
// client's side, each stalled connection gets its 408 and is closed no
// sooner than the timeout and within a second of it. A header followed
// by nothing used to get header-timeout and body-timeout in turn (their
// sum); a keep-alive request whose first bytes came slowly got the
// timeout again from its fourth byte (Hertz's own deadline).
func TestRequestTimeoutFromFirstByte(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	s := startServer(t, newStore(t), func(c *Config) { c.RequestTimeout = timeout })
	u := subscribe(t, s, "", nil)
	ka := "GET /status HTTP/1.1\r\nHost: x\r\n\r\n"
	for name, tc := range map[string]struct {
		first string // answered before the stalled request starts
		sent  string // sent at once
		drip  string // then one byte every 450 ms
	}{
		"nothing":                {},
		"mid-header":             {sent: pushHead(u.path) + "Content-Le"},
		"header, no body":        {sent: pushHead(u.path, "Content-Length: 100\r\n\r\n")},
		"header and 1 byte":      {sent: pushHead(u.path, "Content-Length: 100\r\n\r\n0")},
		"mid-body":               {sent: pushHead(u.path, "Content-Length: 100\r\n\r\n0123456789")},
		"mid-chunk":              {sent: pushHead(u.path, "Transfer-Encoding: chunked\r\n\r\n10\r\n01234567")},
		"header, 1 byte/450ms":   {drip: pushHead(u.path, "Content-Length: 100\r\n\r\n")},
		"body, 1 byte/450ms":     {sent: pushHead(u.path, "Content-Length: 100\r\n\r\n"), drip: strings.Repeat("b", 100)},
		"keep-alive, no body":    {first: ka, sent: pushHead(u.path, "Content-Length: 100\r\n\r\n")},
		"keep-alive, 1 byte/450": {first: ka, drip: ka},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", s.Addr())
			et.Must(t, err, "dial")
			defer c.Close()
			br := bufio.NewReader(c)
			c.SetReadDeadline(time.Now().Add(apitiertest.RawWait))
			if tc.first != "" {
				io.WriteString(c, tc.first)
				resp, err := http.ReadResponse(br, nil)
				et.Must(t, err, "first answer")
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			start := time.Now() // the stalled request's first byte, or accept
			io.WriteString(c, tc.sent)
			go func() {
				for i := range len(tc.drip) {
					if _, err := io.WriteString(c, tc.drip[i:i+1]); err != nil {
						return // closed by the node, or by the test's end
					}
					time.Sleep(450 * time.Millisecond) // the client's pace, not a wait for the node
				}
			}()
			got, err := io.ReadAll(br)
			took := time.Since(start)
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("after %v: %v", took, err)
			}
			if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 408 ")) {
				t.Fatalf("answer %q, want 408", got)
			}
			if took < timeout-50*time.Millisecond || took > timeout+time.Second {
				t.Fatalf("closed %v after the request's first byte, want %v (+1s)", took.Round(time.Millisecond), timeout)
			}
		})
	}
}

// TestPerSourceCap: a source address holding max-connections-per-source
// stalled connections gets 503 (JSON, Retry-After) for each further one,
// counted apart from max-connections' refusals, while other sources are
// served: without the cap the hog would take all of max-connections and
// every other client would get 503. A source in per-source-exempt is not
// capped. Sources are loopback addresses (127.0.0.x), as the load tester
// uses them.
func TestPerSourceCap(t *testing.T) {
	const total, perSource = 10, 4
	s := startServer(t, newStore(t), func(c *Config) {
		c.MaxConnections, c.MaxConnectionsPerSource = total, perSource
		c.PerSourceExempt = []string{"127.0.0.9/32"}
		c.RequestTimeout = time.Minute // the hog's stalls outlast the test
	})
	u := subscribe(t, s, "", nil)
	metric := func(name string) float64 { return seriesValue(t, s, name) }
	stall := pushHead(u.path) + "Content-Le"
	for range perSource {
		apitiertest.DialFrom(t, s.Addr(), "127.0.0.2").Write(stall)
	}
	et.Eventually(t, 10*time.Second, "the hog's connections open", func() bool { return metric(mConnections) == perSource })
	for range total {
		over := apitiertest.DialFrom(t, s.Addr(), "127.0.0.2")
		over.Write(stall)
		a := over.Answer()
		wantJSONError(t, a, http.StatusServiceUnavailable)
		if a.Header.Get("Retry-After") == "" || !bytes.Contains(a.Body, []byte("from this address")) {
			t.Fatalf("refusal %s (Retry-After %q)", a.Body, a.Header.Get("Retry-After"))
		}
		over.WantClosed()
	}
	if got, all := metric(mConnsRefusedSource), metric(mConnsRefused); got != total || all != 0 {
		t.Fatalf("%s = %v, %s = %v; want %d, 0", mConnsRefusedSource, got, mConnsRefused, all, total)
	}
	// Every other source is served, up to max-connections in all.
	for i := range total - perSource {
		c := apitiertest.DialFrom(t, s.Addr(), "127.0.0."+strconv.Itoa(3+i))
		c.Write(pushHead(u.path, "Connection: close\r\nContent-Length: 4\r\n\r\nabcd"))
		wantCreated(t, s, fromRaw(c.Answer()), "60")
		c.WantClosed()
	}
	et.Eventually(t, 10*time.Second, "only the hog's connections open", func() bool { return metric(mConnections) == perSource })
	// An exempt source holds more than the per-source cap.
	for range perSource + 1 {
		c := apitiertest.DialFrom(t, s.Addr(), "127.0.0.9")
		c.Write("GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
		if a := c.Answer(); a.Status != http.StatusOK {
			t.Fatalf("exempt source: %d %s", a.Status, a.Body)
		}
	}
}

// seriesValue is one series of the node's metrics (0 when absent).
func seriesValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	var b bytes.Buffer
	s.metrics.set.WritePrometheus(&b)
	m, err := promtext.Parse(&b)
	et.Must(t, err, "parse metrics")
	return m[name]
}
