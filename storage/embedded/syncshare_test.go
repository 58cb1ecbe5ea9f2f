package embedded

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
)

// fsyncs is how many WAL fsyncs s has made (Pebble's fsync latency
// histogram counts each).
func fsyncs(t *testing.T, s *Store) uint64 {
	t.Helper()
	var m dto.Metric
	if err := s.db.Metrics().LogWriter.FsyncLatency.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// burst makes writers × each synced commits concurrently (a channel added
// per commit) and returns how many fsyncs they took.
func burst(t *testing.T, s *Store, writers, each int, pause time.Duration) uint64 {
	t.Helper()
	before := fsyncs(t, s)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uaid := uuid.New()
			for range each {
				if pause > 0 {
					time.Sleep(rand.N(2 * pause)) // arrivals spread as a burst of registers'
				}
				if err := s.AddChannel(context.Background(), uaid, uuid.New()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return fsyncs(t, s) - before
}

// TestSyncShare: synced commits arriving while an fsync is recent wait
// to share the next one (Config.SyncShare): 32 writers pacing their
// commits (as a burst of registers arrives) take fewer fsyncs than with
// SyncShare off. A lone writer never waits: below SyncShareFrom calls in
// progress nothing does.
func TestSyncShare(t *testing.T) {
	const writers, each, pause = 32, 40, 2 * time.Millisecond
	off := burst(t, open(t, Config{SyncShare: -1}), writers, each, pause)
	s := open(t, Config{SyncShareFrom: 1})
	on := burst(t, s, writers, each, pause)
	t.Logf("%d commits of %d paced writers: %d fsyncs shared, %d not", writers*each, writers, on, off)
	if on == 0 || on*4 > off*3 {
		t.Errorf("%d fsyncs with SyncShare, %d without: want at most three quarters", on, off)
	}
	d := open(t, Config{})
	t.Logf("with the default SyncShareFrom (%d): %d fsyncs", DefaultSyncShareFrom, burst(t, d, writers, each, pause))
	// A lone writer never waits: with a 200 ms share, 50 commits that each
	// waited would take 10 s; unshared they take milliseconds (the bound
	// leaves a loaded machine 100 ms a commit).
	lone := open(t, Config{SyncShare: 200 * time.Millisecond})
	start := time.Now()
	burst(t, lone, 1, 50, 0)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a lone writer's 50 commits took %v: they waited for company", took)
	}
}
