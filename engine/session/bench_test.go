package session

import (
	"testing"

	gws "github.com/gobwas/ws"

	"github.com/autopush-go/autopush/internal/protocol"
)

// ackFrame is a masked ack of one notification, as Firefox sends it.
var ackFrame = clientFrame(gws.OpText, []byte(`{"messageType":"ack","updates":[{"channelID":"3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f","version":"gAAAAABlU_EAAAECAwQFBgcICQoLDA0ODydWq5R33","code":100}]}`))

// BenchmarkSessionInboundAck is the inbound hot path through the session
// core: parse the frame in place, assemble, decode the ack, look it up
// among the notifications in flight. It must not allocate.
func BenchmarkSessionInboundAck(b *testing.B) {
	h := newHarness(b, nil).ready(testUAID)
	deliver(h, "in-flight") // the ack below matches nothing: the list stays
	buf := make([]byte, len(ackFrame))
	x := &Ctx{Env: h.env, Host: h}
	b.ReportAllocs()
	b.SetBytes(int64(len(ackFrame)))
	for b.Loop() {
		copy(buf, ackFrame) // a fresh read: unmasking happens in place
		x.Reset()
		x.Env, x.Host = h.env, h
		if n := h.s.Consume(x, buf); n != len(buf) || x.Close {
			b.Fatalf("consumed %d, close %v", n, x.Close)
		}
	}
}

// BenchmarkSessionDeliverAck is a direct notification's round trip
// through the core: Deliver encodes it into Out and keeps it in flight,
// then the client's ack removes it.
func BenchmarkSessionDeliverAck(b *testing.B) {
	h := newHarness(b, nil).ready(testUAID)
	n := &protocol.Notification{ChannelID: "3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f", Version: "gAAAAABlU_EAAAECAwQFBgcICQoLDA0ODydWq5R33",
		TTL: 60, SortKey: 1, Data: "aGVsbG8gd29ybGQgZnJvbSBhIGJlbmNobWFyaw", Headers: []protocol.Header{{Name: "encoding", Value: "aes128gcm"}}}
	buf := make([]byte, len(ackFrame))
	x := &Ctx{Env: h.env, Host: h}
	b.ReportAllocs()
	for b.Loop() {
		x.Reset()
		x.Env, x.Host = h.env, h
		if got := h.s.Deliver(x, n); got != Delivered {
			b.Fatalf("deliver: %v", got)
		}
		copy(buf, ackFrame)
		h.s.Consume(x, buf)
		if h.env.InFlight.Load() != 0 {
			b.Fatal("the ack did not match")
		}
	}
}

// TestSessionHotPathDoesNotAllocate turns BenchmarkSessionInboundAck's
// zero-allocation claim into a test that fails on regression.
func TestSessionHotPathDoesNotAllocate(t *testing.T) {
	if r := testing.Benchmark(BenchmarkSessionInboundAck); r.AllocsPerOp() != 0 {
		t.Errorf("inbound ack through the session: %d allocs/op, want 0", r.AllocsPerOp())
	}
}
