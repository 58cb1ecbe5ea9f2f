package pushapi

import (
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/pushapi/clients"
)

// The bucket: a burst of max(1, rate) at start, then rate tokens a
// second; the wait it reports is until the next token; a token given
// back is there again, never above the burst.
func TestBucket(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	q := &quota{}
	q.set(&clients.Client{Name: "c", Rate: 2})
	q.bucket.at = t0
	for i := range 2 {
		if ok, _ := q.takeRate(t0); !ok {
			t.Fatalf("token %d of the burst of 2 refused", i+1)
		}
	}
	if ok, wait := q.takeRate(t0); ok || wait != 1 {
		t.Fatalf("third at once: %v, wait %d s, want refused, 1 s (0.5 s rounded up)", ok, wait)
	}
	if ok, _ := q.takeRate(t0.Add(500 * time.Millisecond)); !ok {
		t.Fatal("a token half a second later (rate 2) refused")
	}
	q.giveBack()
	q.giveBack()
	q.giveBack()
	if q.bucket.tokens != 2 {
		t.Fatalf("after three given back: %v tokens, want the burst of 2", q.bucket.tokens)
	}
	slow := &quota{}
	slow.set(&clients.Client{Name: "s", Rate: 0.01})
	slow.bucket.at = t0
	slow.takeRate(t0)
	if ok, wait := slow.takeRate(t0.Add(time.Second)); ok || wait != 99 {
		t.Fatalf("rate 0.01 after 1 s: %v, wait %d, want refused, 99 s", ok, wait)
	}
	none := &quota{}
	none.set(&clients.Client{Name: "n"})
	for range 1000 {
		if ok, _ := none.takeRate(t0); !ok {
			t.Fatal("a client without a rate refused")
		}
	}
}
