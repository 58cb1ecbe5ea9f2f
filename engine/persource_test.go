package engine_test

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
)

// refusedFrom opens a TCP connection from src, sends a websocket
// handshake and returns everything the node wrote before it closed. A
// reset after it is no failure: a handshake that arrives after the node
// closed (it refuses at accept, before reading) is answered with one.
func refusedFrom(t *testing.T, addr, src string) string {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("connect from %s: %v", src, err)
	}
	defer conn.Close()
	conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"))
	conn.SetReadDeadline(time.Now().Add(et.Patience))
	b, err := io.ReadAll(conn)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("refused connection from %s: %v after %q", src, err, b)
	}
	return string(b)
}

// TestPerSourceCap: a source holds at most max-connections-per-source on
// the websocket port; the next connection from it is answered 503 and
// closed at accept, and counted. Another source still connects and gets
// its pushes, an exempt source is not capped, and a connection that
// closes frees its source's place.
func TestPerSourceCap(t *testing.T) {
	const perSource = 50
	srv, _ := node(t, func(c *engine.Config) {
		c.MaxConnectionsPerSource = perSource
		c.PerSourceExempt = []string{"127.0.0.9"}
	})
	const capped = "127.0.0.3"
	held := make([]*et.Client, perSource)
	for i := range held {
		held[i] = et.DialFrom(t, srv.Addr(), capped)
	}
	const over = 20
	for i := range over {
		if got := refusedFrom(t, srv.Addr(), capped); !strings.HasPrefix(got, "HTTP/1.1 503 ") ||
			!strings.Contains(got, "Retry-After: 30\r\n") || !strings.HasSuffix(got, "too many connections from this address\n") {
			t.Fatalf("connection %d over the cap got %q", perSource+i+1, got)
		}
	}
	if v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_connections_refused_per_source_total"); v != over {
		t.Errorf("refused per source: %v, want %d", v, over)
	}
	if v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_connections"); v != perSource {
		t.Errorf("connections: %v, want the %d held", v, perSource)
	}

	// Another source is not affected: it connects, and a push reaches it.
	other := et.DialFrom(t, srv.Addr(), "127.0.0.2")
	uaid := other.Hello("")
	chid := uuid.NewString()
	if r := other.Register(chid, ""); r["status"] != 200.0 {
		t.Fatalf("register from another source: %v", r)
	}
	if code := et.Push(t, srv, uaid, et.Notification(chid, "v1", ""), ""); code != 200 {
		t.Fatalf("push to the other source's client: %d", code)
	}
	wantNotification(t, other, chid, "v1", "")

	// The capped source's connections work too: the cap refuses only
	// what is over it.
	held[0].Hello("")

	// An exempt source holds more than the cap.
	for range perSource + 10 {
		et.DialFrom(t, srv.Addr(), "127.0.0.9")
	}

	// A closed connection frees its place: once the node has seen it
	// close, the source connects again.
	before, _ := et.Metric(t, srv.NodeURL(), "autoconnect_connections")
	held[1].Close()
	et.Eventually(t, 10*time.Second, "the node to see the close", func() bool {
		v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_connections")
		return v == before-1
	})
	again := et.DialFrom(t, srv.Addr(), capped)
	again.Hello("")
	if got := refusedFrom(t, srv.Addr(), capped); !strings.HasPrefix(got, "HTTP/1.1 503 ") {
		t.Fatalf("over the cap again: %q", got)
	}
	if v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_connections_refused_per_source_total"); v != over+1 {
		t.Errorf("refused per source: %v, want %d (the exempt source refused?)", v, over+1)
	}
}

// TestMaxConnectionsAtAccept: at max-connections the node refuses the
// next connection as it is accepted (503 "server busy", before it sends
// anything), so connections that never upgrade cannot take more
// descriptors than the cap; one closing frees a place.
func TestMaxConnectionsAtAccept(t *testing.T) {
	const maxConns = 5
	srv, _ := node(t, func(c *engine.Config) { c.MaxConnections = maxConns })
	var silent []net.Conn
	for range maxConns {
		c, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	et.Eventually(t, et.Patience, "the silent connections counted", func() bool {
		v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_connections")
		return v == maxConns
	})
	over, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(et.Patience))
	b, err := io.ReadAll(over) // it sends nothing: the node answers first
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection over the cap: %v after %q", err, b)
	}
	if got := string(b); !strings.HasPrefix(got, "HTTP/1.1 503 ") || !strings.HasSuffix(got, "server busy\n") {
		t.Fatalf("connection over the cap got %q, want 503 server busy", got)
	}
	if v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_connections_refused_total"); v != 1 {
		t.Errorf("refused at max-connections: %v, want 1", v)
	}
	silent[0].Close()
	et.Eventually(t, et.Patience, "a place freed by a close", func() bool {
		v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_connections")
		return v == maxConns-1
	})
	et.Dial(t, srv.Addr()).Hello("")
}
