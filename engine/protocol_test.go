package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
	"github.com/gobwas/ws"
	"github.com/google/uuid"
)

func newStore(t *testing.T) storage.Store {
	t.Helper()
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func node(t *testing.T, mutate func(*engine.Config)) (*engine.Server, storage.Store) {
	t.Helper()
	store := newStore(t)
	cfg := et.Config()
	if mutate != nil {
		mutate(&cfg)
	}
	return et.Start(t, store, cfg), store
}

func parseUAID(t *testing.T, s string) [16]byte {
	t.Helper()
	u, ok := protocol.ParseUAID(s)
	if !ok || len(s) != 32 || strings.ToLower(s) != s {
		t.Fatalf("uaid %q is not 32 lower-case hex", s)
	}
	return u
}

func TestHelloAssignsAndKeepsUAID(t *testing.T) {
	srv, store := node(t, nil)
	c := et.Dial(t, srv.Addr())
	// Firefox's first hello has no uaid key at all.
	c.Send(map[string]any{"messageType": "hello", "use_webpush": true, "broadcasts": map[string]any{}})
	r := c.Read()
	if r["status"] != 200.0 || r["use_webpush"] != true || r["broadcasts"] == nil {
		t.Fatalf("hello reply %v", r)
	}
	uaid := r["uaid"].(string)
	u := parseUAID(t, uaid)
	// Its router record is written by its first register (the reference's
	// deferred user): a hello that never registers writes nothing.
	if _, err := store.GetUser(context.Background(), u); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("router record before any register: %v, want not found", err)
	}
	c.Register(uuid.NewString(), "")
	rec, err := store.GetUser(context.Background(), u)
	if err != nil || rec.NodeID != srv.NodeURL() || rec.ConnectedAt == 0 || rec.RouterType != storage.RouterWebPush {
		t.Fatalf("router record after the first register %+v %v", rec, err)
	}
	c.Close()

	// A known uaid is kept: a different one would make Firefox drop
	// every subscription.
	c2 := et.Dial(t, srv.Addr())
	if got := c2.Hello(uaid); got != uaid {
		t.Fatalf("known uaid replaced: %s -> %s", uaid, got)
	}
	// An unknown or invalid one is replaced.
	for _, bad := range []string{strings.Repeat("ab", 16), "not-a-uaid", ""} {
		c3 := et.Dial(t, srv.Addr())
		c3.Send(map[string]any{"messageType": "hello", "uaid": bad, "use_webpush": true})
		r := c3.Read()
		if got := r["uaid"].(string); got == bad || got == uaid {
			t.Fatalf("hello with %q kept %q", bad, got)
		}
	}
}

func TestRegisterUnregister(t *testing.T) {
	srv, store := node(t, nil)
	c := et.Dial(t, srv.Addr())
	uaid := parseUAID(t, c.Hello(""))
	keys, _ := token.ParseKeys(et.TestKey)

	chid := uuid.NewString()
	r := c.Register(chid, "")
	if r["status"] != 200.0 || r["channelID"] != chid || !strings.Contains(r["pushEndpoint"].(string), "/wpush/v1/") {
		t.Fatalf("register v1: %v", r)
	}
	ep := r["pushEndpoint"].(string)
	tok, err := keys.ParseToken("v1", ep[strings.LastIndex(ep, "/")+1:])
	if err != nil || tok.UAID != uaid || tok.CHID != uuid.MustParse(chid) {
		t.Fatalf("endpoint token %+v %v", tok, err)
	}
	if ok, _ := store.HasChannel(context.Background(), uaid, uuid.MustParse(chid)); !ok {
		t.Fatal("channel not stored")
	}

	// A VAPID key as Firefox sends it: base64url with padding.
	key := "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4="
	chid2 := uuid.NewString()
	r = c.Register(chid2, key)
	if r["status"] != 200.0 || !strings.Contains(r["pushEndpoint"].(string), "/wpush/v2/") {
		t.Fatalf("register v2: %v", r)
	}
	// A bad key: status 400, the socket stays open.
	r = c.Register(uuid.NewString(), "not-a-key")
	if r["status"] != 400.0 || r["pushEndpoint"] != nil {
		t.Fatalf("bad key: %v", r)
	}
	c.Send(map[string]any{"messageType": "unregister", "channelID": chid, "code": 200})
	r = c.Read()
	if r["messageType"] != "unregister" || r["status"] != 200.0 || r["channelID"] != chid {
		t.Fatalf("unregister: %v", r)
	}
	if ok, _ := store.HasChannel(context.Background(), uaid, uuid.MustParse(chid)); ok {
		t.Fatal("unregistered channel still stored")
	}
}

func TestPing(t *testing.T) {
	srv, _ := node(t, func(c *engine.Config) { c.MinClientPing = time.Hour })
	c := et.Dial(t, srv.Addr())
	c.Hello("")
	c.SendRaw(`{}`)
	if r := c.Read(); len(r) != 0 {
		t.Fatalf("ping reply %v, want {}", r)
	}
	// A second ping within MinClientPing is abuse: close 4774.
	c.SendRaw(`{"messageType":"ping"}`)
	if code := c.ExpectClose(); code != 4774 {
		t.Fatalf("close code %d, want 4774", code)
	}
}

func TestMalformedInputCloses(t *testing.T) {
	srv, _ := node(t, func(c *engine.Config) { c.MaxMessageSize = 4096 })
	cases := []struct {
		name  string
		hello bool
		send  func(*et.Client)
		code  ws.StatusCode
	}{
		{"register before hello", false, func(c *et.Client) { c.Send(map[string]any{"messageType": "register", "channelID": uuid.NewString()}) }, ws.StatusPolicyViolation},
		{"bad json", true, func(c *et.Client) { c.SendRaw(`{"messageType":`) }, ws.StatusUnsupportedData},
		{"unknown type", true, func(c *et.Client) { c.SendRaw(`{"messageType":"subscribe"}`) }, ws.StatusUnsupportedData},
		{"binary frame", true, func(c *et.Client) { c.SendFrame(ws.OpBinary, []byte{1, 2}) }, ws.StatusUnsupportedData},
		{"oversized", true, func(c *et.Client) { c.SendRaw(`{"x":"` + strings.Repeat("a", 5000) + `"}`) }, ws.StatusMessageTooBig},
		{"invalid channelID", true, func(c *et.Client) { c.Send(map[string]any{"messageType": "register", "channelID": "nope"}) }, ws.StatusUnsupportedData},
		{"second hello", true, func(c *et.Client) { c.Send(map[string]any{"messageType": "hello", "use_webpush": true}) }, ws.StatusPolicyViolation},
	}
	// A bystander connection must not notice any of it.
	bystander := et.Dial(t, srv.Addr())
	bystander.Hello("")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := et.Dial(t, srv.Addr())
			if tc.hello {
				c.Hello("")
			}
			tc.send(c)
			if code := c.ExpectClose(); code != tc.code {
				t.Fatalf("close code %d, want %d", code, tc.code)
			}
		})
	}
	bystander.SendRaw(`{}`)
	if r := bystander.Read(); len(r) != 0 {
		t.Fatalf("bystander ping reply %v", r)
	}
}

// TestNackAndBroadcastSubscribe: a nack and an ack of nothing are
// accepted without a reply, a broadcast_subscribe of an id the node does
// not know is answered with the reference's error, and the connection
// keeps working (Firefox sends broadcast_subscribe ~20 s after start, and
// nack after a failed push handler).
func TestNackAndBroadcastSubscribe(t *testing.T) {
	srv, _ := node(t, nil)
	c := et.Dial(t, srv.Addr())
	c.Hello("")
	c.SendRaw(`{"messageType":"broadcast_subscribe","broadcasts":{"remote-settings/monitor_changes":"\"1234\""}}`)
	c.SendRaw(`{"messageType":"nack","version":"gAAAAAB","code":301}`)
	c.SendRaw(`{"messageType":"ack","updates":[{"channelID":"` + uuid.NewString() + `","version":"unknown","code":100}]}`)
	c.SendRaw(`{}`)
	r := c.Read()
	errs, _ := r["broadcasts"].(map[string]any)["errors"].(map[string]any)
	if r["messageType"] != "broadcast" || errs["remote-settings/monitor_changes"] != "Broadcast not found" {
		t.Fatalf("broadcast_subscribe of an unknown id answered %v", r)
	}
	if r := c.Read(); len(r) != 0 {
		t.Fatalf("expected only the ping reply {}, got %v", r)
	}
}

// TestClientThatNeverReadsIsCutOff: websocket pings are answered with
// pongs; a client that sends them without reading must not grow the
// node's memory without bound.
func TestClientThatNeverReadsIsCutOff(t *testing.T) {
	srv, _ := node(t, nil)
	c := et.Dial(t, srv.Addr())
	c.Hello("")
	bystander := et.Dial(t, srv.Addr())
	bystander.Hello("")
	ping := make([]byte, 125)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := c.TrySendFrame(ws.OpPing, ping); err != nil {
			break // the node closed us
		}
		if time.Now().After(deadline) {
			t.Fatal("a client that never reads was not cut off")
		}
	}
	bystander.SendRaw(`{}`)
	if r := bystander.Read(); len(r) != 0 {
		t.Fatalf("bystander: %v", r)
	}
}

// TestChannelLimitAndNilChannel: a user agent's channels are bounded by
// max-channels, counted in storage across connections; the nil UUID is
// an invalid channel.
func TestChannelLimitAndNilChannel(t *testing.T) {
	srv, store := node(t, func(c *engine.Config) { c.MaxChannels = 3 })
	c := et.Dial(t, srv.Addr())
	uaid := c.Hello("")
	for i := range 3 {
		if r := c.Register(uuid.NewString(), ""); r["status"] != 200.0 {
			t.Fatalf("register %d: %v", i, r)
		}
	}
	if r := c.Register(uuid.NewString(), ""); r["status"] != 429.0 || r["pushEndpoint"] != nil {
		t.Fatalf("register past the limit: %v", r)
	}
	chids, err := store.Channels(context.Background(), parseUAID(t, uaid))
	et.Must(t, err, "channels")
	if len(chids) != 3 {
		t.Fatalf("%d channels stored, want 3", len(chids))
	}
	// A new connection counts what is stored.
	c.Close()
	c = et.Dial(t, srv.Addr())
	if got := c.Hello(uaid); got != uaid {
		t.Fatalf("uaid %s, want %s", got, uaid)
	}
	if r := c.Register(uuid.NewString(), ""); r["status"] != 429.0 {
		t.Fatalf("register past the limit on a new connection: %v", r)
	}
	c.Send(map[string]any{"messageType": "unregister", "channelID": chids[0].String()})
	if r := c.Read(); r["status"] != 200.0 {
		t.Fatalf("unregister: %v", r)
	}
	if r := c.Register(uuid.NewString(), ""); r["status"] != 200.0 {
		t.Fatalf("register after an unregister: %v", r)
	}

	c.Send(map[string]any{"messageType": "register", "channelID": "00000000-0000-0000-0000-000000000000"})
	if code := c.ExpectClose(); code != ws.StatusUnsupportedData {
		t.Fatalf("nil channelID: close %d, want 1003", code)
	}
}
