package listener

import (
	"net"
	"net/netip"
	"testing"
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
