package embedded

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// compactScheduler is Pebble's compaction scheduler without a clock.
// Pebble's own (ConcurrencyLimitScheduler) grants the same way but also
// polls the store ten times a second, which is most of the wakeups of a
// node at rest. Polling is not needed: the store asks (TrySchedule) when
// it has a compaction to run, and is refused only while compactions run
// at its allowed concurrency; one of those ending (Done) grants what
// waits, and a rise of the allowed concurrency is announced
// (UpdateGetAllowedWithoutPermission). A compaction can wait for the
// next one to end, never for a tick.
type compactScheduler struct {
	mu         sync.Mutex
	db         pebble.DBForCompaction
	running    int
	allowed    int // the store's allowed concurrency when last asked
	closed     bool
	granting   bool
	grantingCv *sync.Cond
}

var _ pebble.CompactionScheduler = (*compactScheduler)(nil)

func newCompactScheduler() *compactScheduler {
	s := &compactScheduler{}
	s.grantingCv = sync.NewCond(&s.mu)
	return s
}

// Register implements pebble.CompactionScheduler.
func (s *compactScheduler) Register(_ int, db pebble.DBForCompaction) {
	s.mu.Lock()
	s.db = db
	s.mu.Unlock()
}

// Unregister implements pebble.CompactionScheduler: no grant starts
// after it returns, and none is under way.
func (s *compactScheduler) Unregister() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for s.granting {
		s.grantingCv.Wait()
	}
}

// TrySchedule implements pebble.CompactionScheduler. The store calls it
// with its own mutex held: it must not call back into the store's
// scheduling (GetWaitingCompaction, Schedule).
func (s *compactScheduler) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, nil
	}
	s.allowed = s.db.GetAllowedWithoutPermission()
	if s.allowed > s.running {
		s.running++
		return true, s
	}
	return false, nil
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler:
// more concurrency allowed grants what waits. Pebble may call it with
// its mutex held, so the grant runs on a goroutine of its own.
func (s *compactScheduler) UpdateGetAllowedWithoutPermission() {
	s.mu.Lock()
	allowed := s.db.GetAllowedWithoutPermission()
	rose := allowed > s.allowed
	s.allowed = allowed
	s.mu.Unlock()
	if rose {
		go s.grant()
	}
}

// Started, MeasureCPU and CumulativeStats implement
// pebble.CompactionGrantHandle: nothing is paced.
func (s *compactScheduler) Started()                                  {}
func (s *compactScheduler) MeasureCPU(pebble.CompactionGoroutineKind) {}
func (s *compactScheduler) CumulativeStats(pebble.CompactionGrantHandleStats) {
}

// Done implements pebble.CompactionGrantHandle: a compaction ended (the
// store holds no lock), so what waits may start.
func (s *compactScheduler) Done() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	s.grant()
}

// grant starts waiting compactions while the allowed concurrency has
// room. One grant runs at a time, without s.mu held while it calls the
// store (whose locks come before the scheduler's).
func (s *compactScheduler) grant() {
	s.mu.Lock()
	for s.granting {
		s.grantingCv.Wait()
	}
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.granting = true
	s.mu.Unlock()
	for {
		s.mu.Lock()
		s.allowed = s.db.GetAllowedWithoutPermission()
		room := s.allowed > s.running
		s.mu.Unlock()
		if !room {
			break
		}
		if waiting, _ := s.db.GetWaitingCompaction(); !waiting {
			break
		}
		if !s.db.Schedule(s) {
			break
		}
		s.mu.Lock()
		s.running++
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.granting = false
	s.grantingCv.Broadcast()
	s.mu.Unlock()
}
