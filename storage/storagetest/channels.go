package storagetest

import (
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
