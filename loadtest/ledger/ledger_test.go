package ledger

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestPayloadRoundTrip(t *testing.T) {
	id := PushID{Run: 7, Worker: 3, UA: 1234, Seq: 99999, At: 123456789}
	for _, size := range []int{PayloadHeader, PayloadHeader + 1, 512, 1000, MaxPayload} {
		p := AppendPayload(nil, id, size)
		if len(p) != size {
			t.Fatalf("size %d: got %d bytes", size, len(p))
		}
		got, err := ParsePayload(p, size)
		if err != nil || got != id {
			t.Fatalf("size %d: %+v %v", size, got, err)
		}
		if size == PayloadHeader {
			continue
		}
		for _, at := range []int{PayloadHeader, size - 1, (PayloadHeader + size) / 2} {
			bad := bytes.Clone(p)
			bad[at] ^= 1
			if _, err := ParsePayload(bad, size); !errors.Is(err, ErrContent) {
				t.Errorf("size %d: flipped byte %d accepted", size, at)
			}
		}
	}
	if _, err := ParsePayload(AppendPayload(nil, id, 100), 101); err == nil {
		t.Error("wrong length accepted")
	}
	other := id
	other.Seq++
	if bytes.Equal(AppendPayload(nil, id, 200)[PayloadHeader:], AppendPayload(nil, other, 200)[PayloadHeader:]) {
		t.Error("two pushes share their padding")
	}
}

// TestLedger: how arrivals are classified, and the accounting.
func TestLedger(t *testing.T) {
	var l Ledger
	a, b, c, d, e := l.Add(1), l.Add(1), l.Add(2), l.Add(2), l.Add(3)
	l.Answered(a, 201, "")
	l.Answered(b, 201, "")
	l.Answered(c, 201, "")
	l.Answered(d, 503, "")
	l.Answered(e, StatusNotSent, "")

	steps := []struct {
		seq  uint64
		ua   int32
		conn uint32
		want Receipt
	}{
		{a, 1, 1, First},
		{a, 2, 1, Unknown}, // not this user agent's
		{99, 1, 1, Unknown},
	}
	for _, s := range steps {
		if got := l.Receive(s.seq, s.ua, s.conn); got != s.want {
			t.Errorf("receive(%d, ua %d) = %d, want %d", s.seq, s.ua, got, s.want)
		}
	}
	if l.Outstanding(0, 5) != 2 || l.Unacked() != 3 {
		t.Errorf("outstanding %d (want 2: b, c), unacked %d (want 3)", l.Outstanding(0, 5), l.Unacked())
	}
	// a acked on connection 1, which then breaks: a repeat is allowed.
	l.Ack(a, 1)
	if got := l.Receive(a, 1, 2); got != AgainAckUnverified {
		t.Errorf("after an unverified ack: %d", got)
	}
	// A repeat on the connection that acked is a server bug.
	if got := l.Receive(a, 1, 1); got != AfterAck {
		t.Errorf("on the acking connection: %d", got)
	}
	// b arrives, is not acked (the user agent was leaving), arrives again.
	l.Receive(b, 1, 1)
	if got := l.Receive(b, 1, 2); got != AgainUnacked {
		t.Errorf("repeat before any ack: %d", got)
	}
	l.Ack(b, 2)
	l.Confirm([]uint64{b})
	if got := l.Receive(b, 1, 3); got != AfterAck {
		t.Errorf("after a certain ack: %d", got)
	}
	l.Receive(d, 2, 1) // refused, yet delivered
	acc := l.Account(0, l.Len())
	want := Accounting{Sent: 4, Accepted: 3, Rejected: 1, NotSent: 1, Delivered: 2, Lost: 1, DeliveredDespiteError: 1}
	if acc != want {
		t.Errorf("account\n got %+v\nwant %+v", acc, want)
	}
	if acc.Exact() {
		t.Error("a lost push is not exact")
	}
}

// TestMinus: a later accounting less an earlier one is the phase between,
// in every field (a field Minus forgot would keep its later total).
func TestMinus(t *testing.T) {
	var early, phase Accounting
	v := reflect.ValueOf(&early).Elem()
	p := reflect.ValueOf(&phase).Elem()
	for i := range v.NumField() {
		v.Field(i).SetInt(int64(10 + i))
		p.Field(i).SetInt(int64(100 * (i + 1)))
	}
	late := early
	late.Add(phase)
	if got := late.Minus(early); got != phase {
		t.Fatalf("late.Minus(early) = %+v, want %+v", got, phase)
	}
}
