package storagetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/autopush-go/autopush/storage"
)

// testRateShares: the record round-trips, starts at version 0, and is
// changed only by a compare-and-set on its version.
func testRateShares(t *testing.T, s storage.Store) {
	r, err := s.GetRateShares(ctx(t), "swrve")
	must(t, err, "get a missing record")
	if r.Account != "swrve" || r.Version != 0 || len(r.Nodes) != 0 {
		t.Fatalf("a missing record: %+v", r)
	}
	first := storage.RateShares{Account: "swrve", Version: 1, Nodes: []storage.RateShare{{Node: "a", Parts: 100, Until: 1700000000000}}}
	must(t, s.PutRateShares(ctx(t), 0, first), "create")
	wantKind(t, s.PutRateShares(ctx(t), 0, first), storage.ErrConflict, "create again")
	got, err := s.GetRateShares(ctx(t), "swrve")
	must(t, err, "get")
	if !reflect.DeepEqual(got, first) {
		t.Fatalf("got %+v, want %+v", got, first)
	}
	second := storage.RateShares{Account: "swrve", Version: 2, Nodes: []storage.RateShare{
		{Node: "a", Parts: 50, Until: 1700000001000}, {Node: "b", Parts: 50, Until: 1700000002000}}}
	stale := second
	stale.Version = 3
	wantKind(t, s.PutRateShares(ctx(t), 2, stale), storage.ErrConflict, "update from a version not stored")
	must(t, s.PutRateShares(ctx(t), 1, second), "update")
	wantKind(t, s.PutRateShares(ctx(t), 1, second), storage.ErrConflict, "the same update again")
	if got, _ := s.GetRateShares(ctx(t), "swrve"); !reflect.DeepEqual(got, second) {
		t.Fatalf("got %+v, want %+v", got, second)
	}
	if other, _ := s.GetRateShares(ctx(t), "fcm"); other.Version != 0 {
		t.Fatalf("another account sees %+v", other)
	}
}

// testRateSharesOneWinner: of nodes racing to change the same version,
// exactly one wins, from a missing record and from a stored one.
func testRateSharesOneWinner(t *testing.T, s storage.Store) {
	for round := range 4 {
		account := fmt.Sprintf("race-%d", round)
		prev := int64(0)
		if round%2 == 1 {
			must(t, s.PutRateShares(ctx(t), 0, storage.RateShares{Account: account, Version: 1}), "create")
			prev = 1
		}
		var mu sync.Mutex
		var wins, conflicts int
		var winner string
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				node := fmt.Sprintf("node-%d", i)
				err := s.PutRateShares(ctx(t), prev, storage.RateShares{Account: account, Version: prev + 1,
					Nodes: []storage.RateShare{{Node: node, Parts: 100, Until: 1}}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
					winner = node
				case errors.Is(err, storage.ErrConflict):
					conflicts++
				default:
					t.Errorf("put: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || conflicts != 7 {
			t.Fatalf("round %d: %d won, %d lost; want 1 and 7", round, wins, conflicts)
		}
		got, err := s.GetRateShares(ctx(t), account)
		must(t, err, "get")
		if got.Version != prev+1 || len(got.Nodes) != 1 || got.Nodes[0].Node != winner {
			t.Fatalf("round %d: stored %+v, winner %s", round, got, winner)
		}
	}
}

// testRateSharesInvalid: malformed records are refused and change nothing.
func testRateSharesInvalid(t *testing.T, s storage.Store) {
	good := storage.RateShares{Account: "inv", Version: 1, Nodes: []storage.RateShare{{Node: "a", Parts: 1}}}
	for name, breakIt := range map[string]func(*storage.RateShares){
		"no account":     func(r *storage.RateShares) { r.Account = "" },
		"long account":   func(r *storage.RateShares) { r.Account = strings.Repeat("a", storage.MaxPushField+1) },
		"version 0":      func(r *storage.RateShares) { r.Version = 0 },
		"version skip":   func(r *storage.RateShares) { r.Version = 2 },
		"empty node":     func(r *storage.RateShares) { r.Nodes = []storage.RateShare{{Node: ""}} },
		"repeated node":  func(r *storage.RateShares) { r.Nodes = append(r.Nodes, r.Nodes[0]) },
		"negative parts": func(r *storage.RateShares) { r.Nodes = []storage.RateShare{{Node: "a", Parts: -1}} },
	} {
		r := good
		r.Nodes = append([]storage.RateShare(nil), good.Nodes...)
		breakIt(&r)
		wantKind(t, s.PutRateShares(ctx(t), 0, r), storage.ErrInvalid, "put with "+name)
	}
	if got, err := s.GetRateShares(ctx(t), "inv"); err != nil || got.Version != 0 {
		t.Fatalf("after refused puts: %+v, %v", got, err)
	}
	_, err := s.GetRateShares(ctx(t), "")
	wantKind(t, err, storage.ErrInvalid, "get without an account")
	must(t, s.Close(), "close")
	_, err = s.GetRateShares(ctx(t), "inv")
	wantKind(t, err, storage.ErrUnavailable, "get after close")
	wantKind(t, s.PutRateShares(ctx(t), 0, good), storage.ErrUnavailable, "put after close")
}
