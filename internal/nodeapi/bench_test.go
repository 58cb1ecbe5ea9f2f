package nodeapi

import (
	"testing"

	"github.com/autopush-go/autopush/internal/protocol"
)

// BenchmarkDecodeNotification decodes a PUT /push body into a reused
// notification. The copy into buf is part of the measurement (a few ns)
// because escapes are unescaped in place.
func BenchmarkDecodeNotification(b *testing.B) {
	src := AppendNotification(nil, testNotification())
	buf := make([]byte, len(src))
	var n protocol.Notification
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		copy(buf, src)
		if err := DecodeNotification(buf, &n); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendNotification(b *testing.B) {
	n := testNotification()
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendNotification(dst[:0], n)
	}
}
