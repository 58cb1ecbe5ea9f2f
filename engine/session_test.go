package engine

import (
	"testing"
	"unsafe"
)

// TestConnSize guards the per-connection budget: a conn (session core,
// gnet conn, wheel slot state) must stay in the 96-byte size class (gnet's
// own state takes about 380 B more).
func TestConnSize(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n > 96 {
		t.Fatalf("conn is %d bytes, budget 96", n)
	}
}
