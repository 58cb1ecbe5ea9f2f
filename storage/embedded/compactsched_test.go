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
		if m.Compact.Count > 0 && m.Levels[0].TablesCount <= 4 && running == 0 {
			t.Logf("%d compactions, %d tables left in L0", m.Compact.Count, m.Levels[0].TablesCount)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d compactions, %d tables in L0, %d grants held", m.Compact.Count, m.Levels[0].TablesCount, running)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
