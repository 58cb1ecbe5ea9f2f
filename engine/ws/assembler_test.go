package ws

import (
	"strings"
	"testing"
	"unsafe"
)

// step is one frame fed to an Assembler and what must come out.
type step struct {
	fin     bool
	op      OpCode
	payload string
	// want: a message (ok), nothing yet, or an error.
	ok      bool
	wantOp  OpCode
	wantMsg string
	code    StatusCode
	err     *CloseError
}

func frag(op OpCode, p string) step { return step{op: op, payload: p} }
func final(op OpCode, p string, wantOp OpCode, want string) step {
	return step{fin: true, op: op, payload: p, ok: true, wantOp: wantOp, wantMsg: want}
}
func fails(fin bool, op OpCode, p string, err *CloseError) step {
	return step{fin: fin, op: op, payload: p, err: err}
}

func TestAssembler(t *testing.T) {
	const max = 16
	tests := []struct {
		name  string
		steps []step
	}{
		{"text", []step{final(OpText, "héllo", OpText, "héllo")}},
		{"binary may be anything", []step{final(OpBinary, "\xff\x00", OpBinary, "\xff\x00")}},
		{"empty text", []step{final(OpText, "", OpText, "")}},
		{"fragmented text", []step{frag(OpText, "ab"), frag(OpContinuation, "cd"), final(OpContinuation, "e", OpText, "abcde")}},
		{"fragmented binary", []step{frag(OpBinary, "\xff"), final(OpContinuation, "\xfe", OpBinary, "\xff\xfe")}},
		{"empty fragments", []step{frag(OpText, ""), frag(OpContinuation, ""), final(OpContinuation, "", OpText, "")}},
		{"control between fragments", []step{
			frag(OpText, "ab"),
			final(OpPing, "p", OpPing, "p"),
			final(OpPong, "", OpPong, ""),
			final(OpContinuation, "cd", OpText, "abcd"),
			final(OpText, "next", OpText, "next"),
		}},
		{"rune split across fragments", []step{frag(OpText, "a\xe2"), frag(OpContinuation, "\x82"), final(OpContinuation, "\xac", OpText, "a€")}},
		{"4-byte rune split 1+3", []step{frag(OpText, "\xf0"), final(OpContinuation, "\x9f\x98\x80", OpText, "😀")}},
		{"message of exactly max", []step{frag(OpText, strings.Repeat("a", 10)), final(OpContinuation, strings.Repeat("b", 6), OpText, strings.Repeat("a", 10)+strings.Repeat("b", 6))}},

		{"continuation without start", []step{fails(true, OpContinuation, "x", ErrUnexpectedContinuation)}},
		{"continuation after complete message", []step{final(OpText, "a", OpText, "a"), fails(false, OpContinuation, "x", ErrUnexpectedContinuation)}},
		{"text inside fragmented message", []step{frag(OpText, "a"), fails(true, OpText, "b", ErrExpectedContinuation)}},
		{"binary inside fragmented message", []step{frag(OpText, "a"), fails(false, OpBinary, "b", ErrExpectedContinuation)}},
		{"single frame too big", []step{fails(true, OpBinary, strings.Repeat("x", max+1), ErrMessageTooBig)}},
		{"first fragment too big", []step{fails(false, OpBinary, strings.Repeat("x", max+1), ErrMessageTooBig)}},
		{"too big across fragments", []step{frag(OpText, strings.Repeat("a", 10)), frag(OpContinuation, "bbbbbb"), fails(true, OpContinuation, "c", ErrMessageTooBig)}},
		{"invalid UTF-8", []step{fails(true, OpText, "a\xffb", ErrInvalidUTF8)}},
		{"surrogate", []step{fails(true, OpText, "\xed\xa0\x80", ErrInvalidUTF8)}},
		{"invalid UTF-8 fails at its fragment", []step{frag(OpText, "ok"), fails(false, OpContinuation, "\xc0\xaf", ErrInvalidUTF8)}},
		{"invalid start of split rune fails early", []step{fails(false, OpText, "a\xe0\x80", ErrInvalidUTF8)}},
		{"truncated rune at end", []step{frag(OpText, "a"), fails(true, OpContinuation, "\xe2\x82", ErrInvalidUTF8)}},

		{"close without body", []step{{fin: true, op: OpClose, ok: true, wantOp: OpClose, code: StatusNoStatusRcvd}}},
		{"close 1000 with reason", []step{{fin: true, op: OpClose, payload: "\x03\xe8bye", ok: true, wantOp: OpClose, wantMsg: "bye", code: 1000}}},
		{"close during fragmented message", []step{frag(OpText, "a"), {fin: true, op: OpClose, payload: "\x03\xe9", ok: true, wantOp: OpClose, code: 1001}}},
		{"close of 1 byte", []step{fails(true, OpClose, "\x03", ErrCloseTooShort)}},
		{"close reason not UTF-8", []step{fails(true, OpClose, "\x03\xe8\xff", ErrCloseReasonUTF8)}},
		{"close 1005 on the wire", []step{fails(true, OpClose, "\x03\xed", ErrCloseCode)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Assembler
			defer a.Reset()
			for i, s := range tt.steps {
				payload := []byte(s.payload)
				msg, ok, err := a.Feed(Header{Fin: s.fin, OpCode: s.op}, payload, max)
				if s.err != nil {
					if err != s.err || ok {
						t.Fatalf("step %d: ok=%v err=%v, want %v", i, ok, err, s.err)
					}
					if a != (Assembler{}) {
						t.Fatalf("step %d: assembler not reset after error: %+v", i, a)
					}
					return
				}
				if err != nil || ok != s.ok {
					t.Fatalf("step %d: ok=%v err=%v, want ok=%v", i, ok, err, s.ok)
				}
				if !ok {
					continue
				}
				if msg.Op != s.wantOp || string(msg.Payload) != s.wantMsg || msg.Code != s.code {
					t.Fatalf("step %d: msg %v %q %d, want %v %q %d", i, msg.Op, msg.Payload, msg.Code, s.wantOp, s.wantMsg, s.code)
				}
				// Unfragmented data and control messages alias the frame.
				if s.op != OpContinuation && len(payload) > 0 && len(msg.Payload) > 0 &&
					&msg.Payload[len(msg.Payload)-1] != &payload[len(payload)-1] {
					t.Fatalf("step %d: single-frame message was copied", i)
				}
			}
		})
	}
}

func TestValidCloseCode(t *testing.T) {
	valid := []StatusCode{1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999}
	invalid := []StatusCode{0, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535}
	for _, c := range valid {
		if !ValidCloseCode(c) {
			t.Errorf("%d should be valid", c)
		}
		var a Assembler
		if msg, ok, err := a.Feed(Header{Fin: true, OpCode: OpClose}, closeBody(c, "r"), 0); err != nil || !ok || msg.Code != c || string(msg.Payload) != "r" {
			t.Errorf("close %d: %v %v %+v", c, ok, err, msg)
		}
	}
	for _, c := range invalid {
		if ValidCloseCode(c) {
			t.Errorf("%d should be invalid", c)
		}
		var a Assembler
		if _, _, err := a.Feed(Header{Fin: true, OpCode: OpClose}, closeBody(c, ""), 0); err != ErrCloseCode {
			t.Errorf("close %d: err %v", c, err)
		}
	}
}

// The Assembler must stay tiny and hold no buffer once a message is done.
func TestAssemblerFootprint(t *testing.T) {
	if s := unsafe.Sizeof(Assembler{}); s > 16 {
		t.Fatalf("Assembler is %d bytes", s)
	}
	var a Assembler
	a.Feed(Header{OpCode: OpText}, []byte("ab"), 0)
	if a.buf == nil || !a.Fragmented() {
		t.Fatal("open message has no buffer")
	}
	a.Release() // keeps the open message
	if a.buf == nil {
		t.Fatal("Release dropped an open message")
	}
	msg, ok, _ := a.Feed(Header{Fin: true, OpCode: OpContinuation}, []byte("cd"), 0)
	if !ok || string(msg.Payload) != "abcd" || a.Fragmented() {
		t.Fatalf("msg %q ok=%v", msg.Payload, ok)
	}
	a.Release()
	if a != (Assembler{}) {
		t.Fatalf("after Release: %+v", a)
	}
	// A delivered message's buffer is also recycled by the next data frame.
	a.Feed(Header{OpCode: OpBinary}, []byte("ab"), 0)
	a.Feed(Header{Fin: true, OpCode: OpContinuation}, []byte("cd"), 0)
	a.Feed(Header{Fin: true, OpCode: OpPing}, nil, 0) // control frames leave it alone
	if !a.held {
		t.Fatal("ping released the delivered message")
	}
	a.Feed(Header{Fin: true, OpCode: OpText}, []byte("x"), 0)
	if a != (Assembler{}) {
		t.Fatalf("after next message: %+v", a)
	}
	// Reset drops an open message.
	a.Feed(Header{OpCode: OpText}, []byte("ab"), 0)
	a.Reset()
	if a != (Assembler{}) {
		t.Fatalf("after Reset: %+v", a)
	}
}

// Growing through several size classes keeps the content.
func TestAssemblerGrowth(t *testing.T) {
	var a Assembler
	defer a.Reset()
	var want []byte
	chunk := []byte(strings.Repeat("0123456789abcdef", 300)) // 4800 bytes
	for i := range 60 {
		op := OpContinuation
		if i == 0 {
			op = OpText
		}
		if _, ok, err := a.Feed(Header{OpCode: op}, chunk, 0); ok || err != nil {
			t.Fatal(ok, err)
		}
		want = append(want, chunk...)
	}
	msg, ok, err := a.Feed(Header{Fin: true, OpCode: OpContinuation}, []byte("end"), 0)
	want = append(want, "end"...)
	if !ok || err != nil || string(msg.Payload) != string(want) {
		t.Fatalf("ok=%v err=%v len=%d want %d", ok, err, len(msg.Payload), len(want))
	}
	for _, size := range []int{0, 1, 1024, 1025, 4096, 1 << 20, 1<<20 + 1} {
		b := getBuf(size)
		if cap(*b) < size || len(*b) != 0 {
			t.Fatalf("getBuf(%d): len %d cap %d", size, len(*b), cap(*b))
		}
		putBuf(b)
	}
}
