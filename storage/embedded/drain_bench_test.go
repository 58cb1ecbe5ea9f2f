package embedded

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// BenchmarkStoredDrain is the storage side of `loadtest stored`
// (docs/benchmarks.md): b.N messages stored for user agents that are
// away, 20 each, then every user agent comes back and drains them, 64 at
// a time, as a connection node does (read, record the page's write, ack:
// delete and settle), while the application server reads and acks its
// receipts. Untracked: the messages alone; tracked: every message also
// has a fate (Track, Reach stored, the page's ReachAll transmitted,
// DeleteDelivered at the ack) and a receipt. The drain is what is timed; per message it reports the bytes
// Pebble's flushes and compactions wrote meanwhile (lsm-B/msg), the WAL
// bytes (wal-B/msg) and the whole process's CPU time (cpu-µs/msg, where
// the compactions' cost shows: they run on their own goroutines).
func BenchmarkStoredDrain(b *testing.B) {
	for _, tracked := range []bool{false, true} {
		name := "untracked"
		if tracked {
			name = "tracked"
		}
		b.Run(name, func(b *testing.B) {
			s := open(b, Config{SweepInterval: time.Hour})
			d := newDrainBench(s, b.N, tracked)
			b.ReportAllocs()
			b.StopTimer()
			d.store(b)
			before, cpu, wal := lsmWritten(s), cpuTime(), s.db.Metrics().WAL.BytesWritten
			b.StartTimer()
			d.drain(b)
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu)/1e3/float64(b.N), "cpu-µs/msg")
			b.ReportMetric(float64(lsmWritten(s)-before)/float64(b.N), "lsm-B/msg")
			b.ReportMetric(float64(s.db.Metrics().WAL.BytesWritten-wal)/float64(b.N), "wal-B/msg")
		})
	}
}

// lsmWritten is what Pebble's flushes and compactions have written.
func lsmWritten(s *Store) uint64 {
	var n uint64
	for _, l := range s.db.Metrics().Levels {
		n += l.TableBytesCompacted + l.TableBytesFlushed
	}
	return n
}

// cpuTime is the process's user and system CPU time so far, ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// drainBench is one BenchmarkStoredDrain run: its users and receipt
// subscription.
type drainBench struct {
	s       *Store
	tracked bool
	users   []uuid.UUID
	per     []int // messages of each user
	chid    uuid.UUID
	sub     storage.ReceiptSubID
	data    string
}

func newDrainBench(s *Store, n int, tracked bool) *drainBench {
	d := &drainBench{s: s, tracked: tracked, chid: uuid.New(), data: randomText(700)}
	copy(d.sub[:], uuid.New().NodeID())
	d.sub[15] = 1
	for i := 0; i < n; i += 20 {
		d.users = append(d.users, uuid.New())
		d.per = append(d.per, min(20, n-i))
	}
	return d
}

// version is a message id as long as the endpoint's (a Fernet token:
// encrypted, so as random as a message's data).
func version() string { return "gAAAAA" + randomText(180) }

// randomText is n random base64url characters: encrypted data, which
// compresses no better than that.
func randomText(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}

// each runs f for every user, 64 at a time.
func (d *drainBench) each(b *testing.B, f func(i int, uaid uuid.UUID) error) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i, d.users[i]); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range d.users {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (d *drainBench) store(b *testing.B) {
	ctx := context.Background()
	if d.tracked {
		if err := d.s.PutReceiptSub(ctx, storage.ReceiptSub{ID: d.sub, Created: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	d.each(b, func(i int, uaid uuid.UUID) error {
		for range d.per[i] {
			k := storage.NewSortKey()
			m := storage.Message{CHID: d.chid, Version: version(), SortKey: k, TTL: 3600, Data: d.data,
				Headers: map[string]string{"encoding": "aes128gcm"}, Tracked: d.tracked}
			if d.tracked {
				f := storage.Fate{UAID: uaid, ID: storage.NewFateID(m.Version), CHID: d.chid, MessageID: m.Version,
					Expiry: time.Now().Add(time.Hour), Receipt: d.sub, State: storage.FateReceived}
				if err := d.s.Track(ctx, f); err != nil {
					return err
				}
			}
			if err := d.s.SaveMessage(ctx, uaid, m); err != nil {
				return err
			}
			if d.tracked {
				if _, err := d.s.Reach(ctx, uaid, storage.NewFateID(m.Version), storage.FateStored); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func (d *drainBench) drain(b *testing.B) {
	ctx := context.Background()
	done := make(chan struct{})
	var follow sync.WaitGroup
	if d.tracked {
		follow.Add(1)
		go func() {
			defer follow.Done()
			d.followReceipts(b, done)
		}()
	}
	d.each(b, func(_ int, uaid uuid.UUID) error {
		ms, err := d.s.TimestampMessages(ctx, uaid, 0, 100)
		if err != nil {
			return err
		}
		if d.tracked {
			ids := make([]storage.FateID, len(ms))
			for i := range ms {
				ids[i] = storage.NewFateID(ms[i].Version)
			}
			if _, err := d.s.ReachAll(ctx, uaid, ids, storage.FateTransmitted); err != nil {
				return err
			}
		}
		for _, m := range ms {
			if d.tracked {
				if _, err := d.s.DeleteDelivered(ctx, uaid, m.Key(), storage.NewFateID(m.Version)); err != nil {
					return err
				}
			} else if err := d.s.DeleteMessage(ctx, uaid, m.Key()); err != nil {
				return err
			}
		}
		return nil
	})
	close(done)
	follow.Wait()
}

// followReceipts reads and acks receipts until done, then until none is
// left, as the load tester's application server does.
func (d *drainBench) followReceipts(b *testing.B, done <-chan struct{}) {
	ctx := context.Background()
	for {
		rs, err := d.s.Receipts(ctx, d.sub, 1000)
		if err != nil {
			b.Error(err)
			return
		}
		ids := make([]string, len(rs))
		for i := range rs {
			ids[i] = rs[i].ID
		}
		if err := d.s.AckReceipts(ctx, d.sub, ids); err != nil {
			b.Error(err)
			return
		}
		if len(rs) == 0 {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}
