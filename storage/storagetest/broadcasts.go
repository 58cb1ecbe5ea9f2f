package storagetest

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/autopush-go/autopush/storage"
)

// testBroadcasts: an empty store has none; a put is read back by the next
// read; a put replaces the version; every id is listed.
func testBroadcasts(t *testing.T, s storage.Store) {
	got, err := s.Broadcasts(ctx(t))
	must(t, err, "broadcasts of an empty store")
	if got == nil || len(got) != 0 {
		t.Fatalf("empty store: %#v, want an empty map", got)
	}
	want := map[string]string{
		"remote-settings/monitor_changes": `"1700000000000"`,
		"test/b":                          "v1",
	}
	for id, v := range want {
		must(t, s.PutBroadcast(ctx(t), id, v), "put "+id)
	}
	sameBroadcasts(t, s, want, "after two puts")
	must(t, s.PutBroadcast(ctx(t), "test/b", "v2"), "replace")
	want["test/b"] = "v2"
	sameBroadcasts(t, s, want, "after a replace")
	long := strings.Repeat("x", storage.MaxBroadcastLen)
	must(t, s.PutBroadcast(ctx(t), long, long), "put the longest id and version")
	want[long] = long
	sameBroadcasts(t, s, want, "with the longest id")
}

// testConcurrentBroadcasts: concurrent puts of distinct ids all land, and
// concurrent puts of one id leave one of the versions written.
func testConcurrentBroadcasts(t *testing.T, s storage.Store) {
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- s.PutBroadcast(ctx(t), fmt.Sprintf("own/%d", i), "v")
		}()
		go func() {
			defer wg.Done()
			errs <- s.PutBroadcast(ctx(t), "shared/one", fmt.Sprintf("v%d", i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err, "concurrent put")
	}
	got, err := s.Broadcasts(ctx(t))
	must(t, err, "broadcasts")
	if len(got) != n+1 {
		t.Fatalf("%d broadcasts, want %d: %v", len(got), n+1, got)
	}
	var v int
	if _, err := fmt.Sscanf(got["shared/one"], "v%d", &v); err != nil || v < 0 || v >= n {
		t.Fatalf("shared/one is %q, want one of the versions written", got["shared/one"])
	}
}

// testInvalidBroadcasts: bad ids and versions are ErrInvalid and write
// nothing.
func testInvalidBroadcasts(t *testing.T, s storage.Store) {
	long := strings.Repeat("x", storage.MaxBroadcastLen+1)
	for _, c := range []struct{ id, version string }{
		{"", "v"}, {"id", ""}, {long, "v"}, {"id", long},
		{"with space", "v"}, {"id", "v\n"}, {"ctl\x00", "v"}, {"é", "v"}, {"id", "\x7f"},
	} {
		err := s.PutBroadcast(ctx(t), c.id, c.version)
		if !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("put %q = %q: %v, want ErrInvalid", c.id, c.version, err)
		}
	}
	sameBroadcasts(t, s, map[string]string{}, "after invalid puts")
}

func sameBroadcasts(t testing.TB, s storage.Store, want map[string]string, what string) {
	t.Helper()
	got, err := s.Broadcasts(ctx(t))
	must(t, err, "broadcasts "+what)
	if !maps.Equal(got, want) {
		t.Fatalf("%s: broadcasts %v, want %v", what, got, want)
	}
}
