package storagetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/autopush-go/autopush/storage"
	"github.com/google/uuid"
)

// Bench runs the storage benchmarks every backend reports, each single
// and parallel (b.RunParallel with 32 goroutines per GOMAXPROCS). Parallel
// figures show group commit: many writers sharing one durable sync.
func Bench(b *testing.B, h Harness) {
	benches := []struct {
		name string
		fn   func(*testing.B, storage.Store, bool)
	}{
		{"SaveMessage", benchSave},
		{"TimestampMessages10", benchFetch},
		{"DeleteMessage", benchDelete},
		{"Connect", benchConnect},
		{"GetUser", benchGetUser},
		{"FateLifecycle", benchFate},
	}
	for _, bc := range benches {
		for _, parallel := range []bool{false, true} {
			name := bc.name + "/single"
			if parallel {
				name = bc.name + "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				s := h.New(b)
				b.ReportAllocs()
				bc.fn(b, s, parallel)
			})
		}
	}
}

// loop runs body b.N times, from one goroutine or from RunParallel's.
// Each goroutine gets its own user, as distinct clients would, and calls
// setup once for it (one call per goroutine, negligible against b.N).
func loop(b *testing.B, parallel bool, setup, body func(uaid uuid.UUID)) {
	run := func(next func() bool) {
		uaid := uuid.New()
		if setup != nil {
			setup(uaid)
		}
		for next() {
			body(uaid)
		}
	}
	b.ResetTimer()
	if !parallel {
		n := 0
		run(func() bool { n++; return n <= b.N })
		return
	}
	// 32 goroutines per CPU: a node has many requests in flight, and
	// group commit only shows with many concurrent writers.
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
}

func benchCtx() context.Context { return context.Background() }

func benchSave(b *testing.B, s storage.Store, parallel bool) {
	chid := uuid.New()
	loop(b, parallel, nil, func(uaid uuid.UUID) {
		m := msg(chid, "aGVsbG8gd29ybGQgZnJvbSBhIGJlbmNobWFyaw")
		if err := s.SaveMessage(benchCtx(), uaid, m); err != nil {
			b.Fatal(err)
		}
	})
}

func benchFetch(b *testing.B, s storage.Store, parallel bool) {
	chid := uuid.New()
	setup := func(uaid uuid.UUID) {
		for range 10 {
			if err := s.SaveMessage(benchCtx(), uaid, msg(chid, "ZGF0YQ")); err != nil {
				b.Fatal(err)
			}
		}
	}
	loop(b, parallel, setup, func(uaid uuid.UUID) {
		ms, err := s.TimestampMessages(benchCtx(), uaid, 0, 10)
		if err != nil || len(ms) != 10 {
			b.Fatalf("fetched %d: %v", len(ms), err)
		}
	})
}

func benchDelete(b *testing.B, s storage.Store, parallel bool) {
	chid := uuid.New()
	// An ack deletes a row that exists, so each iteration saves one
	// message and deletes it: the delete costs this minus SaveMessage.
	loop(b, parallel, nil, func(uaid uuid.UUID) {
		m := msg(chid, "")
		if err := s.SaveMessage(benchCtx(), uaid, m); err != nil {
			b.Fatal(err)
		}
		if err := s.DeleteMessage(benchCtx(), uaid, m.Key()); err != nil {
			b.Fatal(err)
		}
	})
}

func benchConnect(b *testing.B, s storage.Store, parallel bool) {
	// Each iteration is a reconnect of the goroutine's user: a newer
	// connected_at each time.
	t0 := time.Now().UnixMilli()
	var n atomic.Int64
	loop(b, parallel, nil, func(uaid uuid.UUID) {
		if err := s.Connect(benchCtx(), user(uaid, "http://node-a:8081", t0+n.Add(1))); err != nil {
			b.Fatal(err)
		}
	})
}

func benchGetUser(b *testing.B, s storage.Store, parallel bool) {
	setup := func(uaid uuid.UUID) {
		if err := s.Connect(benchCtx(), user(uaid, "http://node-a:8081", time.Now().UnixMilli())); err != nil {
			b.Fatal(err)
		}
	}
	loop(b, parallel, setup, func(uaid uuid.UUID) {
		if _, err := s.GetUser(benchCtx(), uaid); err != nil {
			b.Fatal(err)
		}
	})
}

// benchFate is one tracked message's whole life in storage: Track, Reach
// stored, Reach transmitted, Settle delivered (each move counts its
// milestone and moves its live counts).
func benchFate(b *testing.B, s storage.Store, parallel bool) {
	chid := uuid.New()
	exp := time.Now().Add(time.Hour)
	loop(b, parallel, nil, func(uaid uuid.UUID) {
		f := newFate(uaid, chid, "", exp, storage.ReceiptSubID{})
		if err := s.Track(benchCtx(), f); err != nil {
			b.Fatal(err)
		}
		for _, st := range []storage.FateState{storage.FateStored, storage.FateTransmitted} {
			if ok, err := s.Reach(benchCtx(), uaid, f.ID, st); err != nil || !ok {
				b.Fatalf("reach %s: %v %v", st, ok, err)
			}
		}
		if ok, err := s.Settle(benchCtx(), uaid, f.ID, storage.FateDelivered, storage.DropNone); err != nil || !ok {
			b.Fatalf("settle: %v %v", ok, err)
		}
	})
}
