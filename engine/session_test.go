package engine

import (
	"testing"
	"unsafe"
)

// TestSessionSize guards the per-connection budget: a session must stay in
// the 96-byte size class (gnet's own state takes about 380 B more).
func TestSessionSize(t *testing.T) {
	if n := unsafe.Sizeof(session{}); n > 96 {
		t.Fatalf("session is %d bytes, budget 96", n)
	}
}
