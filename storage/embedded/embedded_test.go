package embedded

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/storagetest"
	"github.com/google/uuid"
)

func open(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{
		New: func(t testing.TB) storage.Store { return open(t, Config{}) },
	})
}

func msgFor(chid uuid.UUID, ttl int64, received time.Time) storage.Message {
	return storage.Message{CHID: chid, Version: "v", SortKey: uint64(received.UnixNano()), TTL: ttl}
}

// countPrefix counts the keys on disk under prefix.
func countPrefix(t *testing.T, s *Store, prefix byte) int {
	t.Helper()
	n := 0
	if err := s.scan([]byte{prefix}, nil, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSweeperDeletesExpiredMessagesFromDisk(t *testing.T) {
	s := open(t, Config{SweepInterval: time.Hour})
	ctx := context.Background()
	uaid, chid := uuid.New(), uuid.New()
	now := time.Now()
	short := msgFor(chid, 10, now)
	short.SortKey = storage.NewSortKey()
	long := msgFor(chid, 3600, now)
	long.SortKey = storage.NewSortKey()
	topic := msgFor(chid, 10, now)
	topic.Topic, topic.SortKey = "t", storage.NewSortKey()
	for _, m := range []storage.Message{short, long, topic} {
		if err := s.SaveMessage(ctx, uaid, m); err != nil {
			t.Fatal(err)
		}
	}
	acked := msgFor(chid, 10, now)
	acked.SortKey = storage.NewSortKey()
	if err := s.SaveMessage(ctx, uaid, acked); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMessage(ctx, uaid, acked.Key()); err != nil {
		t.Fatal(err)
	}
	if got := countPrefix(t, s, prefixMessage); got != 3 {
		t.Fatalf("%d messages on disk, want 3", got)
	}
	if got := countPrefix(t, s, prefixExpiry); got != 3 {
		t.Fatalf("%d expiry entries, want 3 (the ack must remove its entry)", got)
	}

	n, err := s.Sweep(now.Add(11 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("swept %d entries, want 2", n)
	}
	if got := countPrefix(t, s, prefixMessage); got != 1 {
		t.Fatalf("%d messages on disk after sweep, want 1", got)
	}
	left, err := s.TimestampMessages(ctx, uaid, 0, 10)
	if err != nil || len(left) != 1 || left[0].SortKey != long.SortKey {
		t.Fatalf("after sweep: %+v %v", left, err)
	}
}

func TestSweeperExpiresIdleUsers(t *testing.T) {
	s := open(t, Config{IdleTTL: time.Hour, SweepInterval: time.Hour})
	ctx := context.Background()
	idle, active, chid := uuid.New(), uuid.New(), uuid.New()
	for _, u := range []uuid.UUID{idle, active} {
		if err := s.Connect(ctx, storage.User{UAID: u, RouterType: "webpush", ConnectedAt: time.Now().UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddChannel(ctx, u, chid); err != nil {
			t.Fatal(err)
		}
		m := msgFor(chid, 3600*24, time.Now())
		m.SortKey = storage.NewSortKey()
		if err := s.SaveMessage(ctx, u, m); err != nil {
			t.Fatal(err)
		}
	}
	// The active user reconnects 40 minutes later (simulated by moving its
	// expiry): only the idle one is past its hour at the sweep.
	if _, err := s.Sweep(time.Now().Add(30 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUser(ctx, idle); err != nil {
		t.Fatalf("user expired before its idle period: %v", err)
	}
	s.cfg.IdleTTL = 2 * time.Hour
	if err := s.Connect(ctx, storage.User{UAID: active, RouterType: "webpush", ConnectedAt: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sweep(time.Now().Add(61 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := countPrefix(t, s, prefixChannel); got != 1 {
		t.Fatalf("%d channels on disk, want only the active user's", got)
	}
	if got := countPrefix(t, s, prefixMessage); got != 1 {
		t.Fatalf("%d messages on disk, want only the active user's", got)
	}
	if _, err := s.GetUser(ctx, active); err != nil {
		t.Fatalf("active user expired: %v", err)
	}
}

func TestDurableAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	uaid, chid := uuid.New(), uuid.New()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(ctx, storage.User{UAID: uaid, RouterType: "webpush", NodeID: "n", ConnectedAt: 42}); err != nil {
		t.Fatal(err)
	}
	m := msgFor(chid, 60, time.Now())
	m.SortKey = storage.NewSortKey()
	if err := s.SaveMessage(ctx, uaid, m); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, Config{Dir: dir})
	u, err := s.GetUser(ctx, uaid)
	if err != nil || u.ConnectedAt != 42 || u.NodeID != "n" {
		t.Fatalf("after reopen: %+v %v", u, err)
	}
	if ms, err := s.TimestampMessages(ctx, uaid, 0, 10); err != nil || len(ms) != 1 {
		t.Fatalf("messages after reopen: %+v %v", ms, err)
	}
}

func TestCorruptRecordIsAnErrorNotAPanic(t *testing.T) {
	s := open(t, Config{})
	uaid := uuid.New()
	if err := s.db.Set(userKey(uaid), []byte{codecVersion, 0xff}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUser(context.Background(), uaid); err == nil {
		t.Fatal("corrupt record decoded without error")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {Dir: "x", IdleTTL: -1}, {Dir: "x", SweepInterval: -1}, {Dir: "x", CacheBytes: -1}} {
		if _, err := Open(c); err == nil {
			t.Fatalf("Open(%+v) accepted an invalid config", c)
		}
	}
}

// BenchmarkStore: durable (fsync per commit, shared by concurrent
// committers), as the service runs it.
func BenchmarkStore(b *testing.B) {
	storagetest.Bench(b, storagetest.Harness{New: func(t testing.TB) storage.Store { return open(t, Config{}) }})
}

// TestDataDirInUse: a store on a directory another process holds (a
// second node started on the same host with the same data-dir, or a tool
// run against a live node's data) fails with a message naming the
// setting, the process that holds it (PID and command line) and what to
// do, not a bare lock error; not the holder's arguments (flags may carry
// secrets). The other
// process is this test binary again (holdDirEnv).
func TestDataDirInUse(t *testing.T) {
	if dir := os.Getenv(holdDirEnv); dir != "" {
		s, err := Open(Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fmt.Println("held")
		io.Copy(io.Discard, os.Stdin) // until the parent closes it
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDataDirInUse$")
	cmd.Env = append(os.Environ(), holdDirEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "held\n" {
		t.Fatalf("the other process: %q %v", line, err)
	}
	s, err := Open(Config{Dir: dir})
	if err == nil {
		s.Close()
		t.Fatal("a store opened a directory another process holds")
	}
	// It names the holder, by PID and command line, and what to do.
	holder := fmt.Sprintf("data-dir %s is in use by process %d (%s)", dir, cmd.Process.Pid, os.Args[0])
	var le *LockedError
	if !errors.As(err, &le) || le.PID != cmd.Process.Pid || !strings.Contains(err.Error(), holder) ||
		!strings.Contains(err.Error(), "stop it first, or ask the live node ("+LiveDiagnosis) {
		t.Errorf("error %q\ndoes not say %q, and to stop it or ask the live node", err, holder)
	}
}

// holdDirEnv makes TestDataDirInUse hold that directory, as the other
// process.
const holdDirEnv = "EMBEDDED_TEST_HOLD_DIR"
