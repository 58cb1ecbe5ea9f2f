package storage

import (
	"sync"
	"testing"
)

func TestNewSortKeyDistinctMicroseconds(t *testing.T) {
	const goroutines, each = 4, 5000
	var mu sync.Mutex
	seen := make(map[uint64]bool, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := uint64(0)
			local := make([]uint64, 0, each)
			for range each {
				k := NewSortKey()
				if k <= prev {
					t.Errorf("sort key %d not after %d", k, prev)
					return
				}
				prev = k
				local = append(local, k/1000)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, us := range local {
				if seen[us] {
					t.Errorf("two sort keys in microsecond %d", us)
					return
				}
				seen[us] = true
			}
		}()
	}
	wg.Wait()
}
