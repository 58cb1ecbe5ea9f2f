package engine

import (
	"context"
	"sync"
)

// deletes tracks the acked messages being deleted, per user, across all
// of this node's connections: a storage read for a user waits for them,
// so a client that acks and reconnects at once is not sent what it acked.
// (Within one connection flow.deleting already orders them.) Safe for
// concurrent use.
type deletes struct {
	mu sync.Mutex
	m  map[[16]byte]*pendingDeletes
}

type pendingDeletes struct {
	n    int
	idle chan struct{} // closed when n drops to 0
}

func newDeletes() *deletes { return &deletes{m: map[[16]byte]*pendingDeletes{}} }

func (d *deletes) add(uaid [16]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.m[uaid]
	if p == nil {
		p = &pendingDeletes{idle: make(chan struct{})}
		d.m[uaid] = p
	}
	p.n++
}

func (d *deletes) done(uaid [16]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.m[uaid]; p != nil {
		if p.n--; p.n == 0 {
			close(p.idle)
			delete(d.m, uaid)
		}
	}
}

// wait returns once no delete for uaid is running, or ctx ends.
func (d *deletes) wait(ctx context.Context, uaid [16]byte) {
	d.mu.Lock()
	p := d.m[uaid]
	d.mu.Unlock()
	if p != nil {
		select {
		case <-p.idle:
		case <-ctx.Done():
		}
	}
}
