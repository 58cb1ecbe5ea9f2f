package listener

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// addrConn is a net.Conn that only has a peer address.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// TestSourceOf: the per-source key is an IPv4 address (an IPv4-mapped
// IPv6 one too) or an IPv6 /64, and exempt sources are not counted.
func TestSourceOf(t *testing.T) {
	l := New(nil, Config{MaxConnsPerSource: 1, Exempt: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}})
	for peer, want := range map[string]string{
		"127.0.0.2:4000":              "127.0.0.2",
		"[::ffff:127.0.0.2]:4000":     "127.0.0.2",
		"[2001:db8:1:2:aaaa::1]:4000": "2001:db8:1:2::",
		"[2001:db8:1:2:bbbb::9]:4000": "2001:db8:1:2::",
		"[2001:db8:1:3::1]:4000":      "2001:db8:1:3::",
		"10.1.7.7:4000":               "", // exempt
		"[::ffff:10.1.0.1]:4000":      "", // exempt, mapped
		"10.2.0.1:4000":               "10.2.0.1",
		"[fe80::1%eth0]:4000":         "fe80::",
	} {
		ap := netip.MustParseAddrPort(peer)
		got, counted := l.sourceOf(addrConn{remote: net.TCPAddrFromAddrPort(ap)})
		if want == "" {
			if counted {
				t.Errorf("%s: counted as %v, want exempt", peer, got)
			}
			continue
		}
		if !counted || got != netip.MustParseAddr(want) {
			t.Errorf("%s: key %v (counted %v), want %s", peer, got, counted, want)
		}
	}
	if _, counted := New(nil, Config{}).sourceOf(addrConn{remote: &net.TCPAddr{IP: net.IPv4(1, 2, 3, 4)}}); counted {
		t.Error("counted with no per-source cap")
	}
}

// TestAbandonedBodyLingers: a request whose body the server abandons
// (AbandonBody: a body over the size limit) is answered, and the close
// after the answer lingers, so the client, still sending its body, reads
// the answer and then EOF, not a reset. (make test-stress: the deadline
// AbandonBody sets was taken for the client running out of time, the
// close did not linger, and TestPayloadSizeLimit's client got "connection
// reset by peer" for its 1 MiB body.)
func TestAbandonedBodyLingers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, Config{RequestTimeout: 10 * time.Second})
	defer l.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	go func() { // the client sends its whole body whatever happens
		client.Write([]byte("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n\r\n"))
		client.Write(make([]byte, 4<<20))
	}()
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := nc.(*Conn)
	if _, err := io.ReadFull(c, make([]byte, 1024)); err != nil {
		t.Fatalf("read the request's start: %v", err)
	}
	c.AbandonBody()
	if _, err := c.Read(make([]byte, 1024)); err == nil {
		t.Fatal("a read after AbandonBody succeeded")
	}
	const answer = "HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
	if _, err := c.Write([]byte(answer)); err != nil {
		t.Fatalf("write the answer: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Read only now, after the server's close: a reset would have
	// destroyed the answer in the client's receive buffer by now.
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil || string(got) != answer {
		t.Fatalf("the client read %q, %v; want the answer, then EOF", got, err)
	}
}
