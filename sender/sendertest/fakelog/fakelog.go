// Package fakelog is what the fake providers (swrvefake, fcmfake,
// apnsfake) keep of the requests they get: the requests in arrival order,
// which a test can wait for, and how many were in flight at once. For the
// tests and the load tester, as the fakes: no service binary imports it.
package fakelog

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Log is the requests a fake received, in order. Safe for concurrent use;
// the zero value is empty and ready.
type Log[T any] struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on each Add
	recs    []T
	// In flight: requests being handled now, and the most at once.
	inflight, maxInflight atomic.Int64
}

// Add appends rec and wakes the waiters.
func (l *Log[T]) Add(rec T) {
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	l.mu.Unlock()
}

// All is a copy of the requests so far.
func (l *Log[T]) All() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.recs...)
}

// Len is how many requests were added.
func (l *Log[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recs)
}

// Wait blocks until at least n requests were added or ctx ends; what
// names the fake and its requests in the error ("fcmfake: sends").
func (l *Log[T]) Wait(ctx context.Context, n int, what string) error {
	for {
		l.mu.Lock()
		have := len(l.recs)
		if have >= n {
			l.mu.Unlock()
			return nil
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%s: %d, waited for %d: %w", what, have, n, ctx.Err())
		}
	}
}

// Enter counts a request in flight until the returned leave is called.
func (l *Log[T]) Enter() (leave func()) {
	n := l.inflight.Add(1)
	for m := l.maxInflight.Load(); n > m && !l.maxInflight.CompareAndSwap(m, n); m = l.maxInflight.Load() {
	}
	return func() { l.inflight.Add(-1) }
}

// InFlight is how many requests are in flight now.
func (l *Log[T]) InFlight() int { return int(l.inflight.Load()) }

// MaxInFlight is the most requests that were in flight at once.
func (l *Log[T]) MaxInFlight() int { return int(l.maxInflight.Load()) }
