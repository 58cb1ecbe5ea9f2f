package engine

import (
	"sync"
)

// registry maps a UAID to the session holding it on this node. It is read
// by the node API goroutines and written by the event loops, so it is
// sharded by the UAID's last byte (random) to keep lock contention low.
// Safe for concurrent use.
type registry struct {
	shards [64]struct {
		sync.Mutex
		m map[[16]byte]*session
	}
}

func newRegistry() *registry {
	r := &registry{}
	for i := range r.shards {
		r.shards[i].m = make(map[[16]byte]*session)
	}
	return r
}

func (r *registry) shard(uaid [16]byte) *struct {
	sync.Mutex
	m map[[16]byte]*session
} {
	return &r.shards[uaid[15]%64]
}

// put registers s for its UAID and returns the session it displaced (an
// older connection of the same user agent), if any. A newer connection
// is never displaced: then s is not registered, and put returns nil.
func (r *registry) put(s *session) (old *session, ok bool) {
	sh := r.shard(s.uaid)
	sh.Lock()
	defer sh.Unlock()
	old = sh.m[s.uaid]
	if old != nil && old != s && old.connectedAt > s.connectedAt {
		return nil, false
	}
	sh.m[s.uaid] = s
	if old == s {
		old = nil
	}
	return old, true
}

// get returns the session holding uaid, or nil.
func (r *registry) get(uaid [16]byte) *session {
	sh := r.shard(uaid)
	sh.Lock()
	defer sh.Unlock()
	return sh.m[uaid]
}

// remove unregisters s, only if it is still the one registered.
func (r *registry) remove(s *session) {
	sh := r.shard(s.uaid)
	sh.Lock()
	defer sh.Unlock()
	if sh.m[s.uaid] == s {
		delete(sh.m, s.uaid)
	}
}

// each calls fn for every registered session (a snapshot per shard).
func (r *registry) each(fn func(*session)) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.Lock()
		list := make([]*session, 0, len(sh.m))
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
