package scylla

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestEachRunsAllAndJoinsErrors(t *testing.T) {
	var ran [5]atomic.Bool
	bad1, bad3 := errors.New("one"), errors.New("three")
	err := each(len(ran), func(i int) error {
		ran[i].Store(true)
		switch i {
		case 1:
			return bad1
		case 3:
			return bad3
		}
		return nil
	})
	for i := range ran {
		if !ran[i].Load() {
			t.Errorf("f(%d) did not run", i)
		}
	}
	if !errors.Is(err, bad1) || !errors.Is(err, bad3) {
		t.Fatalf("error %v, want both failures joined", err)
	}
	if err := each(3, func(int) error { return nil }); err != nil {
		t.Fatalf("no failure: %v", err)
	}
}
