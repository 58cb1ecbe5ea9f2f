package stack_test

import "testing"

// hertz is the HTTP server framework of the endpoint tier.
const hertz = "github.com/cloudwego/hertz"

// TestClientsLinkNoHertz: the tools and the load tester are clients of
// the service, binaries included (pushsend, loadtest), so they link no
// HTTP server framework: a wire type they share with the endpoint tier
// lives in a package without it (internal/receiptwire), not in the tier's
// handler package. Beside TestLayers, whose rules leave binaries out.
func TestClientsLinkNoHertz(t *testing.T) {
	g := graph(t)
	clients := 0
	for pkg, info := range g {
		if !underAny(pkg, "tools", "loadtest") || testHelper(pkg) {
			continue
		}
		clients++
		for _, d := range info.deps {
			if under(d, hertz) {
				t.Errorf("%s links %s: the tools and the load tester link no Hertz", pkg, d)
				break
			}
		}
	}
	if !isModule(g, "tools/cmd/pushsend") || !isModule(g, "loadtest/cmd/loadtest") || clients < 10 {
		t.Fatalf("%d tool and load tester packages found, pushsend and loadtest among them?: the rule checks nothing", clients)
	}
}
