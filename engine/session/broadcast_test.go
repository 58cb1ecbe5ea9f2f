package session

import (
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/protocol"
)

// helloWith opens a session and completes a hello naming broadcasts (a
// JSON object), returning the hello reply's "broadcasts".
func (h *harness) helloWith(broadcasts string) map[string]any {
	h.t.Helper()
	// A new user agent's hello is answered at once (no storage call).
	h.open().send(`{"messageType":"hello","use_webpush":true,"broadcasts":` + broadcasts + `}`)
	h.noJobs()
	m := h.message()
	if m["messageType"] != "hello" {
		h.t.Fatalf("hello reply %v", m)
	}
	b, _ := m["broadcasts"].(map[string]any)
	return b
}

// broadcastMsg is the one "broadcast" message the last transition wrote.
func (h *harness) broadcastMsg() map[string]any {
	h.t.Helper()
	m := h.message()
	if m["messageType"] != "broadcast" {
		h.t.Fatalf("wrote %v, want a broadcast message", m)
	}
	return m["broadcasts"].(map[string]any)
}

func TestHelloBroadcasts(t *testing.T) {
	h := newHarness(t, nil)
	h.env.Broadcasts.Update(map[string]string{"rs/monitor": "v2", "rs/other": "v1"})
	// Stale, current and unknown ids.
	got := h.helloWith(`{"rs/monitor":"v1","rs/other":"v1","no/such":"v0"}`)
	if got["rs/monitor"] != "v2" || got["rs/other"] != nil || len(got) != 2 {
		t.Fatalf("hello broadcasts %v: want the stale id's current version and the errors", got)
	}
	errs, _ := got["errors"].(map[string]any)
	if errs["no/such"] != protocol.BroadcastNotFound || len(errs) != 1 {
		t.Fatalf("errors %v", errs)
	}
	// Subscribed to the known ids: a change reaches the client once.
	h.env.Broadcasts.Update(map[string]string{"rs/other": "v2"})
	h.step(h.s.Broadcast)
	if b := h.broadcastMsg(); b["rs/other"] != "v2" || len(b) != 1 {
		t.Fatalf("broadcast %v", b)
	}
	h.step(h.s.Broadcast)
	if len(h.out) != 0 {
		t.Fatalf("a second fan-out visit wrote %q", h.out)
	}
	if h.counter("Broadcasts") != 1 {
		t.Fatalf("broadcasts counted %d", h.counter("Broadcasts"))
	}
	// The unknown id was not subscribed: it appearing later sends nothing.
	h.env.Broadcasts.Update(map[string]string{"no/such": "v1"})
	h.step(h.s.Broadcast)
	if len(h.out) != 0 {
		t.Fatalf("an id never subscribed was sent: %q", h.out)
	}
	h.s.Close(h.env, 0)
	if n := h.env.Broadcasts.Subs(); n != 0 {
		t.Fatalf("Close kept %d subscriptions", n)
	}
}

func TestHelloWithoutBroadcasts(t *testing.T) {
	h := newHarness(t, nil)
	h.env.Broadcasts.Update(map[string]string{"rs/monitor": "v1"})
	if got := h.helloWith(`{}`); len(got) != 0 {
		t.Fatalf("hello reply broadcasts %v, want {}", got)
	}
	h.env.Broadcasts.Update(map[string]string{"rs/monitor": "v2"})
	h.step(h.s.Broadcast)
	if len(h.out) != 0 || h.s.bsub != 0 {
		t.Fatalf("an unsubscribed client got %q", h.out)
	}
}

// A change published while the hello is in storage is in the hello's
// reply, and not sent again by the fan-out.
func TestBroadcastChangeDuringHello(t *testing.T) {
	h := newHarness(t, nil)
	h.env.Broadcasts.Update(map[string]string{"rs/monitor": "v1"})
	h.open().send(`{"messageType":"hello","uaid":"` + protocol.FormatUAID(testUAID) + `","broadcasts":{"rs/monitor":"v1"}}`)
	job := h.job(JobHello)
	h.env.Broadcasts.Update(map[string]string{"rs/monitor": "v2"})
	h.step(h.s.Broadcast) // the fan-out visits before the hello is done
	if len(h.out) != 0 {
		t.Fatalf("wrote before the hello reply: %q", h.out)
	}
	h.done(&Result{Job: job, UAID: testUAID})
	if m := h.messages()[0]; m["broadcasts"].(map[string]any)["rs/monitor"] != "v2" {
		t.Fatalf("hello reply %v", m)
	}
	h.step(h.s.Broadcast)
	if len(h.out) != 0 {
		t.Fatalf("sent twice: %q", h.out)
	}
}

func TestBroadcastSubscribe(t *testing.T) {
	h := newHarness(t, nil)
	h.env.Broadcasts.Update(map[string]string{"a/x": "v1", "b/y": "v3"})
	h.helloWith(`{"a/x":"v1"}`)
	// Current versions only: nothing to say, no message.
	h.send(`{"messageType":"broadcast_subscribe","broadcasts":{"a/x":"v1"}}`)
	if len(h.out) != 0 {
		t.Fatalf("subscribe with nothing new wrote %q", h.out)
	}
	// A stale id and an unknown one.
	h.send(`{"messageType":"broadcast_subscribe","broadcasts":{"b/y":"v1","c/z":"v1"}}`)
	b := h.broadcastMsg()
	errs, _ := b["errors"].(map[string]any)
	if b["b/y"] != "v3" || errs["c/z"] != protocol.BroadcastNotFound || len(b) != 2 {
		t.Fatalf("subscribe answer %v", b)
	}
	// Both known ids are followed now.
	h.env.Broadcasts.Update(map[string]string{"a/x": "v2", "b/y": "v4"})
	h.step(h.s.Broadcast)
	if b := h.broadcastMsg(); b["a/x"] != "v2" || b["b/y"] != "v4" || len(b) != 2 {
		t.Fatalf("broadcast after subscribe %v", b)
	}
	// broadcast_subscribe needs a hello first.
	h2 := newHarness(t, nil).open()
	h2.send(`{"messageType":"broadcast_subscribe","broadcasts":{"a/x":"v1"}}`)
	h2.closedWith(1008)
}

// Tick catches up a client the fan-out missed.
func TestTickSendsAMissedBroadcast(t *testing.T) {
	h := newHarness(t, nil)
	h.env.Broadcasts.Update(map[string]string{"a/x": "v1"})
	h.helloWith(`{"a/x":"v1"}`)
	h.env.Broadcasts.Update(map[string]string{"a/x": "v2"})
	h.now = h.now.Add(time.Minute) // before the keepalive is due
	h.step(h.s.Tick)
	if b := h.broadcastMsg(); b["a/x"] != "v2" {
		t.Fatalf("tick sent %v", b)
	}
}

// A node without a broadcast table reports every id unknown.
func TestNoBroadcastTable(t *testing.T) {
	h := newHarness(t, nil)
	h.env.Broadcasts = nil
	got := h.helloWith(`{"a/x":"v1"}`)
	if errs, _ := got["errors"].(map[string]any); errs["a/x"] != protocol.BroadcastNotFound {
		t.Fatalf("hello broadcasts %v", got)
	}
	h.send(`{"messageType":"broadcast_subscribe","broadcasts":{"b/y":"v1"}}`)
	if errs, _ := h.broadcastMsg()["errors"].(map[string]any); errs["b/y"] != protocol.BroadcastNotFound {
		t.Fatal("subscribe without a table")
	}
	h.step(h.s.Broadcast)
	if len(h.out) != 0 {
		t.Fatalf("wrote %q", h.out)
	}
}

// BenchmarkBroadcastFanOutStep is one client's step of a fan-out: catch up
// and write the broadcast frame. It must not allocate.
func BenchmarkBroadcastFanOutStep(b *testing.B) {
	h := newHarness(b, nil)
	h.env.Broadcasts.Update(map[string]string{"remote-settings/monitor_changes": `"1"`})
	h.helloWith(`{"remote-settings/monitor_changes":"\"1\""}`)
	// Many clients share the new generation's entry: hold one reference.
	other := newHarness(b, nil)
	other.env = h.env
	other.helloWith(`{"remote-settings/monitor_changes":"\"1\""}`)
	b.ReportAllocs()
	i := 2
	for b.Loop() {
		i++
		b.StopTimer()
		h.env.Broadcasts.Update(map[string]string{"remote-settings/monitor_changes": `"` + string(rune('0'+i%10)) + `"`})
		other.step(other.s.Broadcast)
		b.StartTimer()
		h.step(h.s.Broadcast)
		if len(h.out) == 0 {
			b.Fatal("nothing sent")
		}
	}
}
