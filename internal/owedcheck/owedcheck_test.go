package owedcheck

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond until it holds; the bound only stops a broken run.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func run(t *testing.T, s *Set) {
	s.Start()
	t.Cleanup(func() { s.Stop(slog.Default()) })
}

// TestTriesUntilDone: a user is tried until a try succeeds, then forgotten.
func TestTriesUntilDone(t *testing.T) {
	var mu sync.Mutex
	tries := map[[16]byte]int{}
	s := New(Config{Every: 5 * time.Millisecond}, func(_ context.Context, u [16]byte) bool {
		mu.Lock()
		defer mu.Unlock()
		tries[u]++
		return tries[u] >= 3 // storage answers on the third try
	})
	run(t, s)
	a, b := [16]byte{1}, [16]byte{2}
	if !s.Owe(a) || !s.Owe(b) || !s.Owe(a) {
		t.Fatal("Owe refused with room")
	}
	waitFor(t, "both paid", func() bool { return s.Ended(Paid) == 2 })
	if s.Len() != 0 {
		t.Fatalf("%d still owed after both paid", s.Len())
	}
	mu.Lock()
	defer mu.Unlock()
	if tries[a] != 3 || tries[b] != 3 {
		t.Fatalf("tries %v: want 3 each (owing twice is owing once)", tries)
	}
}

// TestOwedDuringATry: a user owed again while a try runs is tried again,
// even if that try succeeds (its check may have read before the second
// message was stored).
func TestOwedDuringATry(t *testing.T) {
	u := [16]byte{7}
	var s *Set
	var mu sync.Mutex
	n := 0
	s = New(Config{Every: 5 * time.Millisecond}, func(context.Context, [16]byte) bool {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			s.Owe(u)
		}
		return true
	})
	run(t, s)
	s.Owe(u)
	waitFor(t, "paid", func() bool { return s.Ended(Paid) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if n != 2 {
		t.Fatalf("%d tries, want 2", n)
	}
}

// TestGivesUpAndRefuses: a user whose holder is never found is given up
// after For; a full Set refuses more.
func TestGivesUpAndRefuses(t *testing.T) {
	s := New(Config{Every: 5 * time.Millisecond, For: 50 * time.Millisecond, Max: 2},
		func(context.Context, [16]byte) bool { return false })
	if !s.Owe([16]byte{1}) || !s.Owe([16]byte{2}) {
		t.Fatal("Owe refused with room")
	}
	if s.Owe([16]byte{3}) || s.Ended(Refused) != 1 || s.Len() != 2 {
		t.Fatalf("full set: refused %d, len %d", s.Ended(Refused), s.Len())
	}
	run(t, s)
	waitFor(t, "given up", func() bool { return s.Ended(GaveUp) == 2 })
	if s.Len() != 0 || s.Ended(Paid) != 0 {
		t.Fatalf("len %d paid %d after giving up", s.Len(), s.Ended(Paid))
	}
	if !s.Owe([16]byte{3}) {
		t.Fatal("room again, still refused")
	}
}

// TestStopReturnsOwed: Stop returns what is left, and a try under way
// sees its context cancelled.
func TestStopReturnsOwed(t *testing.T) {
	trying := make(chan struct{})
	s := New(Config{Every: time.Millisecond}, func(ctx context.Context, _ [16]byte) bool {
		close(trying)
		<-ctx.Done() // storage hangs until the Set stops
		return false
	})
	s.Owe([16]byte{1})
	s.Start()
	<-trying
	if left := s.Stop(slog.Default()); left != 1 {
		t.Fatalf("Stop left %d, want 1", left)
	}
}
