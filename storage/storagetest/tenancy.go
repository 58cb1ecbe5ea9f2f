package storagetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// The push API's storage (storage.PushStore): pushes by device key, the
// count of a client's open pushes, idempotency keys.

// keyedPush is a pending push of client to pushKey created at created (ms).
func keyedPush(client, pushKey string, created int64) storage.Push {
	p := newPush(storage.PushPending, time.Now().UnixMilli())
	p.Client, p.PushKey, p.Created = client, pushKey, created
	return p
}

// pagesByKey pages through PushesByKey with pages of page and returns the
// ids in the order listed.
func pagesByKey(t *testing.T, s storage.Store, client, pushKey string, page int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for range 1000 {
		ps, next, err := s.PushesByKey(ctx(t), client, pushKey, cursor, page)
		must(t, err, "pushes by key")
		if len(ps) > page {
			t.Fatalf("page of %d has %d pushes", page, len(ps))
		}
		got = append(got, ids(ps)...)
		if next == "" {
			return got
		}
		cursor = next
	}
	t.Fatal("pushes by key: more than 1000 pages")
	return nil
}

func testPushesByKey(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	var mine, all []storage.Push
	// Saved oldest first for one client, newest first for the other, so
	// that the order comes from Created, not the order of saving.
	for i := range 9 {
		p := keyedPush("team-a", "device-1", now-int64(100-i)*1000)
		must(t, s.SavePush(ctx(t), p), "save")
		mine = append(mine, p)
	}
	for i := range 4 {
		p := keyedPush("team-b", "device-1", now-int64(50+i)*1000+500)
		must(t, s.SavePush(ctx(t), p), "save")
		all = append(all, p)
	}
	bridged := keyedPush("", "device-1", now-10_000)
	must(t, s.SavePush(ctx(t), bridged), "save bridged")
	all = append(append(all, mine...), bridged)
	must(t, s.SavePush(ctx(t), keyedPush("team-a", "device-2", now)), "save another key")
	must(t, s.SavePush(ctx(t), keyedPush("team-a", "device-10", now)), "save a key device-1 prefixes")

	newestFirst := func(ps []storage.Push) []string {
		ps = slices.Clone(ps)
		slices.SortFunc(ps, func(a, b storage.Push) int {
			if a.Created != b.Created {
				return int(b.Created - a.Created)
			}
			return 0
		})
		return ids(ps)
	}
	for _, page := range []int{1, 4, 9, 100} {
		sameList(t, pagesByKey(t, s, "team-a", "device-1", page), newestFirst(mine), fmt.Sprintf("team-a's pushes to device-1, pages of %d", page))
		sameList(t, pagesByKey(t, s, storage.AllClients, "device-1", page), newestFirst(all), fmt.Sprintf("every client's pushes to device-1, pages of %d", page))
	}
	sameList(t, pagesByKey(t, s, "", "device-1", 10), ids([]storage.Push{bridged}), "the client-less (bridged) pushes to device-1")
	sameList(t, pagesByKey(t, s, "team-c", "device-1", 10), nil, "a client without pushes to the key")

	// A push moved on stays listed, with its new state.
	must(t, s.UpdatePush(ctx(t), &mine[8], moved(mine[8], storage.PushRetry, now+60_000)), "move")
	got, _, err := s.PushesByKey(ctx(t), "team-a", "device-1", "", 1)
	must(t, err, "pushes by key after a move")
	if len(got) != 1 || got[0].ID != mine[8].ID || got[0].State != storage.PushRetry {
		t.Fatalf("after a move: %+v, want %s in RETRY", got, mine[8].ID)
	}
	_, _, err = s.PushesByKey(ctx(t), "team-a", "device-1", "not a cursor", 10)
	wantKind(t, err, storage.ErrInvalid, "bad cursor")
	_, _, err = s.PushesByKey(ctx(t), "team-a", "", "", 10)
	wantKind(t, err, storage.ErrInvalid, "no push key")
	_, _, err = s.PushesByKey(ctx(t), "team-a", "device-1", "", storage.MaxPushPage+1)
	wantKind(t, err, storage.ErrInvalid, "a limit too large")
}

// A finished push's entries expire with it: it is listed while it is
// kept, then no more.
func testPushesByKeyExpire(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	p := keyedPush("team-a", "device-x", now-1000)
	q := keyedPush("team-a", "device-x", now)
	must(t, s.SavePush(ctx(t), p), "save")
	must(t, s.SavePush(ctx(t), q), "save")
	done := moved(p, storage.PushSent, now)
	done.TTL = 1
	must(t, s.UpdatePush(ctx(t), &p, done), "finish with a TTL")
	deadline := time.Now().Add(30 * time.Second)
	for {
		listed := pagesByKey(t, s, "team-a", "device-x", 1)
		if !slices.Contains(listed, p.ID.String()) {
			sameList(t, listed, ids([]storage.Push{q}), "after the expiry")
			sameList(t, pagesByKey(t, s, storage.AllClients, "device-x", 10), ids([]storage.Push{q}), "every client's, after the expiry")
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a push with a 1s TTL still listed by key after 30s")
		}
		time.Sleep(50 * time.Millisecond) // polling an expiry the server decides; not a wait for a reply
	}
}

func testCountOpen(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	count := func(client string, limit int) int {
		t.Helper()
		n, err := s.CountOpen(ctx(t), client, limit)
		must(t, err, "count open")
		return n
	}
	var open []storage.Push
	for i, state := range []storage.PushState{storage.PushScheduled, storage.PushPending, storage.PushInMemory, storage.PushRetry} {
		for j := range 3 {
			p := keyedPush("team-a", fmt.Sprintf("d%d-%d", i, j), now)
			p.State, p.At = state, now+60_000
			must(t, s.SavePush(ctx(t), p), "save")
			open = append(open, p)
		}
	}
	for _, state := range []storage.PushState{storage.PushSent, storage.PushFailed, storage.PushGivenUp} {
		p := keyedPush("team-a", "done", now)
		p.State = state
		must(t, s.SavePush(ctx(t), p), "save a final push")
	}
	must(t, s.SavePush(ctx(t), keyedPush("team-b", "d", now)), "save another client's")
	if n := count("team-a", 100); n != 12 {
		t.Fatalf("team-a has %d open, want 12", n)
	}
	if n := count("team-a", 5); n != 5 {
		t.Fatalf("counted up to 5: %d", n)
	}
	if n := count("team-b", 100); n != 1 {
		t.Fatalf("team-b has %d open, want 1", n)
	}
	if n := count("team-c", 100); n != 0 {
		t.Fatalf("team-c has %d open, want 0", n)
	}
	// A move between open states leaves the count; finishing takes the
	// push out of it.
	claimed := moved(open[1], storage.PushInMemory, now+300_000)
	must(t, s.UpdatePush(ctx(t), &open[1], claimed), "claim")
	if n := count("team-a", 100); n != 12 {
		t.Fatalf("after a claim: %d open, want 12", n)
	}
	done := moved(claimed, storage.PushSent, now)
	done.TTL = 3600
	must(t, s.UpdatePush(ctx(t), &claimed, done), "finish")
	failed := moved(open[0], storage.PushFailed, now)
	must(t, s.UpdatePush(ctx(t), &open[0], failed), "fail")
	if n := count("team-a", 100); n != 10 {
		t.Fatalf("after two finished: %d open, want 10", n)
	}
	// A losing update changes nothing.
	wantKind(t, s.UpdatePush(ctx(t), &open[0], moved(open[0], storage.PushSent, now)), storage.ErrConflict, "finish from a stale version")
	if n := count("team-a", 100); n != 10 {
		t.Fatalf("after a conflict: %d open, want 10", n)
	}
	_, err := s.CountOpen(ctx(t), "team-a", 0)
	wantKind(t, err, storage.ErrInvalid, "limit 0")
	_, err = s.CountOpen(ctx(t), storage.AllClients, 10)
	wantKind(t, err, storage.ErrInvalid, "every client")
}

// Pushes whose ids all end alike (a backend that spreads a client's
// entries by id puts them together) are counted all the same.
func testCountOpenUneven(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	for range 30 {
		p := keyedPush("team-u", "d", now)
		p.ID[15] = 7
		must(t, s.SavePush(ctx(t), p), "save")
	}
	for _, limit := range []int{1, 16, 29, 30, 31, 100, storage.MaxOpenCount} {
		n, err := s.CountOpen(ctx(t), "team-u", limit)
		must(t, err, "count open")
		if want := min(30, limit); n != want {
			t.Fatalf("count up to %d: %d, want %d", limit, n, want)
		}
	}
}

func testIdempotencyKeys(t *testing.T, s storage.Store) {
	claim := func(client, key string, id uuid.UUID, ttl time.Duration) uuid.UUID {
		t.Helper()
		got, err := s.ClaimIdempotencyKey(ctx(t), client, key, id, ttl)
		must(t, err, "claim")
		return got
	}
	a, b, c := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	if got := claim("team-a", "order-17", a, time.Hour); got != a {
		t.Fatalf("first claim: %s, want its own %s", got, a)
	}
	if got := claim("team-a", "order-17", b, time.Hour); got != a {
		t.Fatalf("repeat: %s, want the first %s", got, a)
	}
	if got := claim("team-b", "order-17", c, time.Hour); got != c {
		t.Fatalf("another client's key: %s, want its own %s", got, c)
	}
	// Release only frees a claim that names the id.
	must(t, s.ReleaseIdempotencyKey(ctx(t), "team-a", "order-17", b), "release with another id")
	if got := claim("team-a", "order-17", b, time.Hour); got != a {
		t.Fatalf("after a release naming another id: %s, want %s", got, a)
	}
	must(t, s.ReleaseIdempotencyKey(ctx(t), "team-a", "order-17", a), "release")
	if got := claim("team-a", "order-17", b, time.Hour); got != b {
		t.Fatalf("after the release: %s, want the new %s", got, b)
	}
	if got := claim("team-b", "order-17", a, time.Hour); got != c {
		t.Fatalf("another client's key after a release: %s, want %s", got, c)
	}
	must(t, s.ReleaseIdempotencyKey(ctx(t), "team-z", "nothing", a), "release of nothing")

	// A claim lasts its TTL.
	short := uuid.Must(uuid.NewV7())
	claim("team-a", "short", short, time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		next := uuid.Must(uuid.NewV7())
		got := claim("team-a", "short", next, time.Hour)
		if got == next {
			break
		}
		if got != short || time.Now().After(deadline) {
			t.Fatalf("claim of an expiring key: %s, want %s until it expires (30s)", got, short)
		}
		time.Sleep(50 * time.Millisecond) // polling an expiry the server decides; not a wait for a reply
	}

	for name, call := range map[string]func() error{
		"empty key": func() error { _, err := s.ClaimIdempotencyKey(ctx(t), "team-a", "", a, time.Hour); return err },
		"long key": func() error {
			_, err := s.ClaimIdempotencyKey(ctx(t), "team-a", string(make([]byte, 256)), a, time.Hour)
			return err
		},
		"nil id": func() error { _, err := s.ClaimIdempotencyKey(ctx(t), "team-a", "k", uuid.Nil, time.Hour); return err },
		"no ttl": func() error { _, err := s.ClaimIdempotencyKey(ctx(t), "team-a", "k", a, 0); return err },
		"every client": func() error {
			_, err := s.ClaimIdempotencyKey(ctx(t), storage.AllClients, "k", a, time.Hour)
			return err
		},
		"release no key": func() error { return s.ReleaseIdempotencyKey(ctx(t), "team-a", "", a) },
	} {
		wantKind(t, call(), storage.ErrInvalid, name)
	}
}

// Of concurrent claims of one key, exactly one stores its id, and every
// one returns it.
func testIdempotencyOneWinner(t *testing.T, s storage.Store) {
	for round := range 5 {
		key := fmt.Sprintf("race-%d", round)
		got := make([]uuid.UUID, 8)
		mine := make([]uuid.UUID, 8)
		var wg sync.WaitGroup
		for i := range 8 {
			mine[i] = uuid.Must(uuid.NewV7())
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, err := s.ClaimIdempotencyKey(ctx(t), "team-a", key, mine[i], time.Hour)
				if err != nil {
					t.Errorf("claim: %v", err)
				}
				got[i] = id
			}()
		}
		wg.Wait()
		winners := 0
		for i := range got {
			if got[i] != got[0] {
				t.Fatalf("round %d: claims returned %v: not one id", round, got)
			}
			if got[i] == mine[i] {
				winners++
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d claims stored their id, want 1", round, winners)
		}
	}
}

// testTenancyClosed: every push API storage call of a closed store is
// ErrUnavailable.
func testTenancyClosed(t *testing.T, s storage.Store) {
	must(t, s.Close(), "close")
	id := uuid.Must(uuid.NewV7())
	_, _, err := s.PushesByKey(ctx(t), "team-a", "k", "", 10)
	wantKind(t, err, storage.ErrUnavailable, "pushes by key after close")
	_, err = s.CountOpen(ctx(t), "team-a", 10)
	wantKind(t, err, storage.ErrUnavailable, "count open after close")
	_, err = s.ClaimIdempotencyKey(ctx(t), "team-a", "k", id, time.Hour)
	wantKind(t, err, storage.ErrUnavailable, "claim after close")
	wantKind(t, s.ReleaseIdempotencyKey(ctx(t), "team-a", "k", id), storage.ErrUnavailable, "release after close")
}
