package ratelimit

import (
	"fmt"
	"testing"

	"github.com/autopush-go/autopush/storage"
)

// TestFairParts: every node's part, among any number of nodes up to the
// parts themselves, adds up to the whole, and no two differ by more
// than one, whatever order the entries come in.
func TestFairParts(t *testing.T) {
	for n := 1; n <= ShareParts; n++ {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("node-%03d", (i*7919)%n) // a permutation (7919 is prime): not in name order
		}
		sum, least, most := 0, ShareParts, 0
		for _, me := range names {
			var others []storage.RateShare
			for _, o := range names {
				if o != me {
					others = append(others, storage.RateShare{Node: o})
				}
			}
			p := fairParts(me, others)
			sum, least, most = sum+p, min(least, p), max(most, p)
		}
		if sum != ShareParts || most-least > 1 {
			t.Fatalf("%d nodes: parts add up to %d (want %d), from %d to %d", n, sum, ShareParts, least, most)
		}
	}
}
