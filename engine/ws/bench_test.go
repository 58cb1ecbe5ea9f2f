package ws

import "testing"

// The hot path (parse a frame, assemble it, append a reply) must not
// allocate; this makes `go test` enforce what the benchmarks report.
func TestHotPathZeroAlloc(t *testing.T) {
	frame := text(ackJSON)
	buf := make([]byte, len(frame))
	out := make([]byte, 0, 1024)
	var a Assembler
	var sink int
	allocs := testing.AllocsPerRun(1000, func() {
		copy(buf, frame)
		h, p, n, err := ParseFrame(buf, 4096)
		msg, ok, err2 := a.Feed(h, p, 4096)
		if err != nil || err2 != nil || !ok || n != len(frame) {
			t.Fatal(err, err2, ok)
		}
		out = AppendText(out[:0], msg.Payload)
		out = AppendPong(out, nil)
		out = AppendClose(out, StatusNormalClosure, "bye")
		b, mark := BeginFrame(out)
		out = EndFrame(append(b, `{"messageType":"ping"}`...), mark, OpText)
		sink += len(out)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per frame", allocs)
	}
	// A fragmented message costs nothing either once the pool is warm.
	f1, f2 := []byte(`{"messageType":`), []byte(`"ack"}`)
	allocs = testing.AllocsPerRun(1000, func() {
		a.Feed(Header{OpCode: OpText}, f1, 4096)
		msg, ok, err := a.Feed(Header{Fin: true, OpCode: OpContinuation}, f2, 4096)
		if err != nil || !ok || len(msg.Payload) != len(f1)+len(f2) {
			t.Fatal(err, ok)
		}
		a.Release()
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per fragmented message", allocs)
	}
}

func BenchmarkParseFrame(b *testing.B) {
	frame := text(ackJSON)
	buf := make([]byte, len(frame))
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, frame) // unmasking is in place: restore the masked bytes
		if _, _, n, err := ParseFrame(buf, 4096); n == 0 || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkAssemble(b *testing.B) {
	payload := []byte(ackJSON)
	h := Header{Fin: true, OpCode: OpText, Length: int64(len(payload))}
	var a Assembler
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := a.Feed(h, payload, 4096); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkAssembleFragmented(b *testing.B) {
	f1, f2 := []byte(ackJSON[:40]), []byte(ackJSON[40:])
	var a Assembler
	b.SetBytes(int64(len(ackJSON)))
	b.ReportAllocs()
	for b.Loop() {
		a.Feed(Header{OpCode: OpText}, f1, 4096)
		if _, ok, err := a.Feed(Header{Fin: true, OpCode: OpContinuation}, f2, 4096); !ok || err != nil {
			b.Fatal(ok, err)
		}
		a.Release()
	}
}

func BenchmarkAppendText(b *testing.B) {
	payload := []byte(ackJSON)
	dst := make([]byte, 0, 256)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendText(dst[:0], payload)
	}
}

func BenchmarkParseUpgrade(b *testing.B) {
	buf := []byte(firefoxUpgrade)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, n, err := ParseUpgrade(buf); n == 0 || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkAppendUpgradeResponse(b *testing.B) {
	req, _, _ := ParseUpgrade([]byte(firefoxUpgrade))
	dst := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendUpgradeResponse(dst[:0], &req, req.Protocol())
	}
}

func BenchmarkParseServerFrame(b *testing.B) {
	frame := AppendText(nil, []byte(ackJSON))
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, n, err := ParseServerFrame(frame, 4096); n == 0 || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkAppendClientFrame(b *testing.B) {
	payload := []byte(ackJSON)
	dst := make([]byte, 0, 256)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendClientFrame(dst[:0], OpText, payload, [4]byte{1, 2, 3, 4})
	}
}
