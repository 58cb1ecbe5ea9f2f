package listener

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
)

// Sources counts the connections open from each source and caps them: a
// source is an IPv4 address, or an IPv6 /64 (one host's usual share, and
// what one subscriber gets). Exempt sources (a load balancer in front,
// whose connections all come from its addresses) are not counted. Both
// tiers' public listeners use it: the push API's through Listener, the
// websocket port's in its accept callback. The methods are safe for
// concurrent use, and on a nil *Sources (no cap: nothing counted).
//
// A source holding connections costs one map entry, at most two words
// (an IPv4 address and its count in one, the first 64 bits of an IPv6
// one and its count in two): a node whose every client comes from an
// address of its own pays that per connection.
type Sources struct {
	max    int32
	exempt []netip.Prefix

	mu sync.Mutex
	v4 map[uint32]int32
	v6 map[uint64]int32
}

// Source is what Sources counts a connection under (Sources.Of).
type Source struct {
	bits    uint64 // the IPv4 address, or the IPv6 address's first 64 bits
	v6      bool
	counted bool // false: exempt, not TCP/IP, or no cap
}

// NewSources caps the connections from one source at max, but not from
// exempt ones; max 0 caps nothing (NewSources returns nil).
func NewSources(max int, exempt []netip.Prefix) *Sources {
	if max <= 0 {
		return nil
	}
	return &Sources{max: int32(min(max, 1<<31-1)), exempt: exempt,
		v4: map[uint32]int32{}, v6: map[uint64]int32{}}
}

// Of is the source of a connection from peer (an IPv4-mapped IPv6
// address is its IPv4 one). It allocates nothing for a *net.TCPAddr.
func (s *Sources) Of(peer net.Addr) Source {
	if s == nil {
		return Source{}
	}
	var ip netip.Addr
	if ta, ok := peer.(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr()
	} else if peer != nil {
		ap, err := netip.ParseAddrPort(peer.String())
		if err != nil {
			return Source{} // not TCP/IP (a pipe in tests): nothing to count
		}
		ip = ap.Addr()
	}
	ip = ip.Unmap()
	if !ip.IsValid() {
		return Source{}
	}
	for _, p := range s.exempt {
		if p.Contains(ip) {
			return Source{}
		}
	}
	if ip.Is4() {
		b := ip.As4()
		return Source{bits: uint64(binary.BigEndian.Uint32(b[:])), counted: true}
	}
	b := ip.As16()
	return Source{bits: binary.BigEndian.Uint64(b[:8]), v6: true, counted: true}
}

// Take counts one more connection from src, unless max are open from it
// already: false then, and nothing is counted. An uncounted src is always
// taken.
func (s *Sources) Take(src Source) bool {
	if s == nil || !src.counted {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if src.v6 {
		return take(s.v6, src.bits, s.max)
	}
	return take(s.v4, uint32(src.bits), s.max)
}

// Release counts one connection from src fewer: one Take returned true
// for.
func (s *Sources) Release(src Source) {
	if s == nil || !src.counted {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if src.v6 {
		release(s.v6, src.bits)
	} else {
		release(s.v4, uint32(src.bits))
	}
}

// Open is how many connections are counted from src.
func (s *Sources) Open(src Source) int {
	if s == nil || !src.counted {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if src.v6 {
		return int(s.v6[src.bits])
	}
	return int(s.v4[uint32(src.bits)])
}

func take[K comparable](m map[K]int32, k K, max int32) bool {
	if m[k] >= max {
		return false
	}
	m[k]++
	return true
}

// release forgets a source with nothing open, so the maps hold only the
// sources of open connections.
func release[K comparable](m map[K]int32, k K) {
	if n := m[k] - 1; n > 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// Counted reports whether a cap applies to src.
func (src Source) Counted() bool { return src.counted }

// Addr is src as an address: the IPv4 address, or the IPv6 /64's first
// address; the zero Addr when src is not counted.
func (src Source) Addr() netip.Addr {
	switch {
	case !src.counted:
		return netip.Addr{}
	case src.v6:
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], src.bits)
		return netip.AddrFrom16(b)
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(src.bits))
	return netip.AddrFrom4(b)
}

// String is Addr, with "/64" for an IPv6 source (for logs).
func (src Source) String() string {
	if src.v6 {
		return src.Addr().String() + "/64"
	}
	return src.Addr().String()
}

// ParsePrefixes reads a list of exempt sources (the tiers'
// per-source-exempt): CIDR prefixes, or addresses (a prefix of one).
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR prefix", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}
