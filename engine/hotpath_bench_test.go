package engine

import (
	"testing"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
)

// maskedFrame is a client frame as Firefox sends it: masked text.
func maskedFrame(payload string) []byte {
	mask := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	b := []byte{0x81, 0x80 | byte(len(payload))}
	if len(payload) > 125 {
		b = []byte{0x81, 0x80 | 126, byte(len(payload) >> 8), byte(len(payload))}
	}
	b = append(b, mask[:]...)
	start := len(b)
	b = append(b, payload...)
	for i := range b[start:] {
		b[start+i] ^= mask[i%4]
	}
	return b
}

// BenchmarkInboundAck is the inbound hot path of a busy connection: parse
// the frame from the loop's buffer (unmasking in place), assemble the
// message, decode the ack. It must not allocate.
func BenchmarkInboundAck(b *testing.B) {
	frame := maskedFrame(`{"messageType":"ack","updates":[{"channelID":"3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f","version":"gAAAAABlU_EAAAECAwQFBgcICQoLDA0ODydWq5R33","code":100}]}`)
	buf := make([]byte, len(frame))
	var asm ws.Assembler
	var m protocol.ClientMessage
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		copy(buf, frame) // a fresh read: unmasking happens in place
		h, payload, n, err := ws.ParseFrame(buf, 32<<10)
		if err != nil || n != len(buf) {
			b.Fatal(err)
		}
		msg, ok, err := asm.Feed(h, payload, 32<<10)
		if err != nil || !ok {
			b.Fatal(err)
		}
		if err := protocol.DecodeClient(msg.Payload, &m); err != nil || m.Type != protocol.MsgAck || len(m.Updates) != 1 {
			b.Fatal(err)
		}
	}
}

// BenchmarkOutboundNotification encodes a notification into a text frame
// in a pooled buffer, as a delivery does (session.Deliver appends to the
// pooled Ctx's Out). It must not allocate.
func BenchmarkOutboundNotification(b *testing.B) {
	n := &protocol.Notification{ChannelID: "3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f", Version: "gAAAAABlU_EAAAECAwQFBgcICQoLDA0ODy",
		Data: "aGVsbG8gd29ybGQgZnJvbSBhIGJlbmNobWFyaw", Headers: []protocol.Header{{Name: "encoding", Value: "aes128gcm"}}}
	b.ReportAllocs()
	for b.Loop() {
		lc := ctxPool.Get().(*loopCtx)
		buf, mark := ws.BeginFrame(lc.Out)
		lc.Out = ws.EndFrame(protocol.AppendNotification(buf, n), mark, ws.OpText)
		lc.release()
	}
}

// TestHotPathDoesNotAllocate turns the benchmarks' zero-allocation claim
// into a test that fails on regression.
func TestHotPathDoesNotAllocate(t *testing.T) {
	for name, bench := range map[string]func(*testing.B){"inbound ack": BenchmarkInboundAck, "outbound notification": BenchmarkOutboundNotification} {
		if r := testing.Benchmark(bench); r.AllocsPerOp() != 0 {
			t.Errorf("%s: %d allocs/op, want 0", name, r.AllocsPerOp())
		}
	}
}
