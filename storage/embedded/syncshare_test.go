package embedded

import (
	"context"
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
func burst(t *testing.T, s *Store, writers, each int) uint64 {
	t.Helper()
	before := fsyncs(t, s)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uaid := uuid.New()
			for range each {
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

// TestSyncShare: while calls are in progress, a WAL fsync waits until
// Config.SyncShare after the previous one, so synced commits arriving
// meanwhile share it: 32 writers committing at once make at most one
// fsync per SyncShare of the burst's time, where unshared they make
// several times that. The bound holds however loaded the machine (a
// slower burst allows more fsyncs); a count compared with a run without
// sharing did not (under CPU hogs the unshared run grouped its commits
// too). A lone writer never waits: below SyncShareFrom calls in progress
// nothing does.
func TestSyncShare(t *testing.T) {
	const writers, each, share = 32, 20, 10 * time.Millisecond
	s := open(t, Config{SyncShare: share, SyncShareFrom: 1})
	start := time.Now()
	n := burst(t, s, writers, each)
	took := time.Since(start)
	limit := uint64(took/share) + 2
	t.Logf("%d commits of %d writers: %d fsyncs in %v (at most %d with a %v share)", writers*each, writers, n, took, limit, share)
	if n == 0 || n > limit {
		t.Errorf("%d fsyncs in %v: more than one per %v share", n, took, share)
	}
	// A lone writer never waits: with a 200 ms share, 50 commits that each
	// waited would take 10 s; unshared they take milliseconds (the bound
	// leaves a loaded machine 100 ms a commit).
	lone := open(t, Config{SyncShare: 200 * time.Millisecond})
	start = time.Now()
	burst(t, lone, 1, 50)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a lone writer's 50 commits took %v: they waited for company", took)
	}
}
