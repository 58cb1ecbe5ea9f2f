package tracking

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// liveOf is a store whose live counts are given.
type liveOf struct {
	*embedded.Store
	live map[storage.FateState]int64
}

func (l liveOf) LiveCounts(context.Context) (map[storage.FateState]int64, error) { return l.live, nil }

// TestReferenceCounts: the reference's report has every one of its state
// names, each counting the state of ours docs/receipts.md maps it to,
// and 0 for those we have no state for.
func TestReferenceCounts(t *testing.T) {
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	et.Must(t, err, "open the embedded store")
	t.Cleanup(func() { s.Close() })
	live := map[storage.FateState]int64{}
	for i, st := range storage.FateStates {
		live[st] = int64(i + 1) // received 1, stored 2, ..., errored 9
	}
	tr, err := New(Config{Receipts: true, SweepInterval: time.Second, StorageTimeout: time.Second}, liveOf{s, live}, nil)
	et.Must(t, err, "tracker")
	got, err := tr.ReferenceCounts(context.Background())
	et.Must(t, err, "reference counts")
	want := map[string]int64{
		"received": 1, "stored": 2, "int_transmitted": 3, "transmitted_webpush": 3, "accepted": 4,
		"delivered": 5, "expired": 6, "dropped": 7, "bridge_transmitted": 8, "errored": 9,
		"retrieved": 0, "int_accepted": 0, "accepted_webpush": 0, "transmitted": 0, "decryption_error": 0, "not_delivered": 0,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("report\n got  %v\n want %v", got, want)
	}
}
