package embedded

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The store's compactions run without Pebble's ticking scheduler: under a
// write load that flushes memtable after memtable, level 0 is compacted
// (it stays below Pebble's write stall), and when the writes end every
// grant has been handed back.
func TestCompactionsRunWithoutATicker(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir(), MemTableBytes: 256 << 10, NoSync: true})
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 512)
	key := make([]byte, 16)
	for i := range 40_000 { // ~20 MiB: some 80 memtables
		binary.BigEndian.PutUint64(key, rng.Uint64())
		binary.BigEndian.PutUint64(key[8:], uint64(i))
		if err := s.db.Set(append([]byte("test/"), key...), val, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := s.db.Metrics()
		cs := s.compactions
		cs.mu.Lock()
		running := cs.running
		cs.mu.Unlock()
		// Pebble compacts level 0 once it is DefaultL0Compaction
		// sublevels deep, and leaves it be below that: at rest it is
		// shallower, whatever the flushes and compactions' timing left.
		l0 := m.Levels[0].Sublevels
		if m.Compact.Count > 0 && l0 < DefaultL0Compaction && running == 0 {
			t.Logf("%d compactions, %d sublevels left in L0", m.Compact.Count, l0)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d compactions, %d sublevels in L0 (compacted at %d), %d grants held", m.Compact.Count, l0, DefaultL0Compaction, running)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
