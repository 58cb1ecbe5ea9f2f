package listener

import (
	"errors"
	"log/slog"
	"strings"
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

type count struct{ n uint64 }

func (c *count) Inc()        { c.n++ }
func (c *count) Get() uint64 { return c.n }

// TestLogAcceptErrors: every error is counted, one line a minute logged
// with its prefix and the count.
func TestLogAcceptErrors(t *testing.T) {
	var out strings.Builder
	var c count
	report := LogAcceptErrors(slog.New(slog.NewTextHandler(&out, nil)), "node API: ", &c)
	for range 3 {
		report(errors.New("accept4: too many open files"))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if c.n != 3 || len(lines) != 1 || !strings.Contains(lines[0], `msg="node API: accept failed`) ||
		!strings.Contains(lines[0], "accept_errors_total=1") || !strings.Contains(lines[0], "too many open files") {
		t.Fatalf("counted %d, logged %q; want 3 counted and one line", c.n, lines)
	}
}
