package h1

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server runs handler on 127.0.0.1 and counts the connections it was
// opened.
func server(t *testing.T, handler http.HandlerFunc) (*Client, *atomic.Int64, func(conns int, timeout time.Duration) *Client) {
	t.Helper()
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	mk := func(conns int, timeout time.Duration) *Client {
		var d net.Dialer
		return New(Config{Host: addr, Conns: conns, Timeout: timeout,
			Dial: func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }})
	}
	return mk(1, 5*time.Second), &opened, mk
}

func post(body string) *Request {
	return &Request{Method: "POST", Path: "/wpush/v2/x?y=1", Body: []byte(body),
		Header: []Header{{"TTL", "60"}, {"Content-Encoding", "aes128gcm"}}}
}

// Requests are what net/http's server reads (method, path, headers,
// body); answers' status, Location and body come back; one connection
// carries them all.
func TestRoundTripsKeepAlive(t *testing.T) {
	var mu sync.Mutex
	var got []string
	c, opened, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %s %s %s %s", r.Method, r.URL.RequestURI(), r.Header.Get("TTL"), r.Header.Get("Content-Encoding"), b))
		mu.Unlock()
		w.Header().Set("Location", "http://x/m/"+string(b))
		w.WriteHeader(201)
		io.WriteString(w, "created "+string(b))
	})
	for i := range 5 {
		body := fmt.Sprint("push", i)
		r, err := c.Do(post(body))
		if err != nil || r.Status != 201 || r.Location != "http://x/m/"+body || string(r.Body) != "created "+body {
			t.Fatalf("request %d: %+v %v", i, r, err)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential requests, want 1", n)
	}
	if len(got) != 5 || got[4] != "POST /wpush/v2/x?y=1 60 aes128gcm push4" {
		t.Errorf("server read %q", got)
	}
}

// A chunked answer is read to its end (the connection is reused after
// it), a long body kept to MaxBody; Connection: close makes the next
// request dial again.
func TestBodiesAndClose(t *testing.T) {
	c, opened, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.WriteHeader(400)
			io.WriteString(w, `{"errno":`)
			w.(http.Flusher).Flush()
			io.WriteString(w, `111}`)
		case "/long":
			w.Write(bytes.Repeat([]byte("x"), 3*MaxBody))
		case "/close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(503)
		}
	})
	for _, tc := range []struct {
		path   string
		status int
		body   string
		conns  int64
	}{
		{"/chunked", 400, `{"errno":111}`, 1},
		{"/long", 200, strings.Repeat("x", MaxBody), 1},
		{"/close", 503, "", 1},
		{"/chunked", 400, `{"errno":111}`, 2},
	} {
		r, err := c.Do(&Request{Method: "GET", Path: tc.path})
		if err != nil || r.Status != tc.status || string(r.Body) != tc.body {
			t.Fatalf("%s: status %d, %d bytes %.20q, %v", tc.path, r.Status, len(r.Body), r.Body, err)
		}
		if n := opened.Load(); n != tc.conns {
			t.Fatalf("after %s: %d connections, want %d", tc.path, n, tc.conns)
		}
	}
}

// Concurrent requests share at most Conns connections, each answered.
func TestConnsBound(t *testing.T) {
	_, opened, mk := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	c := mk(4, 10*time.Second)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprint(i)
			if r, err := c.Do(post(body)); err != nil || r.Status != 200 || string(r.Body) != body {
				bad.Add(1)
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 || opened.Load() > 4 {
		t.Errorf("%d bad answers, %d connections (at most 4)", bad.Load(), opened.Load())
	}
}

// A server that does not answer in time costs the request a timeout and
// the connection; the slot is free again for the next request.
func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	var n atomic.Int64
	_, opened, mk := server(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-release
		}
		w.WriteHeader(204)
	})
	t.Cleanup(func() { close(release) }) // before the server's Close, which waits for its handlers
	c := mk(1, 300*time.Millisecond)
	_, err := c.Do(post("slow"))
	var ne net.Error
	if err == nil || !(errorsAs(err, &ne) && ne.Timeout()) {
		t.Fatalf("a request the server sat on: %v, want a timeout", err)
	}
	if r, err := c.Do(post("next")); err != nil || r.Status != 204 || opened.Load() != 2 {
		t.Fatalf("the next request: %+v %v, %d connections (want a new one)", r, err, opened.Load())
	}
}

func errorsAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	*target = ne
	return ok
}

// A connection the server closes mid-answer is an error, not an answer.
func TestTruncatedAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		bufio.NewReader(nc).ReadString('\n')
		io.WriteString(nc, "HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\nshort")
		nc.Close()
	}()
	var d net.Dialer
	c := New(Config{Host: "h", Conns: 1, Timeout: 5 * time.Second,
		Dial: func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", ln.Addr().String()) }})
	if r, err := c.Do(post("x")); err == nil {
		t.Fatalf("a truncated answer read as %+v", r)
	}
}

func FuzzReadResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 201 Created\r\nLocation: /m/1\r\nContent-Length: 2\r\n\r\nok"))
	f.Add([]byte("HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 200 OK\r\n\r\nrest"))
	f.Add([]byte("HTTP/1.1 2x1 No\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, _, err := readResponse(bufio.NewReader(bytes.NewReader(in)), false)
		if err == nil && (len(r.Body) > MaxBody || r.Status < 0 || r.Status > 999) {
			t.Fatalf("%+v from %q", r, in)
		}
	})
}
