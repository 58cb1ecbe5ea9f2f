package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/storage"
)

// TestMsgLimitResetsTheUser is the reference's test_msg_limit: a user
// agent whose backlog passes msg-limit gets msg-limit messages, is closed
// with 1000, and its next hello gets a new uaid (its record, channels and
// messages are gone).
func TestMsgLimitResetsTheUser(t *testing.T) {
	const limit = 20
	srv, store := node(t, func(c *engine.Config) { c.MsgLimit = limit })
	c, uaid, chid := connected(t, srv)
	c.Leave()
	u := parseUAID(t, uaid)
	ctx := context.Background()
	for i := range limit + 1 {
		et.Must(t, store.SaveMessage(ctx, u, storedMessage(chid, fmt.Sprintf("v%02d", i), "", 600)), "save")
	}
	c = et.Dial(t, srv.Addr())
	if got := c.Hello(uaid); got != uaid {
		t.Fatalf("the known uaid was replaced at hello: %s", got)
	}
	for i := range limit {
		r := c.Read()
		if r["messageType"] != "notification" {
			t.Fatalf("message %d: %v", i, r)
		}
		c.Ack(chid, r["version"].(string))
	}
	if code := c.ExpectClose(); code != 1000 {
		t.Fatalf("closed with %d, want 1000", code)
	}
	if _, err := store.GetUser(ctx, u); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the user is still stored: %v", err)
	}
	if ms, err := store.TimestampMessages(ctx, u, 0, 100); err != nil || len(ms) != 0 {
		t.Fatalf("messages left: %d %v", len(ms), err)
	}
	c = et.Dial(t, srv.Addr())
	if got := c.Hello(uaid); got == uaid {
		t.Fatal("the next hello kept the dropped uaid")
	}
	if v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_uaid_resets_total"); v != 1 {
		t.Fatalf("autoconnect_uaid_resets_total %v", v)
	}
}

// TestMsgLimitOff: msg-limit 0 delivers any backlog.
func TestMsgLimitOff(t *testing.T) {
	srv, store := node(t, func(c *engine.Config) { c.MsgLimit = 0 })
	c, uaid, chid := connected(t, srv)
	c.Leave()
	u := parseUAID(t, uaid)
	for i := range 40 {
		et.Must(t, store.SaveMessage(context.Background(), u, storedMessage(chid, fmt.Sprintf("v%02d", i), "", 600)), "save")
	}
	c = et.Dial(t, srv.Addr())
	c.Hello(uaid)
	for i := range 40 {
		r := c.Read()
		if r["messageType"] != "notification" {
			t.Fatalf("message %d: %v", i, r)
		}
		c.Ack(chid, r["version"].(string))
	}
	c.Barrier()
}
