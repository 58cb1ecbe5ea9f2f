package tracking

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/storage/embedded"
)

// lossy is a store whose counters lost some increments, as scylla's
// report theirs.
type lossy struct {
	*embedded.Store
	lost int64
}

func (l lossy) LostMilestoneCounts() int64 { return l.lost }

// TestWriteMetrics: /metrics carries the increments this node's storage
// lost (0 when it keeps exact counts) and, with tracking on, every
// milestone.
func TestWriteMetrics(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: log})
	et.Must(t, err, "open the embedded store")
	t.Cleanup(func() { s.Close() })
	on := Config{Receipts: true, SweepInterval: time.Second, StorageTimeout: 5 * time.Second}
	for _, c := range []struct {
		name  string
		cfg   Config
		store Store
		want  []string
	}{
		{"exact", on, s, []string{"autoendpoint_milestone_counts_lost_total 0\n",
			`autopush_milestones_total{milestone="dropped_withdrawn"} 0` + "\n"}},
		{"lossy", on, lossy{s, 3}, []string{"autoendpoint_milestone_counts_lost_total 3\n"}},
		{"off", Config{StorageTimeout: time.Second}, lossy{s, 3}, []string{"autoendpoint_milestone_counts_lost_total 3\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := New(c.cfg, c.store, log)
			et.Must(t, err, "new tracker")
			var b strings.Builder
			tr.WriteMetrics(&b)
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("metrics lack %q:\n%s", w, b.String())
				}
			}
			if !c.cfg.Receipts && strings.Contains(b.String(), "autopush_milestones_total") {
				t.Errorf("tracking off, yet:\n%s", b.String())
			}
		})
	}
}
