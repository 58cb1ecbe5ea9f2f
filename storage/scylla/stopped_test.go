package scylla

import (
	"context"
	"errors"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/storage"
)

// TestServerStopped kills the CQL server whose PID is CQL_STOP_PID and
// checks that the store degrades to ErrUnavailable promptly, without
// panicking, and that Close releases every goroutine the store started. It
// destroys the server, so it only runs when asked to (make test runs it
// last, on a node of its own).
func TestServerStopped(t *testing.T) {
	pidText := os.Getenv("CQL_STOP_PID")
	if pidText == "" {
		t.Skip("set CQL_STOP_PID to the PID of a CQL server this test may kill (make test runs it last)")
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 1 {
		t.Fatalf("CQL_STOP_PID %q is not a PID", pidText)
	}
	cfg := testConfig(t)
	cfg.Timeout = 2 * time.Second
	cfg.ConnectTimeout = 2 * time.Second
	// No createKeyspace: its cleanup would need the server this test kills.
	if err := ApplySchema(tctx(t), cfg, testReplication); err != nil {
		t.Fatalf("ApplySchema: %v", err)
	}
	baseline := settledGoroutines()

	s, err := New(tctx(t), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	uaid, chid := uuid.New(), uuid.New()
	ok(t, s.SaveMessage(tctx(t), uaid, storage.Message{CHID: chid, SortKey: storage.NewSortKey(), TTL: 60, Version: "v"}), "save before stop")
	t.Logf("goroutines: %d before New, %d with the store open", baseline, runtime.NumGoroutine())

	killAndWait(t, pid)

	calls := map[string]func(context.Context) error{
		"save": func(c context.Context) error {
			return s.SaveMessage(c, uaid, storage.Message{CHID: chid, SortKey: storage.NewSortKey(), TTL: 60, Version: "v2"})
		},
		"get":    func(c context.Context) error { _, err := s.GetUser(c, uaid); return err },
		"health": func(c context.Context) error { return s.Health(c) },
	}
	for _, name := range []string{"save", "get", "health"} {
		c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		start := time.Now()
		err := calls[name](c)
		cancel()
		d := time.Since(start)
		t.Logf("%s after stop: %v in %v", name, err, d)
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("%s after the server stopped: %v, want ErrUnavailable", name, err)
		}
		if d > 10*time.Second {
			t.Errorf("%s took %v to fail", name, d)
		}
	}

	ok(t, s.Close(), "close")
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline+1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline+1 {
		var dump strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Fatalf("%d goroutines 5s after Close, baseline %d:\n%s", n, baseline, dump.String())
	}
	t.Logf("goroutines after Close: %d (baseline %d)", runtime.NumGoroutine(), baseline)
}

// settledGoroutines waits for goroutines of earlier sessions (ApplySchema's)
// to finish, then returns the count.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 40 {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// killAndWait sends SIGTERM to pid and waits up to a minute for it to
// exit (Cassandra drains and flushes first).
func killAndWait(t *testing.T, pid int) {
	t.Helper()
	p, err := os.FindProcess(pid)
	ok(t, err, "find process")
	ok(t, p.Signal(syscall.SIGTERM), "SIGTERM")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := proc.WaitGone(ctx, pid); err != nil {
		t.Fatalf("a minute after SIGTERM: %v", err)
	}
}
