// Package routecache is the endpoint's route cache: the connection a
// push was last delivered to, per subscription, so the next push to
// it goes to that node without reading storage (on Cassandra the read was the largest share of a push's CPU
// across the machine, docs/benchmarks.md).
//
// Nothing it holds is trusted. A cached push names the connection it
// expects (node API PUT /push?connected_at=): the node delivers only to
// that connection, and only if its client has unsubscribed no channel on
// it, so a push is never delivered to a channel that is gone or to a
// connection that is not the record's. Any other answer (404, 409, 503,
// no answer) forgets the entry and routes the push as if the cache did
// not exist: storage read, then apitier's routing (router.go). Only a 200 was
// delivered, so the fallback cannot duplicate a push the node accepted;
// a node that took a push and did not answer in time is the same case as
// without the cache.
//
// Channels added since do not matter (an entry exists only for a channel
// that a push reached). A user dropped for good (msg_limit, expiry) has no
// connection, so no node delivers to it.
package routecache

import (
	"sync"
	"time"

	"github.com/autopush-go/autopush/storage"
)

// Key is a subscription: uaid then channel id.
type Key [32]byte

// NewKey is uaid's subscription chid.
func NewKey(uaid, chid [16]byte) (k Key) {
	copy(k[:16], uaid[:])
	copy(k[16:], chid[:])
	return k
}

// Route is one cached connection.
type Route struct {
	Node        string
	ConnectedAt int64
	learned     int64 // unix ns
	// stale: the node answered 409 for this connection; the client
	// unsubscribed a channel on it, so it is not cached again until the
	// record names another connection.
	stale bool
}

// Cache is bounded by size and age; safe for concurrent use. The
// zero size disables it.
type Cache struct {
	size int
	ttl  time.Duration

	mu    sync.Mutex
	m     map[Key]Route
	nodes map[string]string // node URLs interned: thousands of entries share a few nodes
}

// New returns a cache of at most size entries, each used for ttl.
func New(size int, ttl time.Duration) *Cache {
	return &Cache{size: size, ttl: ttl, m: make(map[Key]Route), nodes: make(map[string]string)}
}

// Get returns the connection cached for k, if fresh.
func (c *Cache) Get(k Key, now time.Time) (Route, bool) {
	if c.size == 0 {
		return Route{}, false
	}
	c.mu.Lock()
	r, ok := c.m[k]
	c.mu.Unlock()
	if !ok || r.stale || now.UnixNano()-r.learned > int64(c.ttl) {
		return Route{}, false
	}
	return r, true
}

// Learn caches u's connection for k after a push read from storage was
// delivered there, unless the node refused cached pushes to it.
func (c *Cache) Learn(k Key, u *storage.User, now time.Time) {
	if c.size == 0 || u.RouterType != storage.RouterWebPush || u.NodeID == "" || u.ConnectedAt <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok && old.stale && old.ConnectedAt == u.ConnectedAt {
		return
	}
	if len(c.m) >= c.size {
		c.shrink()
	}
	node, ok := c.nodes[u.NodeID]
	if !ok {
		if len(c.nodes) >= 4096 {
			clear(c.nodes) // nodes come and go: keep the table bounded
		}
		node = u.NodeID
		c.nodes[node] = node
	}
	c.m[k] = Route{Node: node, ConnectedAt: u.ConnectedAt, learned: now.UnixNano()}
}

// Forget drops k's entry after its cached push was not delivered; stale
// (a 409) keeps a marker so that connection is not cached again.
func (c *Cache) Forget(k Key, r Route, stale bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !stale {
		delete(c.m, k)
		return
	}
	r.stale = true
	c.m[k] = r
}

// shrink drops about an eighth of the entries, whichever the map yields
// first (Go randomises the order): cheaper than an LRU list per entry,
// and an evicted subscription costs one storage read.
func (c *Cache) shrink() {
	drop := max(c.size/8, 1)
	for k := range c.m {
		delete(c.m, k)
		if drop--; drop == 0 {
			return
		}
	}
}

// Len is the number of entries (metrics, tests).
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
