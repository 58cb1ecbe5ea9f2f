package scylla

import (
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// An index entry newer than its push belongs to an update whose LWT
// answered with an unknown outcome and did not apply, or has not yet:
// Paxos may still complete it whenever the partition is next touched at
// SERIAL. Such an entry can never be deleted, and were it the lowest of
// its shard it would hold the shard's read floor (DuePushes) at its At
// for good, every due read walking the tombstones of all that the shard
// moved on since. So the node remembers it apart, reads its push again
// at most every inflightRecheck, and lets the floor rise past it: it is
// forgotten only once its push moved past it (its version newer), and
// after inflightForget (beyond Cassandra's hint window, 3 hours by
// default, in which a write may still land) when its push is not found.
// A node that restarts walks its shards from the start and finds them
// again.
const (
	inflightRecheck = time.Second
	inflightForget  = 6 * time.Hour
	// inflightMax bounds the entries remembered per state: past it an
	// entry newer than its push holds the floor, as it would without.
	inflightMax = 256
)

type inflightEntry struct {
	e       indexEntry
	seen    time.Time // first found newer than its push
	checked time.Time // last read
}

// inflight is the node's set of index entries newer than their pushes,
// by state and push id. Safe for concurrent use.
type inflight struct {
	mu      sync.Mutex
	byState map[storage.PushState]map[uuid.UUID]*inflightEntry
}

// due lists the remembered entries of state due before before and not
// read within inflightRecheck, marking them read now.
func (f *inflight) due(state storage.PushState, before int64, now time.Time) []indexEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []indexEntry
	for _, r := range f.byState[state] {
		if r.e.at < before && now.Sub(r.checked) >= inflightRecheck {
			r.checked = now
			out = append(out, r.e)
		}
	}
	return out
}

// has reports whether e is remembered (and the floor may pass it).
func (f *inflight) has(state storage.PushState, e indexEntry) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.byState[state][e.id]
	return ok && r.e == e
}

// note records what a read found of an entry: newer than its push
// (remembered, if there is room), moved past (forgotten), or live (kept
// as it is: a remembered entry whose update applied late is due like any
// other until its push moves on).
func (f *inflight) note(state storage.PushState, e indexEntry, v verdict, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.byState[state]
	r, ok := m[e.id]
	if ok && r.e != e {
		return // another entry of the same push is remembered; this one holds the floor
	}
	switch {
	case v == stale && ok:
		delete(m, e.id)
	case v == notFound && ok && now.Sub(r.seen) > inflightForget:
		delete(m, e.id)
	case (v == inFlight || v == notFound) && !ok && len(m) < inflightMax:
		if m == nil {
			if f.byState == nil {
				f.byState = map[storage.PushState]map[uuid.UUID]*inflightEntry{}
			}
			m = map[uuid.UUID]*inflightEntry{}
			f.byState[state] = m
		}
		m[e.id] = &inflightEntry{e: e, seen: now, checked: now}
	}
}
