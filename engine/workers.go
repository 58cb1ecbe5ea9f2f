package engine

import (
	"sync"
)

// workers runs storage and node-to-node calls off the event loops: a
// fixed set of goroutines fed by a bounded queue, so the number of
// goroutines never grows with connections. Results go back to a session
// through its loop (session.onLoop). Safe for concurrent use.
type workers struct {
	jobs   chan func()
	wg     sync.WaitGroup
	mu     sync.RWMutex // guards closed against submit racing stop
	closed bool
}

func newWorkers(n, queue int) *workers {
	w := &workers{jobs: make(chan func(), queue)}
	w.wg.Add(n)
	for range n {
		go func() {
			defer w.wg.Done()
			for job := range w.jobs {
				job()
			}
		}()
	}
	return w
}

// submit queues fn; false when the queue is full (the node is overloaded
// and the caller sheds the work).
func (w *workers) submit(fn func()) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return false
	}
	select {
	case w.jobs <- fn:
		return true
	default:
		return false
	}
}

// stop runs the queued jobs to completion and ends the goroutines.
func (w *workers) stop() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.jobs)
	}
	w.mu.Unlock()
	w.wg.Wait()
}
