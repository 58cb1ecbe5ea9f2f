package broadcast

import (
	"encoding/binary"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// MaxIDs bounds the distinct broadcast ids a node keeps. Megaphone serves
// a handful; a source listing more is cut off (Result.Rejected), so a
// broken source cannot grow the node without bound.
const MaxIDs = 1024

// Sub is a client's subscription: an index into its node's Table, 0 for
// none. A session holds one and gives it back with Table.Release.
type Sub uint32

// Table holds the node's broadcast versions and interned subscriptions.
// Safe for concurrent use: versions are read without a lock (an atomic
// snapshot), subscriptions under one short mutex.
type Table struct {
	cur atomic.Pointer[versions]

	mu    sync.Mutex
	subs  []entry // index 0 unused: Sub 0 is "none"
	free  []Sub
	byKey map[string]Sub
	key   []byte   // lookup scratch, under mu
	ids   []uint16 // merge scratch, under mu
}

// versions is one immutable snapshot of the broadcast versions. An id's
// index never changes once given (ids are never removed, as in the
// reference), so subscriptions can name ids by index.
type versions struct {
	gen     uint32            // bumped by every Update that changes anything
	ids     []string          // index -> id
	vers    []string          // index -> current version
	changed []uint32          // index -> gen of its last change (or its arrival)
	index   map[string]uint16 // id -> index
}

// entry is one interned subscription: the ids (sorted indexes) and the
// generation whose versions its clients have.
type entry struct {
	key  string // gen ‖ ids, big-endian: the byKey key; "" when free
	ids  []uint16
	gen  uint32
	refs int32
}

// New returns an empty table: no broadcast is known until Update.
func New() *Table {
	t := &Table{subs: make([]entry, 1), byKey: map[string]Sub{}}
	t.cur.Store(&versions{index: map[string]uint16{}})
	return t
}

// Result is what an Update changed.
type Result struct {
	Changed  int    // known ids whose version changed
	Added    int    // ids seen for the first time
	Rejected int    // ids or versions storage.ValidateBroadcast refuses, or beyond MaxIDs
	Gen      uint32 // the generation now current
}

// Update takes the versions a source lists (megaphone's whole table, or
// storage's). Ids it does not list keep their version: the reference never
// forgets a broadcast either. Subscribed clients learn of changes through
// CatchUp.
func (t *Table) Update(src map[string]string) Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.cur.Load()
	nv := old // replaced by a clone at the first change
	gen := old.gen + 1
	var res Result
	// Sorted, so that new ids get the same indexes on every node.
	for _, id := range slices.Sorted(maps.Keys(src)) {
		v := src[id]
		i, known := nv.index[id]
		switch {
		case storage.ValidateBroadcast(id, v) != nil, !known && len(nv.ids) >= MaxIDs:
			res.Rejected++
			continue
		case known && nv.vers[i] == v:
			continue
		}
		if nv == old {
			nv = old.clone()
		}
		if known {
			nv.vers[i], nv.changed[i] = v, gen
			res.Changed++
			continue
		}
		nv.index[id] = uint16(len(nv.ids))
		nv.ids, nv.vers, nv.changed = append(nv.ids, id), append(nv.vers, v), append(nv.changed, gen)
		res.Added++
	}
	if nv != old {
		nv.gen = gen
		t.cur.Store(nv)
	}
	res.Gen = nv.gen
	return res
}

func (v *versions) clone() *versions {
	nv := &versions{
		ids: slices.Clone(v.ids), vers: slices.Clone(v.vers), changed: slices.Clone(v.changed),
		index: maps.Clone(v.index),
	}
	return nv
}

// Versions returns every known id with its current version.
func (t *Table) Versions() map[string]string {
	v := t.cur.Load()
	out := make(map[string]string, len(v.ids))
	for i, id := range v.ids {
		out[id] = v.vers[i]
	}
	return out
}

// Gen is the generation of the current versions.
func (t *Table) Gen() uint32 { return t.cur.Load().gen }

// Subscribe adds the ids of req to the subscription s (0: none yet) and
// returns the new subscription, which replaces s (s is released). It
// appends to changed what the client must be told: first the changes to
// s's ids it has not been sent yet, then each requested id whose current
// version differs from the one the client says it has; and to errs each
// requested id the node does not know, with protocol.BroadcastNotFound as
// its version (such ids are not subscribed: the reference's semantics).
// The strings appended are the table's or req's, never copied.
func (t *Table) Subscribe(s Sub, req, changed, errs []protocol.Broadcast) (Sub, []protocol.Broadcast, []protocol.Broadcast) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := t.cur.Load()
	ids := t.ids[:0]
	if s != 0 {
		e := &t.subs[s]
		ids = append(ids, e.ids...)
		changed = v.appendChanged(changed, e.ids, e.gen)
	}
	for _, b := range req {
		i, ok := v.index[b.ID]
		if !ok {
			errs = append(errs, protocol.Broadcast{ID: b.ID, Version: protocol.BroadcastNotFound})
			continue
		}
		if v.vers[i] != b.Version && !has(changed, v.ids[i]) {
			changed = append(changed, protocol.Broadcast{ID: v.ids[i], Version: v.vers[i]})
		}
		if at, found := slices.BinarySearch(ids, i); !found {
			ids = slices.Insert(ids, at, i)
		}
	}
	t.ids = ids
	ns := t.intern(ids, v.gen)
	t.release(s)
	return ns, changed, errs
}

// CatchUp moves the subscription s to the current versions: it appends to
// changed the ids of s that changed since s's generation, with their
// current versions, and returns the subscription that replaces s (s is
// released). Nothing is appended, and s returned, when s is current.
func (t *Table) CatchUp(s Sub, changed []protocol.Broadcast) (Sub, []protocol.Broadcast) {
	if s == 0 {
		return 0, changed
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	v := t.cur.Load()
	e := &t.subs[s]
	if e.gen == v.gen {
		return s, changed
	}
	changed = v.appendChanged(changed, e.ids, e.gen)
	ns := t.intern(e.ids, v.gen)
	t.release(s)
	return ns, changed
}

// Release gives the subscription s back (its client left).
func (t *Table) Release(s Sub) {
	if s == 0 {
		return
	}
	t.mu.Lock()
	t.release(s)
	t.mu.Unlock()
}

// Subs is the number of distinct subscriptions held (the memory the
// clients' subscriptions cost is about this many small entries).
func (t *Table) Subs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byKey)
}

// Known is the number of broadcast ids the node knows.
func (t *Table) Known() int { return len(t.cur.Load().ids) }

// appendChanged appends the ids among idx that changed after gen.
func (v *versions) appendChanged(dst []protocol.Broadcast, idx []uint16, gen uint32) []protocol.Broadcast {
	for _, i := range idx {
		// Generations only grow; a difference taken as signed survives
		// the counter wrapping.
		if int32(v.changed[i]-gen) > 0 {
			dst = append(dst, protocol.Broadcast{ID: v.ids[i], Version: v.vers[i]})
		}
	}
	return dst
}

func has(bs []protocol.Broadcast, id string) bool {
	for i := range bs {
		if bs[i].ID == id {
			return true
		}
	}
	return false
}

// intern returns the subscription for (ids, gen), taking a reference;
// mu held. ids is copied if a new entry is made.
func (t *Table) intern(ids []uint16, gen uint32) Sub {
	if len(ids) == 0 {
		return 0
	}
	k := binary.BigEndian.AppendUint32(t.key[:0], gen)
	for _, i := range ids {
		k = binary.BigEndian.AppendUint16(k, i)
	}
	t.key = k
	if s, ok := t.byKey[string(k)]; ok { // no allocation for the lookup
		t.subs[s].refs++
		return s
	}
	e := entry{key: string(k), ids: slices.Clone(ids), gen: gen, refs: 1}
	var s Sub
	if n := len(t.free); n > 0 {
		s, t.free = t.free[n-1], t.free[:n-1]
		t.subs[s] = e
	} else {
		s = Sub(len(t.subs))
		t.subs = append(t.subs, e)
	}
	t.byKey[e.key] = s
	return s
}

// release drops one reference to s; mu held.
func (t *Table) release(s Sub) {
	if s == 0 {
		return
	}
	e := &t.subs[s]
	if e.refs--; e.refs == 0 {
		delete(t.byKey, e.key)
		*e = entry{}
		t.free = append(t.free, s)
	}
}
