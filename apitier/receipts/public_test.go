package receipts

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// TestNotPublic: every special-purpose range that is not globally
// reachable, in IPv4 and IPv6, and the IPv4 ones again as IPv4-mapped,
// NAT64 and 6to4 addresses, is refused by the dialer's check, naming the
// range; public addresses beside each range pass. A webhook URL holding
// such an address is refused when it is created.
func TestNotPublic(t *testing.T) {
	refused := map[string]string{
		"0.0.0.0":                              "0.0.0.0/8",
		"0.1.2.3":                              "0.0.0.0/8",
		"10.1.2.3":                             "10.0.0.0/8",
		"100.64.0.1":                           "100.64.0.0/10",
		"100.127.255.254":                      "100.64.0.0/10",
		"127.0.0.1":                            "127.0.0.0/8",
		"127.255.0.9":                          "127.0.0.0/8",
		"169.254.169.254":                      "169.254.0.0/16",
		"172.16.0.1":                           "172.16.0.0/12",
		"172.31.255.254":                       "172.16.0.0/12",
		"192.0.0.1":                            "192.0.0.0/24",
		"192.0.0.9":                            "192.0.0.0/24",
		"192.0.0.170":                          "192.0.0.0/24",
		"192.0.2.10":                           "192.0.2.0/24",
		"192.88.99.1":                          "192.88.99.0/24",
		"192.168.1.1":                          "192.168.0.0/16",
		"198.18.0.1":                           "198.18.0.0/15",
		"198.19.255.254":                       "198.18.0.0/15",
		"198.51.100.7":                         "198.51.100.0/24",
		"203.0.113.9":                          "203.0.113.0/24",
		"224.0.0.1":                            "224.0.0.0/4",
		"239.255.255.250":                      "224.0.0.0/4",
		"240.0.0.1":                            "240.0.0.0/4",
		"255.255.255.255":                      "240.0.0.0/4",
		"::":                                   "::/128",
		"::1":                                  "::1/128",
		"::ffff:10.0.0.1":                      "10.0.0.0/8",
		"::ffff:127.0.0.1":                     "127.0.0.0/8",
		"::ffff:100.64.0.1":                    "100.64.0.0/10",
		"::ffff:169.254.169.254":               "169.254.0.0/16",
		"::10.0.0.1":                           "2000::/3", // IPv4-compatible, deprecated
		"64:ff9b::10.0.0.1":                    "10.0.0.0/8",
		"64:ff9b::127.0.0.1":                   "127.0.0.0/8",
		"64:ff9b::198.18.0.1":                  "198.18.0.0/15",
		"64:ff9b::169.254.169.254":             "169.254.0.0/16",
		"64:ff9b:1::8.8.8.8":                   "64:ff9b:1::/48",
		"100::1":                               "100::/64",
		"2001::1":                              "2001::/23", // Teredo
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": "2001::/23",
		"2001:2::1":                            "2001::/23", // benchmarking
		"2001:10::1":                           "2001::/23", // ORCHID
		"2001:db8::1":                          "2001:db8::/32",
		"2001:db8:ffff::1":                     "2001:db8::/32",
		"2002:a00:1::1":                        "10.0.0.0/8", // 6to4 of 10.0.0.1
		"2002:7f00:1::1":                       "127.0.0.0/8",
		"2002:c0a8:101::1":                     "192.168.0.0/16",
		"3fff::1":                              "3fff::/20",
		"4000::1":                              "2000::/3",
		"5f00::1":                              "5f00::/16",
		"fc00::1":                              "fc00::/7",
		"fd12:3456::1":                         "fc00::/7",
		"fe80::1":                              "fe80::/10",
		"fe80::1%eth0":                         "fe80::/10",
		"fec0::1":                              "fec0::/10",
		"ff02::1":                              "ff00::/8",
		"ff0e::1":                              "ff00::/8",
	}
	public := []string{
		"1.1.1.1", "8.8.8.8", "9.9.9.9", "1.0.0.0", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255",
		"128.0.0.0", "169.253.255.255", "172.15.255.255", "172.32.0.0", "192.0.1.1", "192.0.3.0", "192.31.196.1",
		"192.52.193.1", "192.88.98.255", "192.167.255.255", "192.169.0.0", "192.175.48.1", "198.17.255.255",
		"198.20.0.0", "198.51.99.255", "198.51.101.0", "203.0.112.255", "203.0.114.0", "223.255.255.255",
		"::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1", "2001:4860:4860::8888", "2606:4700:4700::1111",
		"2001:200::1", "2001:db7:ffff::1", "2001:db9::1", "2620:4f:8000::1", "3ffe:ffff::1", "2a00:1450::1",
	}
	for addr, rng := range refused {
		why := notPublic(netip.MustParseAddr(addr))
		if !strings.Contains(why, rng) {
			t.Errorf("%s: %q, want it refused as in %s", addr, why, rng)
		}
		err := dialPublic("tcp", net.JoinHostPort(addr, "443"), nil)
		if !errors.Is(err, errNotPublic) {
			t.Errorf("%s: the dialer's check said %v", addr, err)
		}
	}
	for _, addr := range public {
		if why := notPublic(netip.MustParseAddr(addr)); why != "" {
			t.Errorf("%s: refused (%s), want it public", addr, why)
		}
		if err := dialPublic("tcp", net.JoinHostPort(addr, "443"), nil); err != nil {
			t.Errorf("%s: the dialer's check said %v", addr, err)
		}
	}

	strict := New(Config{Enabled: true, Webhooks: true}, nil, nil, nil)
	insecure := New(Config{Enabled: true, Webhooks: true, WebhookInsecure: true}, nil, nil, nil)
	for _, u := range []string{"https://100.64.0.1/r", "https://[fd00::1]:8443/r", "https://[::ffff:10.0.0.1]/r",
		"https://198.18.0.1/r", "https://0.0.0.0/"} {
		if err := strict.checkWebhook(u); err == nil || !strings.Contains(err.Error(), "not public") {
			t.Errorf("webhook %s: %v, want it refused as not public", u, err)
		}
		if err := insecure.checkWebhook(u); err != nil {
			t.Errorf("webhook %s with receipt-webhook-insecure: %v", u, err)
		}
	}
	for _, u := range []string{"https://8.8.8.8/r", "https://[2606:4700::1]/r", "https://receipts.example/r"} {
		if err := strict.checkWebhook(u); err != nil {
			t.Errorf("webhook %s: %v", u, err)
		}
	}
}
