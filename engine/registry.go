package engine

import (
	"sync"
)

// registry maps a UAID to the connection holding it on this node. It is read
// by the node API goroutines and written by the event loops, so it is
// sharded by the UAID's last byte (random) to keep lock contention low.
// Safe for concurrent use.
type registry struct {
	shards [64]struct {
		sync.Mutex
		m map[[16]byte]*conn
	}
}

func newRegistry() *registry {
	r := &registry{}
	for i := range r.shards {
		r.shards[i].m = make(map[[16]byte]*conn)
	}
	return r
}

func (r *registry) shard(uaid [16]byte) *struct {
	sync.Mutex
	m map[[16]byte]*conn
} {
	return &r.shards[uaid[15]%64]
}

// put registers cn for its session's UAID and returns the connection it
// displaced (an older connection of the same user agent), if any. A newer
// connection is never displaced: then cn is not registered, and put
// returns false. (old's ConnectedAt was set on its loop before old was
// put here: the shard lock orders that write before this read.)
func (r *registry) put(cn *conn) (old *conn, ok bool) {
	uaid := cn.s.UAID()
	sh := r.shard(uaid)
	sh.Lock()
	defer sh.Unlock()
	old = sh.m[uaid]
	if old != nil && old != cn && old.s.ConnectedAt() > cn.s.ConnectedAt() {
		return nil, false
	}
	sh.m[uaid] = cn
	if old == cn {
		old = nil
	}
	return old, true
}

// get returns the session holding uaid, or nil.
func (r *registry) get(uaid [16]byte) *conn {
	sh := r.shard(uaid)
	sh.Lock()
	defer sh.Unlock()
	return sh.m[uaid]
}

// remove unregisters cn, only if it is still the one registered under
// its session's UAID. Called on cn's loop.
func (r *registry) remove(cn *conn) {
	uaid := cn.s.UAID()
	sh := r.shard(uaid)
	sh.Lock()
	defer sh.Unlock()
	if sh.m[uaid] == cn {
		delete(sh.m, uaid)
	}
}

// each calls fn for every registered session (a snapshot per shard).
func (r *registry) each(fn func(*conn)) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.Lock()
		list := make([]*conn, 0, len(sh.m))
		for _, s := range sh.m {
			list = append(list, s)
		}
		sh.Unlock()
		for _, s := range list {
			fn(s)
		}
	}
}

// len is the number of registered sessions.
func (r *registry) len() int {
	n := 0
	for i := range r.shards {
		sh := &r.shards[i]
		sh.Lock()
		n += len(sh.m)
		sh.Unlock()
	}
	return n
}
