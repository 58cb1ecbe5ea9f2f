package listener

import (
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
)

// TestSourceOf: the per-source key is an IPv4 address (an IPv4-mapped
// IPv6 one too) or an IPv6 /64, and exempt sources are not counted.
func TestSourceOf(t *testing.T) {
	s := NewSources(1, []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")})
	for peer, want := range map[string]string{
		"127.0.0.2:4000":              "127.0.0.2",
		"[::ffff:127.0.0.2]:4000":     "127.0.0.2",
		"[2001:db8:1:2:aaaa::1]:4000": "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb::9]:4000": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:4000":      "2001:db8:1:3::/64",
		"10.1.7.7:4000":               "", // exempt
		"[::ffff:10.1.0.1]:4000":      "", // exempt, mapped
		"10.2.0.1:4000":               "10.2.0.1",
		"[fe80::1%eth0]:4000":         "fe80::/64",
	} {
		ap := netip.MustParseAddrPort(peer)
		for _, addr := range []net.Addr{net.TCPAddrFromAddrPort(ap), otherAddr(peer)} {
			src := s.Of(addr)
			if want == "" {
				if src.Counted() {
					t.Errorf("%s (%T): counted as %v, want exempt", peer, addr, src)
				}
				continue
			}
			if !src.Counted() || src.String() != want {
				t.Errorf("%s (%T): key %v (counted %v), want %s", peer, addr, src, src.Counted(), want)
			}
		}
	}
	if src := (*Sources)(nil).Of(&net.TCPAddr{IP: net.IPv4(1, 2, 3, 4)}); src.Counted() {
		t.Error("counted with no per-source cap")
	}
	if NewSources(0, nil) != nil {
		t.Error("a cap of 0 made a counter")
	}
	if src := s.Of(otherAddr("pipe")); src.Counted() {
		t.Error("a peer that is not TCP/IP counted")
	}
}

// otherAddr is a peer address that is not a *net.TCPAddr.
type otherAddr string

func (a otherAddr) Network() string { return "other" }
func (a otherAddr) String() string  { return string(a) }

// TestSourcesCap: a source holds at most the cap, another source and an
// IPv6 /64 are counted apart, and a release frees a place; sources with
// nothing open are forgotten.
func TestSourcesCap(t *testing.T) {
	s := NewSources(2, nil)
	of := func(a string) Source { return s.Of(net.TCPAddrFromAddrPort(netip.MustParseAddrPort(a))) }
	a, b := of("192.0.2.1:1"), of("192.0.2.2:1")
	v6a, v6b := of("[2001:db8::1]:1"), of("[2001:db8::2]:1")
	for i, want := range []bool{true, true, false} {
		if got := s.Take(a); got != want {
			t.Fatalf("take %d from a: %v, want %v", i+1, got, want)
		}
	}
	if !s.Take(b) || !s.Take(v6a) || !s.Take(v6b) || s.Take(v6a) {
		t.Fatal("b, or the /64's first two, refused; or its third taken")
	}
	s.Release(a)
	if s.Open(a) != 1 || !s.Take(a) {
		t.Fatal("a released place not taken again")
	}
	for _, src := range []Source{a, a, b, v6a, v6b} {
		s.Release(src)
	}
	if len(s.v4) != 0 || len(s.v6) != 0 {
		t.Errorf("sources with nothing open kept: %v %v", s.v4, s.v6)
	}
}

// TestParsePrefixes: addresses and prefixes, masked; an IPv4-mapped
// address is its IPv4 one; anything else is named in the error.
func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes([]string{"10.0.0.0/8", " 192.0.2.7/24", "::ffff:127.0.0.1", "2001:db8::1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.0/24", "127.0.0.1/32", "2001:db8::1/128"}
	for i := range want {
		if i >= len(got) || got[i].String() != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
	if _, err := ParsePrefixes([]string{"10.0.0.0/8", "lb.internal"}); err == nil || !strings.Contains(err.Error(), `"lb.internal"`) {
		t.Errorf("a name: %v", err)
	}
}

// BenchmarkSources is the accept path's take and the close's release,
// and what a source holding connections costs (B/source: heap growth
// with 10,000 distinct sources, each holding one; docs/engine.md).
func BenchmarkSources(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		name := map[bool]string{false: "ipv4", true: "ipv6"}[v6]
		b.Run(name, func(b *testing.B) {
			const n = 10000
			peers := make([]net.Addr, n)
			for i := range peers {
				ip := net.IPv4(10, byte(i>>16), byte(i>>8), byte(i))
				if v6 {
					ip = net.IP{0x20, 1, 0xd, 0xb8, 0, byte(i >> 16), byte(i >> 8), byte(i), 0, 0, 0, 0, 0, 0, 0, 1}
				}
				peers[i] = &net.TCPAddr{IP: ip, Port: 40000}
			}
			s := NewSources(1024, nil)
			before := heapInUse()
			for _, p := range peers {
				s.Take(s.Of(p))
			}
			perSource := float64(heapInUse()-before) / n
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				src := s.Of(peers[i%n])
				s.Release(src)
				s.Take(src)
			}
			b.ReportMetric(perSource, "B/source")
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
