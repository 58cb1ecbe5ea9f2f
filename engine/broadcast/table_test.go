package broadcast

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/autopush-go/autopush/internal/protocol"
)

func bc(pairs ...string) []protocol.Broadcast {
	var out []protocol.Broadcast
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, protocol.Broadcast{ID: pairs[i], Version: pairs[i+1]})
	}
	return out
}

// text renders a list as "id=v,id=v" sorted, for comparisons.
func text(bs []protocol.Broadcast) string {
	var s []string
	for _, b := range bs {
		s = append(s, b.ID+"="+b.Version)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

func TestUpdate(t *testing.T) {
	tb := New()
	if r := tb.Update(map[string]string{"a/x": "1", "b/y": "1"}); r.Added != 2 || r.Changed != 0 || r.Rejected != 0 || r.Gen != 1 {
		t.Fatalf("first update: %+v", r)
	}
	if r := tb.Update(map[string]string{"a/x": "1", "b/y": "1"}); r != (Result{Gen: 1}) {
		t.Fatalf("same versions again: %+v, want nothing changed and the generation kept", r)
	}
	r := tb.Update(map[string]string{"a/x": "2", "bad id": "1", "c/z": "", "d/w": "1"})
	if r.Added != 1 || r.Changed != 1 || r.Rejected != 2 || r.Gen != 2 {
		t.Fatalf("mixed update: %+v", r)
	}
	// An id a source stops listing keeps its version.
	want := map[string]string{"a/x": "2", "b/y": "1", "d/w": "1"}
	if got := tb.Versions(); !maps.Equal(got, want) {
		t.Fatalf("versions %v, want %v", got, want)
	}
	if tb.Known() != 3 {
		t.Fatalf("known %d", tb.Known())
	}
}

func TestUpdateCapsIDs(t *testing.T) {
	tb := New()
	src := map[string]string{}
	for i := range MaxIDs + 10 {
		src[fmt.Sprintf("id/%05d", i)] = "v"
	}
	if r := tb.Update(src); r.Added != MaxIDs || r.Rejected != 10 {
		t.Fatalf("over the cap: %+v", r)
	}
	// Known ids still change once the table is full.
	if r := tb.Update(map[string]string{"id/00000": "w", "new/one": "v"}); r.Changed != 1 || r.Rejected != 1 {
		t.Fatalf("full table: %+v", r)
	}
}

func TestSubscribeKnownUnknownStale(t *testing.T) {
	tb := New()
	tb.Update(map[string]string{"a/x": "v2", "b/y": "v1"})
	// a/x stale, b/y current, c/z unknown.
	s, changed, errs := tb.Subscribe(0, bc("a/x", "v1", "b/y", "v1", "c/z", "v0"), nil, nil)
	if s == 0 {
		t.Fatal("no subscription for known ids")
	}
	if text(changed) != "a/x=v2" {
		t.Errorf("changed %q, want the stale id with its current version", text(changed))
	}
	if text(errs) != "c/z="+protocol.BroadcastNotFound {
		t.Errorf("errs %q", text(errs))
	}
	// Nothing pending: a catch-up sends nothing and keeps s.
	if s2, c := tb.CatchUp(s, nil); s2 != s || len(c) != 0 {
		t.Fatalf("catch-up of a current subscription: %d %v", s2, c)
	}
	// An unknown id alone subscribes nothing.
	if s3, changed, errs := tb.Subscribe(0, bc("c/z", "v0"), nil, nil); s3 != 0 || len(changed) != 0 || len(errs) != 1 {
		t.Fatalf("unknown only: %d %v %v", s3, changed, errs)
	}
	tb.Release(s)
	if tb.Subs() != 0 {
		t.Fatalf("%d subscriptions left", tb.Subs())
	}
}

func TestSubscriptionsAreShared(t *testing.T) {
	tb := New()
	tb.Update(map[string]string{"a/x": "1", "b/y": "1"})
	var subs []Sub
	for range 1000 {
		// The same set in either order, current or stale: one entry.
		s, _, _ := tb.Subscribe(0, bc("b/y", "1", "a/x", "0"), nil, nil)
		subs = append(subs, s)
	}
	if tb.Subs() != 1 {
		t.Fatalf("1,000 identical subscriptions take %d entries", tb.Subs())
	}
	other, _, _ := tb.Subscribe(0, bc("a/x", "1"), nil, nil)
	if tb.Subs() != 2 || other == subs[0] {
		t.Fatalf("a different set: %d entries, sub %d", tb.Subs(), other)
	}
	tb.Release(other)
	for _, s := range subs {
		tb.Release(s)
	}
	if tb.Subs() != 0 {
		t.Fatalf("%d entries left after every release", tb.Subs())
	}
	// A freed slot is reused.
	again, _, _ := tb.Subscribe(0, bc("a/x", "1"), nil, nil)
	if int(again) > 2 {
		t.Fatalf("slot %d: freed slots are not reused", again)
	}
}

func TestCatchUpSendsEachChangeOnce(t *testing.T) {
	tb := New()
	tb.Update(map[string]string{"a/x": "1", "b/y": "1", "c/z": "1"})
	s, _, _ := tb.Subscribe(0, bc("a/x", "1", "b/y", "1"), nil, nil)
	tb.Update(map[string]string{"a/x": "2", "c/z": "2"}) // c/z: not subscribed
	s, changed := tb.CatchUp(s, nil)
	if text(changed) != "a/x=2" {
		t.Fatalf("catch-up sent %q", text(changed))
	}
	if _, again := tb.CatchUp(s, nil); len(again) != 0 {
		t.Fatalf("second catch-up sent %q again", text(again))
	}
	// Two changes missed: the latest version, once.
	tb.Update(map[string]string{"b/y": "2"})
	tb.Update(map[string]string{"b/y": "3", "a/x": "3"})
	s, changed = tb.CatchUp(s, nil)
	if text(changed) != "a/x=3,b/y=3" {
		t.Fatalf("after two changes: %q", text(changed))
	}
	// Subscribing to more sends what was pending plus the new id's version.
	tb.Update(map[string]string{"a/x": "4"})
	s, changed, _ = tb.Subscribe(s, bc("c/z", "1"), nil, nil)
	if text(changed) != "a/x=4,c/z=2" {
		t.Fatalf("subscribe with a pending change: %q", text(changed))
	}
	// The pending id named again in the request is listed once.
	tb.Update(map[string]string{"a/x": "5"})
	s, changed, _ = tb.Subscribe(s, bc("a/x", "0"), nil, nil)
	if text(changed) != "a/x=5" {
		t.Fatalf("pending and requested: %q", text(changed))
	}
	tb.Release(s)
	if tb.Subs() != 0 {
		t.Fatalf("%d entries left", tb.Subs())
	}
}

// TestConcurrentUse runs clients subscribing, catching up and leaving while
// the versions change (go test -race); every reference is given back.
func TestConcurrentUse(t *testing.T) {
	tb := New()
	tb.Update(map[string]string{"a/x": "0", "b/y": "0"})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tb.Update(map[string]string{"a/x": fmt.Sprint(i), "b/y": fmt.Sprint(i / 2)})
		}
	}()
	var clients sync.WaitGroup
	for c := range 8 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for i := range 500 {
				req := bc("a/x", "0")
				if (c+i)%2 == 0 {
					req = bc("a/x", "0", "b/y", "0")
				}
				s, _, _ := tb.Subscribe(0, req, nil, nil)
				s, _ = tb.CatchUp(s, nil)
				s, _, _ = tb.Subscribe(s, bc("b/y", "0", "no/such", "0"), nil, nil)
				tb.Release(s)
			}
		}()
	}
	clients.Wait()
	close(stop)
	wg.Wait()
	if tb.Subs() != 0 {
		t.Fatalf("%d entries left", tb.Subs())
	}
}

// BenchmarkCatchUp is one client's step of a fan-out: moving from an old
// generation's entry to the new one, which the clients before it already
// made (the common case), and sending the change.
func BenchmarkCatchUp(b *testing.B) {
	tb := New()
	tb.Update(map[string]string{"remote-settings/monitor_changes": `"1"`})
	old, _, _ := tb.Subscribe(0, bc("remote-settings/monitor_changes", `"1"`), nil, nil)
	tb.Update(map[string]string{"remote-settings/monitor_changes": `"2"`})
	tb.mu.Lock()
	tb.subs[old].refs++ // the old entry stays while the benchmark moves off it
	tb.mu.Unlock()
	cur, _ := tb.CatchUp(old, nil)
	var changed []protocol.Broadcast
	b.ReportAllocs()
	for b.Loop() {
		tb.mu.Lock()
		tb.subs[old].refs++
		tb.mu.Unlock()
		var next Sub
		next, changed = tb.CatchUp(old, changed[:0])
		if next != cur || len(changed) != 1 {
			b.Fatalf("moved to %d (want %d), sent %v", next, cur, changed)
		}
		tb.Release(next)
	}
}
