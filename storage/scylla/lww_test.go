package scylla

// Proofs that the last-write-wins timestamps give the contract's ordering
// rules under every arrival order. Each test enumerates all permutations of
// a set of writes, applies them in that order to a fresh user, and checks
// the one outcome the contract allows. The writes are issued as the racing
// calls would land: Connect's write without its preceding read (the read
// only refuses what is already known to be older), the others as they are.

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// op is one write of a race, named for failure messages.
type op struct {
	name string
	do   func(t *testing.T, uaid uuid.UUID)
}

// permutations returns every order of ops.
func permutations(ops []op) [][]op {
	if len(ops) <= 1 {
		return [][]op{ops}
	}
	var out [][]op
	for i := range ops {
		rest := make([]op, 0, len(ops)-1)
		rest = append(rest, ops[:i]...)
		rest = append(rest, ops[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]op{ops[i]}, p...))
		}
	}
	return out
}

func orderName(p []op) string {
	names := make([]string, len(p))
	for i, o := range p {
		names[i] = o.name
	}
	return strings.Join(names, ",")
}

// everyOrder runs check after applying each permutation of ops to a fresh
// uaid.
func everyOrder(t *testing.T, ops []op, check func(t *testing.T, uaid uuid.UUID)) {
	t.Helper()
	for _, p := range permutations(ops) {
		t.Run(orderName(p), func(t *testing.T) {
			uaid := uuid.New()
			for _, o := range p {
				o.do(t, uaid)
			}
			check(t, uaid)
		})
	}
}

func ok(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// connectWrite is the write half of Connect, as it lands when its read
// happened before the other connection's write.
func connectWrite(s *Store, node string, connectedAt int64, data map[string]string) op {
	return op{"connect-" + node, func(t *testing.T, uaid uuid.UUID) {
		u := storage.User{UAID: uaid, RouterType: "fcm", RouterData: data, NodeID: node, ConnectedAt: connectedAt}
		ok(t, s.writeConnection(tctx(t), &u, time.Now()), "write connection "+node)
	}}
}

func clearNode(s *Store, node string, connectedAt int64) op {
	return op{"clear-" + node, func(t *testing.T, uaid uuid.UUID) {
		ok(t, s.ClearNode(tctx(t), uaid, connectedAt), "clear "+node)
	}}
}

func TestLWWConnect(t *testing.T) {
	s := newTestStore(t)
	t0 := time.Now().UnixMilli()
	older := map[string]string{"token": "old", "only_old": "x"}
	newer := map[string]string{"token": "new"}
	everyOrder(t, []op{connectWrite(s, "a", t0, older), connectWrite(s, "b", t0+1, newer)},
		func(t *testing.T, uaid uuid.UUID) {
			u, err := s.GetUser(tctx(t), uaid)
			ok(t, err, "get")
			// Every cell is the newer connection's; in particular the map
			// is not a merge of both (the newer write's collection
			// tombstone covers the older elements).
			if u.NodeID != "b" || u.ConnectedAt != t0+1 || !maps.Equal(u.RouterData, newer) {
				t.Fatalf("got %+v, want every field of connection b", u)
			}
		})

	// Through the public API, the read refuses what it sees is older.
	uaid := uuid.New()
	ok(t, s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", NodeID: "b", ConnectedAt: t0 + 1}), "connect b")
	err := s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", NodeID: "a", ConnectedAt: t0})
	if !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("older connect after newer: %v, want ErrConflict", err)
	}
	// An equal ConnectedAt is not older: it is the same connection again.
	ok(t, s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", NodeID: "b", ConnectedAt: t0 + 1}), "connect b again")
}

func TestLWWClearNode(t *testing.T) {
	s := newTestStore(t)
	t0 := time.Now().UnixMilli()
	a, b := connectWrite(s, "a", t0, nil), connectWrite(s, "b", t0+1, nil)

	// A clear of the older connection, before or after the newer
	// connection's write (and before or after its own), never removes the
	// newer node_id.
	t.Run("clear older", func(t *testing.T) {
		everyOrder(t, []op{a, b, clearNode(s, "a", t0)}, func(t *testing.T, uaid uuid.UUID) {
			u, err := s.GetUser(tctx(t), uaid)
			ok(t, err, "get")
			if u.NodeID != "b" || u.ConnectedAt != t0+1 {
				t.Fatalf("got %+v, want node b at %d", u, t0+1)
			}
		})
	})

	// A clear of the newest connection removes its node_id, even when it
	// lands before that connection's own write (the tombstone wins the
	// tie), and the record stays.
	t.Run("clear newest", func(t *testing.T) {
		everyOrder(t, []op{a, b, clearNode(s, "b", t0+1)}, func(t *testing.T, uaid uuid.UUID) {
			u, err := s.GetUser(tctx(t), uaid)
			ok(t, err, "get")
			if u.NodeID != "" || u.ConnectedAt != t0+1 || u.RouterType != "fcm" {
				t.Fatalf("got %+v, want the record of b without node_id", u)
			}
		})
	})

	// Only one connection: its clear shadows its write in either order.
	t.Run("clear own", func(t *testing.T) {
		everyOrder(t, []op{a, clearNode(s, "a", t0)}, func(t *testing.T, uaid uuid.UUID) {
			u, err := s.GetUser(tctx(t), uaid)
			ok(t, err, "get")
			if u.NodeID != "" || u.ConnectedAt != t0 {
				t.Fatalf("got %+v, want record of a without node_id", u)
			}
		})
	})
}

// A device-gone drop naming the connection of the old token never removes
// the record of a newer one (a new token), in any arrival order; naming
// the newest connection, it removes the record in any order.
func TestLWWDropUserAt(t *testing.T) {
	s := newTestStore(t)
	t0 := time.Now().UnixMilli()
	a := connectWrite(s, "a", t0, map[string]string{"token": "old"})
	b := connectWrite(s, "b", t0+1, map[string]string{"token": "new"})
	drop := func(connectedAt int64) op {
		return op{fmt.Sprintf("drop-at-%d", connectedAt-t0), func(t *testing.T, uaid uuid.UUID) {
			ok(t, s.DropUserAt(tctx(t), uaid, connectedAt), "drop user at")
		}}
	}
	t.Run("drop older", func(t *testing.T) {
		everyOrder(t, []op{a, b, drop(t0)}, func(t *testing.T, uaid uuid.UUID) {
			u, err := s.GetUser(tctx(t), uaid)
			ok(t, err, "get")
			if u.NodeID != "b" || u.ConnectedAt != t0+1 || u.RouterData["token"] != "new" {
				t.Fatalf("got %+v, want the record of b whole", u)
			}
		})
	})
	t.Run("drop newest", func(t *testing.T) {
		everyOrder(t, []op{a, b, drop(t0 + 1)}, func(t *testing.T, uaid uuid.UUID) {
			if _, err := s.GetUser(tctx(t), uaid); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("get: %v, want ErrNotFound", err)
			}
		})
	})
}

func TestLWWCursor(t *testing.T) {
	s := newTestStore(t)
	// Consecutive sort keys, as one node hands them out: microseconds
	// apart at most, the finest order a CQL write timestamp can express.
	k1, k2, k3 := consecutiveKeys()
	advance := func(k uint64) op {
		return op{fmt.Sprint("advance-", k-k1), func(t *testing.T, uaid uuid.UUID) {
			ok(t, s.AdvanceCursor(tctx(t), uaid, k), "advance")
		}}
	}
	connect := op{"connect", func(t *testing.T, uaid uuid.UUID) {
		ok(t, s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", NodeID: "n", ConnectedAt: time.Now().UnixMilli()}), "connect")
	}}
	everyOrder(t, []op{advance(k1), advance(k2), advance(k3), connect}, func(t *testing.T, uaid uuid.UUID) {
		u, err := s.GetUser(tctx(t), uaid)
		ok(t, err, "get")
		if u.Cursor != k3 {
			t.Fatalf("cursor %d, want the largest %d", u.Cursor, k3)
		}
	})

	// A smaller cursor written a second later expires later; at equal
	// timestamps Cassandra (>= 4) would keep it, so the keys' distinct
	// microseconds are what keeps the larger one.
	t.Run("smaller cursor written later", func(t *testing.T) {
		uaid := uuid.New()
		ok(t, s.AdvanceCursor(tctx(t), uaid, k3), "advance k3")
		time.Sleep(1100 * time.Millisecond)
		ok(t, s.AdvanceCursor(tctx(t), uaid, k1), "advance k1 a second later")
		var c int64
		ok(t, s.session.Query("SELECT cursor FROM router WHERE uaid = ?", uuidArg(uaid)).WithContext(tctx(t)).Scan(&c), "read cursor")
		if uint64(c) != k3 {
			t.Fatalf("cursor %d, want %d", c, k3)
		}
	})

	// The channel refresh rewrites the cursor it read with that cursor's
	// own write timestamp, so an advance landing between the read and the
	// rewrite survives.
	t.Run("refresh races advance", func(t *testing.T) {
		uaid := uuid.New()
		ok(t, s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", ConnectedAt: time.Now().UnixMilli()}), "connect")
		ok(t, s.AdvanceCursor(tctx(t), uaid, k1), "advance k1")
		st, err := s.connState(tctx(t), uaid)
		ok(t, err, "read state")
		ok(t, s.AdvanceCursor(tctx(t), uaid, k2), "advance k2")
		ok(t, s.refreshChannels(tctx(t), uaid, st, time.Now()), "refresh with stale state")
		u, err := s.GetUser(tctx(t), uaid)
		ok(t, err, "get")
		if u.Cursor != k2 {
			t.Fatalf("cursor %d after refresh, want %d", u.Cursor, k2)
		}
	})
}

// consecutiveKeys returns three sort keys handed out back to back.
func consecutiveKeys() (k1, k2, k3 uint64) {
	return storage.NewSortKey(), storage.NewSortKey(), storage.NewSortKey()
}

// topicVersions are two versions of one topic message received back to
// back, with every field different (and the older one's data and headers
// larger as bytes, so that a per-cell tie break would pick them).
func topicVersions(chid uuid.UUID) (v1, v2 storage.Message) {
	k1, k2, _ := consecutiveKeys()
	v1 = storage.Message{CHID: chid, Topic: "t", SortKey: k1, TTL: 3600, Data: "zzzz",
		Headers: map[string]string{"encoding": "aesgcm", "crypto_key": "old"}}
	v2 = storage.Message{CHID: chid, Topic: "t", SortKey: k2, TTL: 3600, Data: "aaaa"}
	v1.Version, v2.Version = fmt.Sprint("v1-", v1.SortKey), fmt.Sprint("v2-", v2.SortKey)
	return v1, v2
}

func TestLWWTopicMessages(t *testing.T) {
	s := newTestStore(t)
	chid := uuid.New()
	v1, v2 := topicVersions(chid)
	save := func(name string, m storage.Message) op {
		return op{"save-" + name, func(t *testing.T, uaid uuid.UUID) {
			ok(t, s.SaveMessage(tctx(t), uaid, m), "save "+name)
		}}
	}
	del := func(name string, k storage.MessageKey) op {
		return op{"delete-" + name, func(t *testing.T, uaid uuid.UUID) {
			ok(t, s.DeleteMessage(tctx(t), uaid, k), "delete "+name)
		}}
	}
	stored := func(t *testing.T, uaid uuid.UUID) []storage.Message {
		got, err := s.TopicMessages(tctx(t), uaid, 10)
		ok(t, err, "topic messages")
		return got
	}
	wantExactly := func(t *testing.T, got []storage.Message, want storage.Message) {
		t.Helper()
		if len(got) != 1 {
			t.Fatalf("%d topic messages %+v, want only %s", len(got), got, want.Version)
		}
		g := got[0]
		if g.Version != want.Version || g.SortKey != want.SortKey || g.Data != want.Data || g.TTL != want.TTL ||
			!maps.Equal(g.Headers, want.Headers) {
			t.Fatalf("stored %+v, want exactly %+v (no mix of versions)", g, want)
		}
	}

	t.Run("replace", func(t *testing.T) {
		everyOrder(t, []op{save("v1", v1), save("v2", v2)}, func(t *testing.T, uaid uuid.UUID) {
			wantExactly(t, stored(t, uaid), v2)
		})
	})
	t.Run("ack old version", func(t *testing.T) {
		everyOrder(t, []op{save("v1", v1), save("v2", v2), del("v1", v1.Key())}, func(t *testing.T, uaid uuid.UUID) {
			wantExactly(t, stored(t, uaid), v2)
		})
	})
	t.Run("ack new version", func(t *testing.T) {
		everyOrder(t, []op{save("v1", v1), save("v2", v2), del("v2", v2.Key())}, func(t *testing.T, uaid uuid.UUID) {
			if got := stored(t, uaid); len(got) != 0 {
				t.Fatalf("acked newest version, still stored: %+v", got)
			}
		})
	})
	t.Run("versionless delete", func(t *testing.T) {
		everyOrder(t, []op{save("v1", v1), save("v2", v2)}, func(t *testing.T, uaid uuid.UUID) {
			ok(t, s.DeleteMessage(tctx(t), uaid, storage.MessageKey{CHID: chid, Topic: "t"}), "delete")
			if got := stored(t, uaid); len(got) != 0 {
				t.Fatalf("versionless delete kept %+v", got)
			}
		})
	})
}

func TestLWWTimestampMessageDelete(t *testing.T) {
	s := newTestStore(t)
	m := storage.Message{CHID: uuid.New(), SortKey: storage.NewSortKey(), TTL: 3600, Version: "v"}
	everyOrder(t, []op{
		{"save", func(t *testing.T, uaid uuid.UUID) { ok(t, s.SaveMessage(tctx(t), uaid, m), "save") }},
		{"ack", func(t *testing.T, uaid uuid.UUID) { ok(t, s.DeleteMessage(tctx(t), uaid, m.Key()), "ack") }},
	}, func(t *testing.T, uaid uuid.UUID) {
		got, err := s.TimestampMessages(tctx(t), uaid, 0, 10)
		ok(t, err, "fetch")
		if len(got) != 0 {
			t.Fatalf("acked message returned: %+v", got)
		}
	})
}

// TestRefreshDoesNotResurrect: the channel refresh rewrites rows with a
// timestamp taken before it read them, so a RemoveChannel landing after the
// read (a later timestamp) wins over the rewrite.
func TestRefreshDoesNotResurrect(t *testing.T) {
	s := newTestStore(t)
	uaid, chid := uuid.New(), uuid.New()
	ok(t, s.AddChannel(tctx(t), uaid, chid), "add")
	readAt := time.Now() // the refresh's read happens here and sees chid
	time.Sleep(2 * time.Millisecond)
	ok(t, s.RemoveChannel(tctx(t), uaid, chid), "remove")
	ok(t, s.batch(tctx(t), classRouterWrite).Query(qRefreshChannel.cql, uuidArg(uaid), uuidArg(chid), nowMicros(readAt), s.channelTTL).Exec(), "rewrite")
	has, err := s.HasChannel(tctx(t), uaid, chid)
	ok(t, err, "has")
	if has {
		t.Fatal("refresh brought a removed channel back")
	}
}
