package ratelimit

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// A client's POSTs: a burst of max(1, rate) at start, then rate a
// second; the wait a refused POST is told is until the next place, in
// whole seconds; a place given back is there again, never above the
// burst; a client without a rate is never refused.
func TestClientQuotaPosts(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	qs := NewClientQuotas(nil)
	q := qs.Of("c", 2, 0)
	for i := range 2 {
		if ok, _ := q.TakePost(t0); !ok {
			t.Fatalf("POST %d of the burst of 2 refused", i+1)
		}
	}
	if ok, wait := q.TakePost(t0); ok || wait != 1 {
		t.Fatalf("third at once: %v, wait %d s, want refused, 1 s (0.5 s rounded up)", ok, wait)
	}
	half := t0.Add(500 * time.Millisecond)
	if ok, _ := q.TakePost(half); !ok {
		t.Fatal("a POST half a second later (rate 2) refused")
	}
	for range 3 {
		q.refundPost(half)
	}
	if n := q.posts.TokensAt(half); n != 2 {
		t.Fatalf("after three given back: %v places, want the burst of 2", n)
	}
	slow := qs.Of("s", 0.01, 0)
	slow.TakePost(t0)
	if ok, wait := slow.TakePost(t0.Add(time.Second)); ok || wait != 99 {
		t.Fatalf("rate 0.01 after 1 s: %v, wait %d, want refused, 99 s", ok, wait)
	}
	none := qs.Of("n", 0, 0)
	for range 1000 {
		if ok, _ := none.TakePost(t0); !ok {
			t.Fatal("a client without a rate refused")
		}
	}
	none.RefundPost()
}

// TestRefusedPostCostsNothing: a POST refused over the rate takes no
// place from the POSTs after it (its reservation is cancelled). Kept,
// the refused POSTs' reservations would hold the places to come, and the
// POST a second after the first would be refused too.
func TestRefusedPostCostsNothing(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	q := NewClientQuotas(nil).Of("c", 1, 0)
	if ok, _ := q.TakePost(t0); !ok {
		t.Fatal("the first POST refused")
	}
	for i := range 5 {
		if ok, _ := q.TakePost(t0.Add(time.Duration(i+1) * 100 * time.Millisecond)); ok {
			t.Fatalf("POST %d within the second let in", i+2)
		}
	}
	if ok, _ := q.TakePost(t0.Add(time.Second)); !ok {
		t.Fatal("a POST a second after the first refused: the refused ones took its place")
	}
}

// TestRefundAmongOthers: a place given back after other POSTs came (and
// one was refused) is there again, whole, for the next POST: the rate
// counts accepted pushes only. A Reservation's CancelAt would give back
// nothing here.
func TestRefundAmongOthers(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	q := NewClientQuotas(nil).Of("c", 2, 0)
	q.TakePost(t0)
	if ok, _ := q.TakePost(t0.Add(100 * time.Millisecond)); !ok {
		t.Fatal("the second of a burst of 2 refused")
	}
	if ok, _ := q.TakePost(t0.Add(200 * time.Millisecond)); ok {
		t.Fatal("a third within 0.2 s let in at rate 2")
	}
	q.refundPost(t0.Add(300 * time.Millisecond)) // the first POST's push was not stored
	if ok, _ := q.TakePost(t0.Add(300 * time.Millisecond)); !ok {
		t.Fatal("the place given back was not there for the next POST")
	}
	if ok, _ := q.TakePost(t0.Add(300 * time.Millisecond)); ok {
		t.Fatal("a refund gave back more than one place")
	}
}

// bucket is the model of a client's POSTs: a plain token bucket, rate a
// second up to a burst of max(1, rate), a refund adds a token back.
type bucket struct {
	rate, burst, tokens float64
	at                  time.Time
}

func (b *bucket) take(now time.Time) (bool, int) {
	if now.After(b.at) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.at).Seconds()*b.rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, max(1, int(math.Ceil((1-b.tokens)/b.rate)))
}

// TestPostsAgainstModel: over random runs of POSTs, refused ones and
// refunds in any order (POSTs overlap: the one refunded is not the
// last), the quota lets in and refuses exactly the POSTs the token
// bucket does, with the same waits.
func TestPostsAgainstModel(t *testing.T) {
	rates := []float64{0.01, 0.5, 1, 2, 3.3, 5, 10, 100}
	for run := range 400 {
		r := rand.New(rand.NewPCG(uint64(run), 7))
		perSec := rates[r.IntN(len(rates))]
		q := NewClientQuotas(nil).Of("c", perSec, 0)
		now := time.Unix(1_800_000_000, 0)
		model := &bucket{rate: perSec, burst: math.Max(1, math.Ceil(perSec)), at: now}
		model.tokens = model.burst
		taken := 0 // POSTs let in and not refunded
		for step := range 300 {
			now = now.Add(time.Duration(r.ExpFloat64() / perSec / 3 * float64(time.Second)))
			if taken > 0 && r.IntN(3) == 0 {
				taken--
				model.tokens = min(model.burst, model.tokens+1)
				q.refundPost(now)
				continue
			}
			wantOK, wantWait := model.take(now)
			ok, wait := q.TakePost(now)
			if ok != wantOK || wait != wantWait {
				t.Fatalf("run %d (rate %v), step %d: %v, wait %d; the bucket: %v, wait %d", run, perSec, step, ok, wait, wantOK, wantWait)
			}
			if ok && r.IntN(2) == 0 {
				taken++
			}
		}
	}
}

// TestReloadKeepsPlaces: reloading a client with the same rate keeps its
// limiter (and so its places used); a new rate starts a full one.
func TestReloadKeepsPlaces(t *testing.T) {
	t0 := time.Now()
	var calls int
	qs := NewClientQuotas(func(string, *ClientQuota) { calls++ })
	q := qs.Of("c", 1, 0)
	q.TakePost(t0)
	if qs.Of("c", 1, 0) != q || calls != 1 {
		t.Fatalf("the same limits: %d metric calls, want 1 (made)", calls)
	}
	if ok, _ := q.TakePost(t0); ok {
		t.Fatal("a reload with the same rate gave the burst back")
	}
	qs.Of("c", 5, 0)
	if ok, _ := q.TakePost(t0); !ok || calls != 2 {
		t.Fatalf("a new rate: POST %v, %d metric calls; want a full burst and the change told", ok, calls)
	}
}

// The outstanding quota: counted from the store once per countRefresh,
// counted up by accepts between, given back by Unreserve; a count that
// fails refuses nothing silently.
func TestClientQuotaOpen(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	q := NewClientQuotas(nil).Of("c", 0, 2)
	reads := 0
	count := func(_ context.Context, limit int) (int, error) {
		if limit != 2 {
			t.Fatalf("counted up to %d, want the quota 2", limit)
		}
		reads++
		return 1, nil
	}
	reserve := func(at time.Time) bool {
		ok, err := q.ReserveOpen(context.Background(), count, at)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !reserve(t0) || reserve(t0) {
		t.Fatal("one open of 2: the first reserve should pass, the second not")
	}
	q.Unreserve()
	if !reserve(t0.Add(time.Millisecond)) || reads != 1 || q.OpenCount() != 2 || q.Outstanding() != 2 {
		t.Fatalf("after an unreserve: %d reads, open %v", reads, q.OpenCount())
	}
	if !reserve(t0.Add(countRefresh)) || reads != 2 {
		t.Fatalf("a second later: %d reads, want the count read again", reads)
	}
	failing := func(context.Context, int) (int, error) { return 0, errors.New("store down") }
	if ok, err := q.ReserveOpen(context.Background(), failing, t0.Add(2*countRefresh)); ok || err == nil {
		t.Fatalf("a count that failed: %v, %v", ok, err)
	}
	none := NewClientQuotas(nil).Of("n", 0, 0)
	if ok, err := none.ReserveOpen(context.Background(), failing, t0); !ok || err != nil {
		t.Fatalf("no outstanding quota: %v %v, want in without a count", ok, err)
	}
}
