package listener

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestThrottle: of many calls at once, one gets through a period; after
// the period, one more.
func TestThrottle(t *testing.T) {
	var th Throttle
	var through atomic.Int32
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if th.Allow(time.Hour) {
				through.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := through.Load(); n != 1 {
		t.Fatalf("%d calls got through in one period, want 1", n)
	}
	var short Throttle
	if !short.Allow(time.Millisecond) {
		t.Fatal("the first call was held back")
	}
	start := time.Now()
	for !short.Allow(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("no call got through after the period")
		}
		time.Sleep(100 * time.Microsecond)
	}
}
