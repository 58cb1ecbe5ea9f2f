package sender_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
	"github.com/autopush-go/autopush/storage"
)

// from is a push of client to user.
func from(client, user string) sender.Request {
	r := hello(user)
	r.Client = client
	return r
}

// calledAt is the position of each user's first request in the fake's
// log (0 the first request).
func calledAt(log []swrvefake.Received) map[string]int {
	at := map[string]int{}
	for i, rec := range log {
		if _, ok := at[rec.User]; !ok {
			at[rec.User] = i
		}
	}
	return at
}

// TestFairBetweenClients: client a posts 5,000 immediate pushes, far
// more than the queue (200 slots, a's share half of them while it is
// alone) and the pace (50 calls a second, below what either backend
// accepts on a loaded machine, so that a's backlog builds) take; then
// client b posts 10. The reader takes one push of each client in turn,
// so b's i-th push (from 0) is called at most the look-ahead (a quarter
// second of calls, 12: handed on before b came) plus 2 × (i + 1) calls
// after it was accepted: b's share of the pace, half with two clients.
// 20 calls of margin cover sends whose goroutines plan their calls out
// of order (make test-stress once put one 12 calls late). Without
// fairness b's pushes find the queue full and wait for a's whole backlog (thousands of calls). Every b push is sent while
// a's backlog is still being sent.
func TestFairBetweenClients(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		fake := startFake(t)
		sc := swrveConfig(fake.URL())
		sc.Rate, sc.Delay = 60, 20*time.Millisecond
		cfg := testConfig("node-a")
		// The sizing rule: a portion is sent within an interval at the pace.
		cfg.QueueCapacity, cfg.PendingPortion, cfg.ScheduledPortion = 200, 4, 4
		r := &rig{s: launchSwrve(t, newStore(t), sc, cfg), fake: fake}
		<-r.s.Ready()
		const aPushes, bPushes, lookAhead, margin, workers = 5000, 10, 12, 20, 32
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < aPushes; i += workers {
					if _, err := r.s.Accept(ctx, from("a", fmt.Sprintf("a-%04d", i))); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("accept a: %v", err)
		}
		before := make([]int, bPushes) // calls made when b's i-th push was accepted
		ids := make([]uuid.UUID, bPushes)
		accepted := make([]time.Time, bPushes)
		for i := range bPushes {
			before[i], accepted[i] = r.fake.Count(), time.Now()
			p := r.accept(t, from("b", fmt.Sprintf("b-%d", i)))
			if p.State != storage.PushInMemory {
				t.Fatalf("b's push %d is %s: want it queued at once (IN_MEMORY), a's backlog beside it", i, p.State)
			}
			ids[i] = p.ID
		}
		for _, id := range ids {
			waitState(t, r.s, id, storage.PushSent)
		}
		log := r.fake.Log()
		at := calledAt(log)
		aSent := 0
		for _, rec := range log[:at[fmt.Sprintf("b-%d", bPushes-1)]] {
			if rec.User[0] == 'a' {
				aSent++
			}
		}
		for i := range bPushes {
			pos := at[fmt.Sprintf("b-%d", i)]
			rec := log[pos]
			t.Logf("b-%d: accepted after call %d, called as call %d, %s later", i, before[i], pos, rec.At.Sub(accepted[i]).Round(time.Millisecond))
			if bound := before[i] + lookAhead + 2*(i+1) + margin; pos > bound {
				t.Errorf("b's push %d was call %d, accepted after call %d: want at most call %d (look-ahead %d + its turns %d + margin %d)",
					i, pos, before[i], bound, lookAhead, 2*(i+1), margin)
			}
		}
		if aSent >= aPushes {
			t.Errorf("a's whole backlog (%d) was sent before b's last push", aSent)
		}
		t.Logf("a's pushes sent before b's last: %d of %d", aSent, aPushes)
	})
}

// TestJobsSkipAFullShare: SendPending reads the due pushes oldest first,
// and skips, without stopping at, a push whose client holds its share of
// the queue, so another client's pushes read in the same run are queued
// in it. Here one run reads a's 25 pushes and b's 5 (all PENDING, taken
// by a node that only accepts), a's share of the queue of 40 is 20 while
// it is alone: the run claims 20 of a's, skips a's last 5, and claims
// b's. The reader then alternates, so b's 5 calls are among the first 15.
// A run that stopped at a's 21st push would leave b's for the next run,
// 7 s later, behind a's 20 (4 s of calls at 5 a second).
func TestJobsSkipAFullShare(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := newStore(t)
		fake := startFake(t)
		// 5 calls a second (one at a time ahead), portions of 30 every 7 s
		// (30 × 200 ms = 6 s < 7 s: portion × delay < interval).
		sc := swrveConfig(fake.URL())
		sc.Rate, sc.Delay, sc.AverageLatency = 6, 200*time.Millisecond, 200*time.Millisecond
		cfg := testConfig("node-out")
		cfg.QueueCapacity, cfg.PendingPortion, cfg.ScheduledPortion = 40, 30, 30
		cfg.PendingInterval, cfg.ScheduledInterval = 7*time.Second, 7*time.Second
		in := cfg
		in.Node, in.Workers = "node-in", false
		// Due pushes are read by At, then id: a's first (v7 ids grow).
		accepting := launchSwrve(t, store, sc, in)
		for i := range 30 {
			client, user := "a", fmt.Sprintf("a-%02d", i)
			if i >= 25 {
				client, user = "b", fmt.Sprintf("b-%d", i-25)
			}
			p, err := accepting.Accept(context.Background(), from(client, user))
			if err != nil || p.State != storage.PushPending {
				t.Fatalf("accept %s: %s %v", user, p.State, err)
			}
		}
		launchSwrve(t, store, sc, cfg)
		if err := fake.WaitCount(waitCtx(t, 30*time.Second), 15); err != nil {
			t.Fatal(err)
		}
		first := fake.Log()[:15]
		at := calledAt(first)
		for i := range 5 {
			if _, ok := at[fmt.Sprintf("b-%d", i)]; !ok {
				var got []string
				for _, rec := range first {
					got = append(got, rec.User)
				}
				t.Fatalf("b's push %d is not among the first 15 calls %v", i, got)
			}
		}
	})
}

// waitCtx is a context that ends with the test, or after d.
func waitCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
