package storagetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/autopush-go/autopush/storage"
	"github.com/google/uuid"
)

func testChannels(t *testing.T, s storage.Store) {
	uaid, a, b := uuid.New(), uuid.New(), uuid.New()
	must(t, s.Connect(ctx(t), user(uaid, "node-a", nowMS())), "connect")

	list, err := s.Channels(ctx(t), uaid)
	must(t, err, "list empty")
	if len(list) != 0 {
		t.Fatalf("new user has channels %v", list)
	}
	must(t, s.AddChannel(ctx(t), uaid, a), "add a")
	must(t, s.AddChannel(ctx(t), uaid, a), "add a twice")
	must(t, s.AddChannel(ctx(t), uaid, b), "add b")
	hasChannels(t, s, uaid, a, b)

	must(t, s.RemoveChannel(ctx(t), uaid, a), "remove a")
	must(t, s.RemoveChannel(ctx(t), uaid, a), "remove a twice")
	hasChannels(t, s, uaid, b)
	ok, err := s.HasChannel(ctx(t), uaid, a)
	must(t, err, "has removed")
	if ok {
		t.Fatal("removed channel still reported")
	}

	// Channels of one user are invisible to another.
	other := uuid.New()
	ok, err = s.HasChannel(ctx(t), other, b)
	must(t, err, "has on other user")
	if ok {
		t.Fatal("channel visible on another uaid")
	}
}

// Subscription answers what GetUser and HasChannel answer, in each case a
// push meets: subscribed, the channel never added or removed, another
// user's channel, no record, a record dropped with its channels.
func testSubscription(t *testing.T, s storage.Store) {
	uaid, a, b := uuid.New(), uuid.New(), uuid.New()
	u := user(uaid, "node-a", nowMS())
	u.RouterData = map[string]string{"k": "v"}
	must(t, s.Connect(ctx(t), u), "connect")
	must(t, s.AddChannel(ctx(t), uaid, a), "add a")
	check := func(what string, uaid, chid uuid.UUID, wantHas bool, wantErr error) {
		t.Helper()
		got, has, err := s.Subscription(ctx(t), uaid, chid)
		if wantErr != nil {
			if !errors.Is(err, wantErr) {
				t.Fatalf("%s: err %v, want %v", what, err, wantErr)
			}
			return
		}
		must(t, err, what)
		wantUser, err := s.GetUser(ctx(t), uaid)
		must(t, err, what+": get user")
		if has != wantHas || got.NodeID != wantUser.NodeID || got.ConnectedAt != wantUser.ConnectedAt ||
			got.RouterType != wantUser.RouterType || got.RouterData["k"] != "v" || got.UAID != uaid {
			t.Fatalf("%s: %+v has %v; want %+v has %v", what, got, has, wantUser, wantHas)
		}
	}
	check("subscribed", uaid, a, true, nil)
	check("never added", uaid, b, false, nil)
	must(t, s.RemoveChannel(ctx(t), uaid, a), "remove a")
	check("removed", uaid, a, false, nil)
	must(t, s.AddChannel(ctx(t), uaid, b), "add b")
	check("after another add", uaid, b, true, nil)
	check("no record", uuid.New(), b, false, storage.ErrNotFound)
	must(t, s.DropUser(ctx(t), uaid), "drop")
	check("dropped", uaid, b, false, storage.ErrNotFound)
	if _, _, err := s.Subscription(ctx(t), uuid.Nil, a); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("nil uaid: %v, want ErrInvalid", err)
	}
}

func testHundredsOfChannels(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	must(t, s.Connect(ctx(t), user(uaid, "node-a", nowMS())), "connect")
	want := make([]uuid.UUID, 300)
	for i := range want {
		want[i] = uuid.New()
		must(t, s.AddChannel(ctx(t), uaid, want[i]), "add")
	}
	hasChannels(t, s, uaid, want...)
}

func testCountChannels(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	count := func(limit int) int {
		t.Helper()
		n, err := s.CountChannels(ctx(t), uaid, limit)
		must(t, err, "count channels")
		return n
	}
	if n := count(10); n != 0 {
		t.Fatalf("no user: %d channels", n)
	}
	must(t, s.Connect(ctx(t), user(uaid, "node-a", nowMS())), "connect")
	if n := count(10); n != 0 {
		t.Fatalf("new user: %d channels", n)
	}
	chids := make([]uuid.UUID, 7)
	for i := range chids {
		chids[i] = uuid.New()
		must(t, s.AddChannel(ctx(t), uaid, chids[i]), "add")
	}
	must(t, s.AddChannel(ctx(t), uaid, chids[0]), "add again")
	for limit, want := range map[int]int{1: 1, 6: 6, 7: 7, 8: 7, 1000: 7} {
		if n := count(limit); n != want {
			t.Fatalf("limit %d: %d channels, want %d", limit, n, want)
		}
	}
	must(t, s.RemoveChannel(ctx(t), uaid, chids[3]), "remove")
	if n := count(100); n != 6 {
		t.Fatalf("after a remove: %d channels, want 6", n)
	}
	// Another user's channels do not count.
	if n, err := s.CountChannels(ctx(t), uuid.New(), 100); err != nil || n != 0 {
		t.Fatalf("other user: %d, %v", n, err)
	}
	if _, err := s.CountChannels(ctx(t), uaid, 0); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("limit 0: %v, want ErrInvalid", err)
	}
	if _, err := s.CountChannels(ctx(t), uuid.Nil, 10); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("nil uaid: %v, want ErrInvalid", err)
	}
}

func hasChannels(t testing.TB, s storage.Store, uaid uuid.UUID, want ...uuid.UUID) {
	t.Helper()
	got, err := s.Channels(ctx(t), uaid)
	must(t, err, "list channels")
	cmp := func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) }
	slices.SortFunc(got, cmp)
	want = slices.Clone(want)
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		t.Fatalf("channels: got %d %v, want %d %v", len(got), got, len(want), want)
	}
	for _, c := range want {
		ok, err := s.HasChannel(ctx(t), uaid, c)
		must(t, err, "has channel")
		if !ok {
			t.Fatalf("HasChannel(%s) = false for a listed channel", c)
		}
	}
}
