package receipts

import (
	"fmt"
	"net/netip"
)

// special is a range no webhook is called on, and why.
type special struct {
	prefix netip.Prefix
	what   string
}

func ranges(list ...string) []special {
	out := make([]special, 0, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		out = append(out, special{netip.MustParsePrefix(list[i]), list[i+1]})
	}
	return out
}

// notPublic4: every range of the IANA IPv4 Special-Purpose Address
// Registry that is not globally reachable (192.0.0.0/24 whole: its two
// anycast exceptions serve no webhook), the deprecated 6to4 relay
// anycast, multicast and the reserved class E with the limited broadcast.
var notPublic4 = ranges(
	"0.0.0.0/8", "this network",
	"10.0.0.0/8", "private",
	"100.64.0.0/10", "shared (carrier-grade NAT)",
	"127.0.0.0/8", "loopback",
	"169.254.0.0/16", "link-local",
	"172.16.0.0/12", "private",
	"192.0.0.0/24", "IETF protocol assignments",
	"192.0.2.0/24", "documentation (TEST-NET-1)",
	"192.88.99.0/24", "6to4 relay anycast (deprecated)",
	"192.168.0.0/16", "private",
	"198.18.0.0/15", "benchmarking",
	"198.51.100.0/24", "documentation (TEST-NET-2)",
	"203.0.113.0/24", "documentation (TEST-NET-3)",
	"224.0.0.0/4", "multicast",
	"240.0.0.0/4", "reserved (and the limited broadcast)",
)

// IPv6: only the global unicast space, 2000::/3, less its ranges of the
// IANA IPv6 Special-Purpose Address Registry that are not globally
// reachable (2001::/23 whole, Teredo included: its globally reachable
// exceptions are anycast and identifier ranges that serve no webhook),
// and a 6to4 or NAT64 address whose IPv4 address is not public.
var (
	global6     = netip.MustParsePrefix("2000::/3")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	notPublic6  = ranges("2001::/23", "IETF protocol assignments (Teredo, benchmarking, ORCHID)", "2001:db8::/32", "documentation", "3fff::/20", "documentation")
	outside6Why = ranges("::/128", "unspecified", "::1/128", "loopback", "64:ff9b:1::/48", "local-use IPv4/IPv6 translation",
		"100::/64", "discard-only", "5f00::/16", "segment routing", "fc00::/7", "unique local", "fe80::/10", "link-local",
		"fec0::/10", "site-local (deprecated)", "ff00::/8", "multicast")
)

// notPublic says why a is not an address a webhook may be called on, ""
// when it may be. An IPv4-mapped IPv6 address is its IPv4 address; a
// NAT64 (64:ff9b::/96) or 6to4 (2002::/16) one is judged by the IPv4
// address it carries.
func notPublic(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is4() {
		for _, r := range notPublic4 {
			if r.prefix.Contains(a) {
				return fmt.Sprintf("%s is in %s (%s)", a, r.prefix, r.what)
			}
		}
		return ""
	}
	b := a.As16()
	var carried netip.Addr
	switch {
	case nat64.Contains(a):
		carried = netip.AddrFrom4([4]byte(b[12:16]))
	case sixToFour.Contains(a):
		carried = netip.AddrFrom4([4]byte(b[2:6]))
	case !global6.Contains(a):
		for _, r := range outside6Why {
			if r.prefix.Contains(a) {
				return fmt.Sprintf("%s is in %s (%s)", a, r.prefix, r.what)
			}
		}
		return fmt.Sprintf("%s is outside %s (not global unicast)", a, global6)
	}
	if carried.IsValid() {
		if why := notPublic(carried); why != "" {
			return fmt.Sprintf("%s carries %s", a, why)
		}
		return ""
	}
	for _, r := range notPublic6 {
		if r.prefix.Contains(a) {
			return fmt.Sprintf("%s is in %s (%s)", a, r.prefix, r.what)
		}
	}
	return ""
}
