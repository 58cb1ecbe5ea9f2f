package listener

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestMerge: connections to either listener come out of the merged one;
// Close closes both and ends Accept.
func TestMerge(t *testing.T) {
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := Merge(a, b)
	if m.Addr() != a.Addr() {
		t.Fatalf("Addr %v, want the first's %v", m.Addr(), a.Addr())
	}
	for _, ln := range []net.Listener{b, a} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got, err := m.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if got.LocalAddr().String() != ln.Addr().String() {
			t.Fatalf("accepted on %v, dialled %v", got.LocalAddr(), ln.Addr())
		}
		got.Close()
	}
	accepted := make(chan error, 1)
	go func() {
		_, err := m.Accept()
		accepted <- err
	}()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-accepted:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
	for _, ln := range []net.Listener{a, b} {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Close()
			t.Fatalf("%v still accepts after Close", ln.Addr())
		}
	}
}
