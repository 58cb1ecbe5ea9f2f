package storagetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// newPush builds a push in state with At = at (ms).
func newPush(state storage.PushState, at int64) storage.Push {
	now := time.Now().UnixMilli()
	return storage.Push{
		ID: uuid.Must(uuid.NewV7()), Provider: "swrve", Platform: "IOS", PrototypeKey: "Hello",
		PushKey: "463B3209-6E33-4E88-AF52-CDA87C0550EC", Message: "Hello client! ✓", State: state,
		At: at, Created: now, Updated: now, Version: 1,
	}
}

// moved returns p advanced one version into state at.
func moved(p storage.Push, state storage.PushState, at int64) storage.Push {
	n := p
	n.Attempts = slices.Clone(p.Attempts)
	n.State, n.At, n.Version, n.Updated = state, at, p.Version+1, time.Now().UnixMilli()
	return n
}

func ids(ps []storage.Push) []string {
	out := make([]string, len(ps))
	for i := range ps {
		out[i] = ps[i].ID.String()
	}
	return out
}

func testPushRoundTrip(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	p := newPush(storage.PushScheduled, now+3600_000)
	p.CronExpression = "0 0/5 14,18 ? * MON-FRI"
	p.Client = "marketing"
	must(t, s.SavePush(ctx(t), p), "save push")
	got, err := s.GetPush(ctx(t), p.ID)
	must(t, err, "get push")
	p.Attempts = nil
	got.Attempts = nil
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("got  %+v\nwant %+v", got, p)
	}
	resave(t, s, p, p, "save the same push twice")
	_, err = s.GetPush(ctx(t), uuid.New())
	wantKind(t, err, storage.ErrNotFound, "get a missing push")

	// The attempt log round-trips with every field.
	next := moved(p, storage.PushRetry, now+60_000)
	next.Attempts = []storage.Attempt{{
		N: 1, Status: storage.AttemptError, Node: "node-a", Started: now, Millis: 983,
		ErrorType: storage.ErrorProvider, ProviderCode: 503, ProviderReason: "UNAVAILABLE",
		ProviderMessage: "try later", Cause: "", DedupKey: p.ID.String(),
	}}
	must(t, s.UpdatePush(ctx(t), &p, next), "update push")
	got, err = s.GetPush(ctx(t), p.ID)
	must(t, err, "get updated push")
	if !reflect.DeepEqual(got, next) {
		t.Fatalf("after update got  %+v\nwant %+v", got, next)
	}
	resave(t, s, p, next, "save the push again after an update")
}

// resave repeats the create of p (a retried write) and checks that the
// stored push is still want: SavePush may refuse (ErrConflict) or do
// nothing, never roll a push back.
func resave(t *testing.T, s storage.Store, p, want storage.Push, what string) {
	t.Helper()
	if err := s.SavePush(ctx(t), p); err != nil && !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("%s: %v, want nil or a conflict", what, err)
	}
	got, err := s.GetPush(ctx(t), p.ID)
	must(t, err, what)
	if got.Attempts == nil && len(want.Attempts) == 0 {
		got.Attempts = want.Attempts
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got  %+v\nwant %+v", what, got, want)
	}
}

func testPushCompareAndSet(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	p := newPush(storage.PushPending, now)
	must(t, s.SavePush(ctx(t), p), "save")
	claimed := moved(p, storage.PushInMemory, now+300_000)
	claimed.Owner = "node-a"
	must(t, s.UpdatePush(ctx(t), &p, claimed), "claim")

	// A second claim from the same (now stale) read loses, and changes
	// nothing.
	other := moved(p, storage.PushInMemory, now+300_000)
	other.Owner = "node-b"
	wantKind(t, s.UpdatePush(ctx(t), &p, other), storage.ErrConflict, "claim from a stale version")
	got, err := s.GetPush(ctx(t), p.ID)
	must(t, err, "get")
	if got.Owner != "node-a" || got.Version != 2 {
		t.Fatalf("a losing claim changed the push: %+v", got)
	}
	missing := newPush(storage.PushPending, now)
	wantKind(t, s.UpdatePush(ctx(t), &missing, moved(missing, storage.PushSent, now)), storage.ErrNotFound, "update a missing push")
	bad := moved(claimed, storage.PushSent, now)
	bad.Version = claimed.Version + 2
	wantKind(t, s.UpdatePush(ctx(t), &claimed, bad), storage.ErrInvalid, "update skipping a version")
}

// testPushConcurrentClaims: of many nodes claiming one push from the same
// read, exactly one wins (the sender's guarantee against double sends).
func testPushConcurrentClaims(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	for round := range 5 {
		p := newPush(storage.PushPending, now)
		must(t, s.SavePush(ctx(t), p), "save")
		var wins, conflicts int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := moved(p, storage.PushInMemory, now+300_000)
				n.Owner = fmt.Sprintf("node-%d", i)
				err := s.UpdatePush(ctx(t), &p, n)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, storage.ErrConflict):
					conflicts++
				default:
					t.Errorf("claim: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || conflicts != 7 {
			t.Fatalf("round %d: %d claims won, %d lost; want 1 and 7", round, wins, conflicts)
		}
	}
}

// testPushUpdates: UpdatePushes is UpdatePush for each update on its own
// (a stopping sender node hands its queue back with it): the ones that
// apply move in the index; a stale version, a missing push, an invalid
// update or a repeated id fail alone and change nothing; a final state
// and a TTL work as in UpdatePush.
func testPushUpdates(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	const n = 250 // over the backends' batch sizes (scylla: 100 rows a batch)
	queued := make([]storage.Push, n)
	var updates []storage.PushUpdate
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range queued {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			p := newPush(storage.PushPending, now)
			claimed := moved(p, storage.PushInMemory, now+300_000)
			claimed.Owner = "node-a"
			if err := s.SavePush(ctx(t), p); err != nil {
				t.Errorf("save: %v", err)
			} else if err := s.UpdatePush(ctx(t), &p, claimed); err != nil {
				t.Errorf("claim: %v", err)
			}
			queued[i] = claimed
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i := range queued {
		updates = append(updates, storage.PushUpdate{Prev: &queued[i], Next: moved(queued[i], storage.PushPending, now+1)})
	}
	// Taken over by another node since node-a read it: a stale version.
	stale := queued[7]
	taken := moved(stale, storage.PushInMemory, now+600_000)
	taken.Owner = "node-b"
	must(t, s.UpdatePush(ctx(t), &stale, taken), "take over")
	missing := newPush(storage.PushInMemory, now+300_000)
	skips := moved(queued[8], storage.PushPending, now+1)
	skips.Version++
	// One finished with a TTL, as a send's outcome is.
	sent := moved(queued[9], storage.PushSent, now)
	sent.TTL = 3600
	updates[8].Next = skips
	updates[9].Next = sent
	updates = append(updates,
		storage.PushUpdate{Prev: &missing, Next: moved(missing, storage.PushPending, now+1)},
		storage.PushUpdate{Prev: &queued[10], Next: moved(queued[10], storage.PushPending, now+2)})
	errs := s.UpdatePushes(ctx(t), updates)
	if len(errs) != len(updates) {
		t.Fatalf("%d errors for %d updates", len(errs), len(updates))
	}
	wantKind(t, errs[7], storage.ErrConflict, "a stale version in a batch")
	wantKind(t, errs[8], storage.ErrInvalid, "an update skipping a version in a batch")
	wantKind(t, errs[n], storage.ErrNotFound, "a missing push in a batch")
	// The same push twice: one of the two applies, never both.
	if (errs[10] == nil) == (errs[n+1] == nil) {
		t.Fatalf("the same push updated twice in a batch: errors %v and %v; want exactly one applied", errs[10], errs[n+1])
	}
	var want []string
	for i := range queued {
		if i == 7 || i == 8 || i == 9 {
			continue
		}
		if i != 10 {
			must(t, errs[i], fmt.Sprintf("update %d", i))
		}
		want = append(want, queued[i].ID.String())
	}
	must(t, errs[9], "finish one in a batch")
	got, err := s.DuePushes(ctx(t), storage.PushPending, now+2, storage.MaxPushPage)
	must(t, err, "due PENDING after the batch")
	slices.Sort(want)
	sameList(t, slices.Sorted(slices.Values(ids(got))), want, "PENDING: every push handed back, nothing else")
	left, err := s.DuePushes(ctx(t), storage.PushInMemory, now+700_000, storage.MaxPushPage)
	must(t, err, "due IN_MEMORY after the batch")
	sameList(t, ids(left), ids([]storage.Push{queued[8], taken}), "IN_MEMORY: the invalid update's push and the one taken over")
	for _, c := range []struct {
		p    storage.Push
		want storage.Push
	}{{queued[7], taken}, {queued[8], queued[8]}, {queued[9], sent}} {
		got, err := s.GetPush(ctx(t), c.p.ID)
		must(t, err, "get")
		if got.Version != c.want.Version || got.State != c.want.State || got.Owner != c.want.Owner || got.TTL != c.want.TTL {
			t.Fatalf("push %s is %s v%d owner %q ttl %d; want %s v%d owner %q ttl %d", c.p.ID, got.State, got.Version, got.Owner, got.TTL,
				c.want.State, c.want.Version, c.want.Owner, c.want.TTL)
		}
	}
	over := make([]storage.PushUpdate, storage.MaxPushBatch+1)
	for i, err := range s.UpdatePushes(ctx(t), over) {
		wantKind(t, err, storage.ErrInvalid, fmt.Sprintf("update %d of a batch over MaxPushBatch", i))
	}
}

func testPushDue(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	var due []storage.Push
	for i := range 5 {
		p := newPush(storage.PushRetry, now-50_000+int64(i)*1000)
		due = append(due, p)
	}
	later := newPush(storage.PushRetry, now+3600_000)
	other := newPush(storage.PushScheduled, now-1000)
	// Saved in reverse so that order comes from At, not insertion.
	for i := len(due) - 1; i >= 0; i-- {
		must(t, s.SavePush(ctx(t), due[i]), "save due")
	}
	must(t, s.SavePush(ctx(t), later), "save later")
	must(t, s.SavePush(ctx(t), other), "save other state")

	got, err := s.DuePushes(ctx(t), storage.PushRetry, now, 100)
	must(t, err, "due pushes")
	sameList(t, ids(got), ids(due), "due RETRY pushes, oldest first")
	got, err = s.DuePushes(ctx(t), storage.PushRetry, now, 3)
	must(t, err, "due pushes, limited")
	sameList(t, ids(got), ids(due[:3]), "a portion of 3")

	// A push that moves on leaves its old state's index at once.
	must(t, s.UpdatePush(ctx(t), &due[0], moved(due[0], storage.PushSent, now)), "move")
	got, err = s.DuePushes(ctx(t), storage.PushRetry, now, 100)
	must(t, err, "due pushes after a move")
	sameList(t, ids(got), ids(due[1:]), "due after one moved to SENT")

	got, err = s.DuePushes(ctx(t), storage.PushRetry, now+3600_000, 100)
	must(t, err, "due pushes later")
	sameList(t, ids(got), ids(append(due[1:], later)), "due an hour later")
	got, err = s.DuePushes(ctx(t), storage.PushScheduled, now, 100)
	must(t, err, "due SCHEDULED")
	sameList(t, ids(got), ids([]storage.Push{other}), "due SCHEDULED")
}

func testPushList(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	var want []string
	for i := range 23 {
		p := newPush(storage.PushFailed, now+int64(i))
		must(t, s.SavePush(ctx(t), p), "save")
		want = append(want, p.ID.String())
		must(t, s.SavePush(ctx(t), newPush(storage.PushPending, now)), "save another state")
	}
	for _, page := range []int{1, 7, 23, 100} {
		var got []string
		cursor := ""
		for range 100 {
			ps, next, err := s.ListPushes(ctx(t), storage.PushFailed, cursor, page)
			must(t, err, "list pushes")
			if len(ps) > page {
				t.Fatalf("page of %d has %d pushes", page, len(ps))
			}
			for _, p := range ps {
				if p.State != storage.PushFailed {
					t.Fatalf("listed a %s push", p.State)
				}
				got = append(got, p.ID.String())
			}
			if next == "" {
				break
			}
			cursor = next
		}
		slices.Sort(got)
		w := slices.Sorted(slices.Values(want))
		sameList(t, got, w, fmt.Sprintf("every FAILED push once, pages of %d", page))
	}
	_, _, err := s.ListPushes(ctx(t), storage.PushFailed, "not a cursor", 10)
	wantKind(t, err, storage.ErrInvalid, "bad cursor")
}

func testPushTTL(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	p := newPush(storage.PushInMemory, now+60_000)
	must(t, s.SavePush(ctx(t), p), "save")
	done := moved(p, storage.PushSent, now)
	done.TTL = 1
	must(t, s.UpdatePush(ctx(t), &p, done), "finish with a TTL")
	// A push finished just after it, kept: listed after the expired one.
	q := newPush(storage.PushInMemory, now+60_000)
	must(t, s.SavePush(ctx(t), q), "save")
	kept := moved(q, storage.PushSent, now+1)
	kept.TTL = 3600
	must(t, s.UpdatePush(ctx(t), &q, kept), "finish with a long TTL")
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.GetPush(ctx(t), p.ID)
		if errors.Is(err, storage.ErrNotFound) {
			break
		}
		must(t, err, "get")
		if time.Now().After(deadline) {
			t.Fatal("push with a 1s TTL still there after 30s")
		}
		time.Sleep(50 * time.Millisecond) // polling an expiry the server decides; not a wait for a reply
	}
	got, _, err := s.ListPushes(ctx(t), storage.PushSent, "", 10)
	must(t, err, "list")
	if slices.Contains(ids(got), p.ID.String()) {
		t.Fatal("an expired push is still listed")
	}
	// Pages of one: a page the expired push leaves empty still says more
	// follow, and the kept push is reached.
	var listed []string
	cursor := ""
	for range 10 {
		page, next, err := s.ListPushes(ctx(t), storage.PushSent, cursor, 1)
		must(t, err, "list a page of one")
		listed = append(listed, ids(page)...)
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Contains(listed, q.ID.String()) || slices.Contains(listed, p.ID.String()) {
		t.Fatalf("pages of one listed %v: want the kept push %s and not the expired %s", listed, q.ID, p.ID)
	}
}

func testPushInvalid(t *testing.T, s storage.Store) {
	now := time.Now().UnixMilli()
	cases := map[string]func(*storage.Push){
		"nil id":          func(p *storage.Push) { p.ID = uuid.Nil },
		"unknown state":   func(p *storage.Push) { p.State = "LOST" },
		"version 0":       func(p *storage.Push) { p.Version = 0 },
		"version 2":       func(p *storage.Push) { p.Version = 2 },
		"no push key":     func(p *storage.Push) { p.PushKey = "" },
		"long message":    func(p *storage.Push) { p.Message = strings.Repeat("x", storage.MaxPushText+1) },
		"bad utf-8":       func(p *storage.Push) { p.Message = "\xff" },
		"long key":        func(p *storage.Push) { p.PrototypeKey = strings.Repeat("k", storage.MaxPushField+1) },
		"at in the past":  func(p *storage.Push) { p.At = now - 3600_000 },
		"ttl on creation": func(p *storage.Push) { p.TTL = 60 },
	}
	for name, breakIt := range cases {
		p := newPush(storage.PushPending, now)
		breakIt(&p)
		wantKind(t, s.SavePush(ctx(t), p), storage.ErrInvalid, "save with "+name)
		if p.ID != uuid.Nil {
			_, err := s.GetPush(ctx(t), p.ID)
			wantKind(t, err, storage.ErrNotFound, "get after a refused save with "+name)
		}
	}
	_, err := s.DuePushes(ctx(t), storage.PushPending, now, 0)
	wantKind(t, err, storage.ErrInvalid, "due with limit 0")
	_, err = s.DuePushes(ctx(t), "LOST", now, 10)
	wantKind(t, err, storage.ErrInvalid, "due with an unknown state")
	_, _, err = s.ListPushes(ctx(t), storage.PushSent, "", storage.MaxPushPage+1)
	wantKind(t, err, storage.ErrInvalid, "list with a limit too large")
}

func testPushClosed(t *testing.T, s storage.Store) {
	p := newPush(storage.PushPending, time.Now().UnixMilli())
	must(t, s.Close(), "close")
	wantKind(t, s.SavePush(ctx(t), p), storage.ErrUnavailable, "save after close")
	_, err := s.GetPush(ctx(t), p.ID)
	wantKind(t, err, storage.ErrUnavailable, "get after close")
	_, err = s.DuePushes(ctx(t), storage.PushPending, p.At, 10)
	wantKind(t, err, storage.ErrUnavailable, "due after close")
}
