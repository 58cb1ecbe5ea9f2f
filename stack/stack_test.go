package stack_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/engine"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage/embedded"
)

var quiet = slog.New(slog.DiscardHandler)

func TestConfigValidate(t *testing.T) {
	good := stack.DefaultConfig()
	good.CryptoKey = et.TestKey
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults with a key: %v", err)
	}
	for name, c := range map[string]struct {
		mutate func(*stack.Config)
		want   string
	}{
		"no key":               {func(c *stack.Config) { c.CryptoKey = "" }, "crypto-key is required"},
		"no websocket address": {func(c *stack.Config) { c.WSListen = "" }, "listen"},
		"no HTTP address":      {func(c *stack.Config) { c.HTTPListen = "" }, "listen is required"},
		"HTTP port 0":          {func(c *stack.Config) { c.HTTPListen = "127.0.0.1:0" }, "names no port"},
		"shared listener":      {func(c *stack.Config) { c.NodeListen = c.WSListen }, "must not share"},
		"a tier's own check":   {func(c *stack.Config) { c.API.MaxDataBytes = 0 }, "max-data-bytes"},
	} {
		cfg := good
		c.mutate(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", name, err, c.want)
			continue
		}
		store, _ := embedded.Open(embedded.Config{Dir: t.TempDir()})
		if _, nerr := stack.New(cfg, store, quiet); nerr == nil || nerr.Error() != err.Error() {
			t.Errorf("%s: New said %v, Validate %v", name, nerr, err)
		}
		store.Close()
	}
	// A key that does not parse is New's to find.
	cfg := good
	cfg.CryptoKey = "nope"
	store, _ := embedded.Open(embedded.Config{Dir: t.TempDir()})
	defer store.Close()
	if _, err := stack.New(cfg, store, quiet); err == nil || !strings.Contains(err.Error(), "crypto-key") {
		t.Errorf("a bad key: %v", err)
	}
	// With an endpoint URL, the HTTP port may be picked at listen time.
	cfg = good
	cfg.HTTPListen, cfg.EndpointURL = "127.0.0.1:0", "https://push.example.com"
	if err := cfg.Validate(); err != nil {
		t.Errorf("port 0 behind an endpoint URL: %v", err)
	}
}

// TestWiring: endpoints are minted under the endpoint URL (by default the
// HTTP address), router records name the node API, and a push goes
// through.
func TestWiring(t *testing.T) {
	st := stacktest.Start(t)
	if want := "http://" + st.HTTPAddr(); st.EndpointURL() != want {
		t.Fatalf("endpoint URL %s, want %s", st.EndpointURL(), want)
	}
	if want := "http://" + st.NodeAddr(); st.NodeURL() != want {
		t.Fatalf("node URL %s, want %s", st.NodeURL(), want)
	}
	sub := st.Subscribe(t, "") // checks the endpoint is under the endpoint URL
	if node := st.NodeID(t, sub.UAID); node != st.NodeURL() {
		t.Fatalf("router record names %q, want %s", node, st.NodeURL())
	}
	if r := st.Push(t, sub.Endpoint, sub, "wired", nil); r.Status != 201 {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	if got := sub.Receive(t); got != "wired" {
		t.Fatalf("received %q", got)
	}
}

// TestShutdownDrains: Shutdown closes clients with 1001 and, once the
// client answers the close, stores the direct message it had not acked; a
// second call returns the first's result.
func TestShutdownDrains(t *testing.T) {
	st := stacktest.Start(t)
	sub := st.Subscribe(t, "")
	if r := st.Push(t, sub.Endpoint, sub, "unacked", nil); r.Status != 201 {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	if n := sub.Notification(t); string(n.Data) != "unacked" {
		t.Fatalf("received %q", n.Data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- st.Shutdown(ctx) }()
	if code := sub.ExpectClose(); code != ws.StatusGoingAway {
		t.Fatalf("close code %d, want 1001", code)
	}
	sub.AnswerClose() // as Firefox does: the node waits for it
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if n := len(st.Stored(t, sub.UAID)); n != 1 {
		t.Fatalf("%d messages stored by the drain, want the unacked one", n)
	}
	if err := st.Shutdown(ctx); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
}

// TestStartFailureClosesTheNode: when the API tier cannot listen, Start
// fails and the connection node it started is closed again.
func TestStartFailureClosesTheNode(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	et.Must(t, err, "listen")
	defer taken.Close()
	cfg := stacktest.Config(t)
	cfg.HTTPListen = taken.Addr().String()
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	et.Must(t, err, "open store")
	defer store.Close()
	st, err := stack.New(cfg, store, quiet)
	et.Must(t, err, "New")
	if err := st.Start(); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Start with the HTTP port taken: %v", err)
	}
	if c, err := net.Dial("tcp", st.WSAddr()); err == nil {
		c.Close()
		t.Fatalf("the websocket listener %s still accepts after a failed Start", st.WSAddr())
	}
}

// TestNodeAPINeedsTheSecret: the one-process server's node API refuses
// every caller without the node secret, loopback ones included, whether
// the notification names the user agent's channel or one it never
// registered; with no secret configured the stack makes one, which its
// own API tier uses. The tiers themselves refuse to start without one.
func TestNodeAPINeedsTheSecret(t *testing.T) {
	s := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) { c.NodeSecret = "" }})
	sub := s.Subscribe(t, "")
	nodeURL := "http://" + s.NodeAddr()
	for _, chid := range []string{sub.CHID, uuid.NewString()} {
		for _, secret := range []string{et.NoSecret, et.TestSecret, "x"} {
			if code := et.Push(t, s.Engine(), sub.UAID, et.Notification(chid, "injected", "ZGF0YQ"), secret); code != 401 {
				t.Fatalf("push with secret %q to channel %s: %d, want 401", secret, chid, code)
			}
		}
		if code := et.NodeCall(t, "DELETE", nodeURL+"/notif/"+sub.UAID+"/"+strconv.FormatInt(time.Now().UnixMilli(), 10), "", et.NoSecret); code != 401 {
			t.Fatalf("evict without the secret: %d, want 401", code)
		}
	}
	et.NothingMore(t, nodeURL, sub.Client)
	// The API tier holds the generated secret: its push is delivered.
	if r := s.Push(t, sub.Endpoint, sub, "through the API tier", nil); r.Status != 201 {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	if got := sub.Receive(t); got != "through the API tier" {
		t.Fatalf("received %q", got)
	}

	ecfg := et.Config()
	ecfg.NodeSecret = ""
	if _, err := engine.New(ecfg, nil, quiet); err == nil || !strings.Contains(err.Error(), "node-secret is required") {
		t.Fatalf("engine without a node secret: %v", err)
	}
	acfg := apitier.DefaultConfig()
	acfg.CryptoKey = et.TestKey
	if _, err := apitier.New(acfg, nil, quiet); err == nil || !strings.Contains(err.Error(), "node-secret is required") {
		t.Fatalf("apitier without a node secret: %v", err)
	}
}
