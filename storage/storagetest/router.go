package storagetest

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/autopush-go/autopush/storage"
	"github.com/google/uuid"
)

func testUserLifecycle(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	_, err := s.GetUser(ctx(t), uaid)
	wantKind(t, err, storage.ErrNotFound, "get missing user")

	u := user(uaid, "http://node-a:8081", nowMS())
	u.RouterType = "fcm"
	u.RouterData = map[string]string{"token": "abc", "app_id": "app"}
	must(t, s.Connect(ctx(t), u), "connect")

	got, err := s.GetUser(ctx(t), uaid)
	must(t, err, "get user")
	if got.UAID != uaid || got.RouterType != "fcm" || got.NodeID != u.NodeID || got.ConnectedAt != u.ConnectedAt {
		t.Fatalf("got %+v, want fields of %+v", got, u)
	}
	if got.RouterData["token"] != "abc" || got.RouterData["app_id"] != "app" || len(got.RouterData) != 2 {
		t.Fatalf("router data %v", got.RouterData)
	}
	if got.LastConnect <= 0 || got.Cursor != 0 {
		t.Fatalf("last_connect %d (want set), cursor %d (want 0)", got.LastConnect, got.Cursor)
	}

	must(t, s.DropUser(ctx(t), uaid), "drop user")
	_, err = s.GetUser(ctx(t), uaid)
	wantKind(t, err, storage.ErrNotFound, "get dropped user")
	must(t, s.DropUser(ctx(t), uaid), "drop missing user")
}

// testConnectNew: a new uaid's record written without a read, with its
// first channel, is the record Connect writes: readable, subscribed, takes
// more channels and messages, and later connections (Connect, newest wins)
// and clears work on it as on any.
func testConnectNew(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	first := nowMS()
	u := user(uaid, "http://node-a:8081", first)
	err := s.ConnectNew(ctx(t), u, uuid.Nil)
	wantKind(t, err, storage.ErrInvalid, "connect new without a channel")
	if _, err := s.GetUser(ctx(t), uaid); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused connect new wrote the record: %v", err)
	}
	must(t, s.ConnectNew(ctx(t), u, chid), "connect new")
	got, err := s.GetUser(ctx(t), uaid)
	must(t, err, "get user")
	if got.NodeID != u.NodeID || got.ConnectedAt != first || got.RouterType != u.RouterType || got.Cursor != 0 || got.LastConnect <= 0 {
		t.Fatalf("got %+v, want fields of %+v", got, u)
	}
	_, has, err := s.Subscription(ctx(t), uaid, chid)
	must(t, err, "subscription")
	if !has {
		t.Fatal("the channel written with ConnectNew not found")
	}
	second := uuid.New()
	must(t, s.AddChannel(ctx(t), uaid, second), "add channel")
	must(t, s.Connect(ctx(t), user(uaid, "http://node-b:8081", first+10)), "reconnect")
	err = s.Connect(ctx(t), user(uaid, "http://node-c:8081", first+5))
	wantKind(t, err, storage.ErrConflict, "older connection after ConnectNew")
	must(t, s.ClearNode(ctx(t), uaid, first+10), "clear")
	got, err = s.GetUser(ctx(t), uaid)
	must(t, err, "get after clear")
	if got.NodeID != "" || got.ConnectedAt != first+10 {
		t.Fatalf("after reconnect and clear: %+v", got)
	}
	chans, err := s.Channels(ctx(t), uaid)
	must(t, err, "channels")
	if len(chans) != 2 || !(chans[0] == chid && chans[1] == second || chans[0] == second && chans[1] == chid) {
		t.Fatalf("channels %v, want %s and %s", chans, chid, second)
	}
}

// testReconnect: a returning user agent's record is read and rewritten
// in one call: the record as it was comes back, the connection is
// recorded with the cursor kept; nothing is written for a missing record
// or one of another router type; an older connection is refused.
func testReconnect(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	first := nowMS()
	_, err := s.Reconnect(ctx(t), user(uaid, "http://node-a:8081", first))
	wantKind(t, err, storage.ErrNotFound, "reconnect without a record")
	_, err = s.GetUser(ctx(t), uaid)
	wantKind(t, err, storage.ErrNotFound, "a refused reconnect wrote")

	must(t, s.Connect(ctx(t), user(uaid, "http://node-a:8081", first)), "connect")
	sk := storage.NewSortKey()
	must(t, s.AdvanceCursor(ctx(t), uaid, sk), "advance")
	prev, err := s.Reconnect(ctx(t), user(uaid, "http://node-b:8081", first+10))
	must(t, err, "reconnect")
	if prev.NodeID != "http://node-a:8081" || prev.ConnectedAt != first || prev.Cursor != sk || prev.UAID != uaid {
		t.Fatalf("previous record %+v, want node-a at %d with cursor %d", prev, first, sk)
	}
	got, err := s.GetUser(ctx(t), uaid)
	must(t, err, "get after reconnect")
	if got.NodeID != "http://node-b:8081" || got.ConnectedAt != first+10 || got.Cursor != sk {
		t.Fatalf("after reconnect %+v, want node-b at %d, cursor kept", got, first+10)
	}
	_, err = s.Reconnect(ctx(t), user(uaid, "http://node-c:8081", first+5))
	wantKind(t, err, storage.ErrConflict, "older reconnect")

	bridged := uuid.New()
	b := user(bridged, "", first)
	b.RouterType = "fcm"
	b.RouterData = map[string]string{"token": "t"}
	must(t, s.Connect(ctx(t), b), "connect bridged")
	_, err = s.Reconnect(ctx(t), user(bridged, "http://node-a:8081", first+10))
	wantKind(t, err, storage.ErrNotFound, "reconnect over another router type")
	got, err = s.GetUser(ctx(t), bridged)
	must(t, err, "get bridged")
	if got.RouterType != "fcm" || got.RouterData["token"] != "t" || got.ConnectedAt != first {
		t.Fatalf("a refused reconnect changed the bridged record: %+v", got)
	}
}

// testDropUserAt: a drop naming the stored connection removes the user;
// one naming an older connection, or arriving before a newer connection's
// write, leaves the newer connection's record whole.
func testDropUserAt(t *testing.T, s storage.Store) {
	t0 := nowMS()
	bridged := func(uaid uuid.UUID, token string, at int64) storage.User {
		u := user(uaid, "", at)
		u.RouterType, u.RouterData = "fcm", map[string]string{"token": token, "app_id": "app"}
		return u
	}
	uaid := uuid.New()
	must(t, s.Connect(ctx(t), bridged(uaid, "old-token", t0)), "connect")
	must(t, s.DropUserAt(ctx(t), uaid, t0-1), "drop at an older connection")
	if got, err := s.GetUser(ctx(t), uaid); err != nil || got.RouterData["token"] != "old-token" {
		t.Fatalf("a drop naming an older connection removed the record: %+v %v", got, err)
	}
	must(t, s.DropUserAt(ctx(t), uaid, t0), "drop at the stored connection")
	_, err := s.GetUser(ctx(t), uaid)
	wantKind(t, err, storage.ErrNotFound, "get after a drop at its connection")
	must(t, s.DropUserAt(ctx(t), uaid, t0), "drop a missing user")

	// A new token registered after the record was read: the drop naming
	// the old one keeps it, in either order of arrival.
	for _, dropFirst := range []bool{false, true} {
		uaid := uuid.New()
		must(t, s.Connect(ctx(t), bridged(uaid, "old-token", t0)), "connect")
		if dropFirst {
			must(t, s.DropUserAt(ctx(t), uaid, t0), "drop")
			must(t, s.Connect(ctx(t), bridged(uaid, "new-token", t0+5)), "new token")
		} else {
			must(t, s.Connect(ctx(t), bridged(uaid, "new-token", t0+5)), "new token")
			must(t, s.DropUserAt(ctx(t), uaid, t0), "drop")
		}
		got, err := s.GetUser(ctx(t), uaid)
		if err != nil || got.RouterData["token"] != "new-token" || got.ConnectedAt != t0+5 || got.RouterType != "fcm" {
			t.Fatalf("drop first %v: the newer registration is %+v (%v), want it whole", dropFirst, got, err)
		}
	}
}

func testNewestConnectionWins(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	t0 := nowMS()
	must(t, s.Connect(ctx(t), user(uaid, "node-b", t0+10)), "connect newer")

	err := s.Connect(ctx(t), user(uaid, "node-a", t0))
	wantKind(t, err, storage.ErrConflict, "connect older after newer")
	got, err := s.GetUser(ctx(t), uaid)
	must(t, err, "get")
	if got.NodeID != "node-b" || got.ConnectedAt != t0+10 {
		t.Fatalf("older connection overwrote newer: %+v", got)
	}

	must(t, s.Connect(ctx(t), user(uaid, "node-c", t0+20)), "connect newest")
	got, err = s.GetUser(ctx(t), uaid)
	must(t, err, "get")
	if got.NodeID != "node-c" || got.ConnectedAt != t0+20 {
		t.Fatalf("newest connection did not win: %+v", got)
	}
}

func testClearNode(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	t0 := nowMS()
	must(t, s.Connect(ctx(t), user(uaid, "node-a", t0)), "connect")

	must(t, s.ClearNode(ctx(t), uaid, t0-1), "clear with older connected_at")
	got, err := s.GetUser(ctx(t), uaid)
	must(t, err, "get")
	if got.NodeID != "node-a" {
		t.Fatalf("clear with an older connected_at removed node_id: %+v", got)
	}

	must(t, s.ClearNode(ctx(t), uaid, t0), "clear matching")
	got, err = s.GetUser(ctx(t), uaid)
	must(t, err, "get after clear")
	if got.NodeID != "" || got.ConnectedAt != t0 {
		t.Fatalf("matching clear: got %+v, want node_id empty, record kept", got)
	}

	// The client reconnects elsewhere; a late clear for the old
	// connection must not touch the new one.
	must(t, s.Connect(ctx(t), user(uaid, "node-b", t0+5)), "reconnect")
	must(t, s.ClearNode(ctx(t), uaid, t0), "late clear of old connection")
	got, err = s.GetUser(ctx(t), uaid)
	must(t, err, "get after late clear")
	if got.NodeID != "node-b" {
		t.Fatalf("late clear removed the newer connection: %+v", got)
	}

	must(t, s.ClearNode(ctx(t), uuid.New(), t0), "clear missing user")
}

// testConcurrentConnectAndClear races connections of one user against
// clears of every connection but the newest: whatever the interleaving, the
// newest connection must be recorded with its node afterwards.
func testConcurrentConnectAndClear(t *testing.T, s storage.Store) {
	const writers = 24
	uaid := uuid.New()
	t0 := nowMS()
	stamps := rand.Perm(writers)
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for _, i := range stamps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := t0 + int64(i)
			err := s.Connect(ctx(t), user(uaid, nodeName(i), ts))
			if err != nil && !errors.Is(err, storage.ErrConflict) {
				errs <- err
			}
			if i != writers-1 {
				if err := s.ClearNode(ctx(t), uaid, ts); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent connect/clear: %v", err)
	}
	got, err := s.GetUser(ctx(t), uaid)
	must(t, err, "get")
	if got.ConnectedAt != t0+writers-1 || got.NodeID != nodeName(writers-1) {
		t.Fatalf("after the race: %+v, want connected_at %d on %s", got, t0+writers-1, nodeName(writers-1))
	}
}

func nodeName(i int) string { return "http://node-" + string(rune('a'+i)) + ":8081" }

func testCursor(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	t0 := nowMS()
	must(t, s.Connect(ctx(t), user(uaid, "node-a", t0)), "connect")
	k1, k2 := storage.NewSortKey(), storage.NewSortKey()

	must(t, s.AdvanceCursor(ctx(t), uaid, k2), "advance")
	must(t, s.AdvanceCursor(ctx(t), uaid, k1), "advance backwards")
	got, err := s.GetUser(ctx(t), uaid)
	must(t, err, "get")
	if got.Cursor != k2 {
		t.Fatalf("cursor %d, want %d (it must never move back)", got.Cursor, k2)
	}

	must(t, s.Connect(ctx(t), user(uaid, "node-b", t0+1)), "reconnect")
	got, err = s.GetUser(ctx(t), uaid)
	must(t, err, "get after reconnect")
	if got.Cursor != k2 {
		t.Fatalf("reconnect reset the cursor to %d, want %d", got.Cursor, k2)
	}
}
