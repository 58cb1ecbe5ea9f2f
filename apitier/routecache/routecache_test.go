package routecache

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

func TestRouteCache(t *testing.T) {
	now := time.Unix(1700000000, 0)
	c := New(16, time.Minute)
	k := NewKey([16]byte{1}, [16]byte{2})
	if _, ok := c.Get(k, now); ok {
		t.Fatal("hit in an empty cache")
	}
	u := storage.User{UAID: uuid.UUID{1}, RouterType: storage.RouterWebPush, NodeID: "http://n1", ConnectedAt: 5}
	c.Learn(k, &u, now)
	r, ok := c.Get(k, now.Add(time.Second))
	if !ok || r.Node != "http://n1" || r.ConnectedAt != 5 {
		t.Fatalf("get %+v %v", r, ok)
	}
	if _, ok := c.Get(k, now.Add(time.Minute+time.Nanosecond)); ok {
		t.Fatal("an entry older than the ttl used")
	}
	// Not delivered (404, 503, no answer): forgotten, learnable again.
	c.Forget(k, r, false)
	if _, ok := c.Get(k, now); ok || c.Len() != 0 {
		t.Fatal("forgotten entry still there")
	}
	// 409: this connection is not cached again; another one is.
	c.Learn(k, &u, now)
	c.Forget(k, r, true)
	c.Learn(k, &u, now)
	if _, ok := c.Get(k, now); ok {
		t.Fatal("a connection refused with 409 cached again")
	}
	u.ConnectedAt = 6
	c.Learn(k, &u, now)
	if r, ok := c.Get(k, now); !ok || r.ConnectedAt != 6 {
		t.Fatalf("the newer connection not cached: %+v %v", r, ok)
	}
	// Only connected web push users.
	for _, bad := range []storage.User{{RouterType: "fcm", NodeID: "http://n1", ConnectedAt: 1},
		{RouterType: storage.RouterWebPush, ConnectedAt: 1}, {RouterType: storage.RouterWebPush, NodeID: "http://n1"}} {
		k2 := NewKey([16]byte{9}, [16]byte{9})
		c.Learn(k2, &bad, now)
		if _, ok := c.Get(k2, now); ok {
			t.Fatalf("cached %+v", bad)
		}
	}
	// Bounded: never more than size entries.
	for i := range 100 {
		c.Learn(NewKey([16]byte{byte(i), 1}, [16]byte{3}), &u, now)
		if c.Len() > 16 {
			t.Fatalf("%d entries, size 16", c.Len())
		}
	}
	// Size 0: off.
	off := New(0, time.Minute)
	off.Learn(k, &u, now)
	if _, ok := off.Get(k, now); ok || off.Len() != 0 {
		t.Fatal("a cache of size 0 cached")
	}
}
