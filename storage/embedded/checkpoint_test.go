package embedded

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/autopush-go/autopush/storage"
	"github.com/google/uuid"
)

// TestCheckpointWhileWriting: a checkpoint taken while a writer saves
// messages opens as a store of its own holding every message saved
// before it began, and a run of the writer's messages with no gap (each
// save whole, none after a missing one); a second checkpoint into the
// same directory is refused and leaves the first alone.
func TestCheckpointWhileWriting(t *testing.T) {
	s := open(t, Config{})
	ctx := context.Background()
	uaid, chid := uuid.New(), uuid.New()
	if err := s.Connect(ctx, storage.User{UAID: uaid, RouterType: "webpush", NodeID: "n", ConnectedAt: 1}); err != nil {
		t.Fatal(err)
	}
	save := func() {
		m := msgFor(chid, 3600, time.Now())
		m.SortKey = storage.NewSortKey()
		if err := s.SaveMessage(ctx, uaid, m); err != nil {
			t.Error(err)
		}
	}
	for range 50 {
		save()
	}
	stop, done := make(chan struct{}), sync.WaitGroup{}
	done.Go(func() {
		for range 900 { // a page of TimestampMessages holds them all
			select {
			case <-stop:
				return
			default:
				save()
			}
		}
	})
	dir := filepath.Join(t.TempDir(), "copy")
	err := s.Checkpoint(ctx, dir)
	close(stop)
	done.Wait()
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if err := s.Checkpoint(ctx, dir); !errors.Is(err, os.ErrExist) {
		t.Errorf("a second checkpoint into %s: %v, want it refused (exists)", dir, err)
	}
	all, err := s.TimestampMessages(ctx, uaid, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	c := open(t, Config{Dir: dir})
	got, err := c.TimestampMessages(ctx, uaid, 0, 1000)
	if err != nil || len(got) < 50 || len(got) > len(all) {
		t.Fatalf("the checkpoint holds %d messages (%v); want at least the 50 saved before it, at most the %d saved in all", len(got), err, len(all))
	}
	for i := range got {
		if got[i].SortKey != all[i].SortKey {
			t.Fatalf("message %d of the checkpoint is %d, the store's %d: not a prefix of the writes", i, got[i].SortKey, all[i].SortKey)
		}
	}
	t.Logf("%d messages in the store, %d in the checkpoint", len(all), len(got))
}
