package scylla

import (
	"errors"
	"sync"
)

// each runs f(i) for i in 0..n-1, each in its own goroutine, waits for
// all and returns their errors joined (nil when none failed).
func each(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
