package session

import (
	"bytes"
	"testing"

	"github.com/autopush-go/autopush/engine/ws"
)

// TestStorageDown: while the node holds storage down (Env.StorageDown,
// engine/storagewatch.go), an upgrade is answered 503 with Retry-After,
// a hello on a connection upgraded before is closed with 1013 without a
// storage call, and a direct delivery is busy with no check owed; once
// storage is up again all three work.
func TestStorageDown(t *testing.T) {
	h := newHarness(t, nil)
	h.env.StorageDown.Store(true)
	h.step(h.s.Open)
	h.feed([]byte(upgradeRequest))
	if !bytes.HasPrefix(h.out, []byte("HTTP/1.1 503 ")) || !bytes.Contains(h.out, []byte("Retry-After: 30")) || !h.close {
		t.Fatalf("upgrade while storage is down: %q (close %v)", h.out, h.close)
	}
	if h.counter("UpgradesRefused") != 1 || h.counter("Upgrades") != 0 {
		t.Fatal("refusal not counted")
	}

	h = newHarness(t, nil).open()
	h.env.StorageDown.Store(true)
	h.send(`{"messageType":"hello","use_webpush":true}`)
	h.closedWith(ws.StatusTryAgainLater)
	h.noJobs()
	if h.errorsOf("storage") != 1 || h.s.Registered() {
		t.Fatal("hello refusal not counted, or registered")
	}

	h = newHarness(t, nil).ready(testUAID)
	h.env.StorageDown.Store(true)
	if got := deliver(h, "v0"); got != Busy || len(h.out) != 0 {
		t.Fatalf("delivery while storage is down: %v, wrote %q", got, h.out)
	}
	if h.s.flow != nil {
		t.Fatalf("a refused delivery left flow state (a check owed?): %+v", *h.s.flow)
	}
	h.env.StorageDown.Store(false)
	if got := deliver(h, "v1"); got != Delivered {
		t.Fatalf("delivery once storage is up: %v", got)
	}
	h.send(ackMsg("v1"))
	h.noJobs() // nothing was owed by the refusal

	h = newHarness(t, nil).open()
	h.send(`{"messageType":"hello","use_webpush":true}`)
	if m := h.message(); m["status"] != 200.0 {
		t.Fatalf("hello once storage is up: %v", m)
	}
}
