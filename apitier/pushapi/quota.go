package pushapi

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/autopush-go/autopush/apitier/pushapi/clients"
)

// quotas are this node's view of each client's quotas (docs/sender.md,
// "Clients"): a token bucket per client for its rate, and its count of
// open pushes for its outstanding quota, read from the store at most once
// a second and counted up by this node's own accepts in between. So the
// outstanding quota holds exactly against this node's POSTs, and within
// a second's worth of other nodes' POSTs. Safe for concurrent use.
type quotas struct {
	mu sync.Mutex
	by map[string]*quota
	// limited is called for each client's quota when it is made and
	// when its limits change (its metrics).
	limited func(name string, q *quota)
}

// quota is one client's. Its fields under mu.
type quota struct {
	mu          sync.Mutex
	bucket      *bucket // nil: no rate limit
	perSecond   float64
	outstanding int
	open        int       // the open count as last read, plus accepts since
	read        time.Time // when open was read; zero: never
}

// countRefresh is how long an open count read from the store is used.
const countRefresh = time.Second

// of returns c's quota, its limits set to c's (a reload may change
// them: the bucket keeps its tokens while the rate stays).
func (qs *quotas) of(c *clients.Client) *quota {
	qs.mu.Lock()
	q := qs.by[c.Name]
	fresh := q == nil
	if fresh {
		q = &quota{}
		qs.by[c.Name] = q
	}
	qs.mu.Unlock()
	if q.set(c) || fresh {
		qs.limited(c.Name, q)
	}
	return q
}

// set gives q c's limits and reports whether they changed.
func (q *quota) set(c *clients.Client) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	changed := q.outstanding != c.Outstanding
	if q.perSecond != c.Rate {
		changed = true
		q.perSecond, q.bucket = c.Rate, nil
		if c.Rate > 0 {
			q.bucket = newBucket(c.Rate, time.Now())
		}
	}
	if q.outstanding != c.Outstanding {
		q.outstanding, q.read = c.Outstanding, time.Time{}
	}
	return changed
}

// takeRate takes a token from the bucket, or reports in how many whole
// seconds (at least 1) one will be there. Give the token back with
// giveBack when the POST does not end in a new push: the rate counts
// accepted pushes.
func (q *quota) takeRate(now time.Time) (ok bool, wait int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.bucket == nil {
		return true, 0
	}
	if d := q.bucket.take(now); d > 0 {
		return false, max(1, int(math.Ceil(d.Seconds())))
	}
	return true, 0
}

// giveBack returns a token takeRate took.
func (q *quota) giveBack() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.bucket != nil {
		q.bucket.tokens = min(q.bucket.burst, q.bucket.tokens+1)
	}
}

// bucket is a token bucket: rate tokens a second, at most burst. Not
// safe for concurrent use (quota.mu guards it).
type bucket struct {
	rate, burst, tokens float64
	at                  time.Time // when tokens was last brought up to date
}

func newBucket(perSecond float64, now time.Time) *bucket {
	burst := math.Max(1, math.Ceil(perSecond))
	return &bucket{rate: perSecond, burst: burst, tokens: burst, at: now}
}

// take takes a token and returns 0, or returns how long until there is
// one (and takes none).
func (b *bucket) take(now time.Time) time.Duration {
	if now.After(b.at) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.at).Seconds()*b.rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// reserveOpen counts one more open push for the client unless it has
// outstanding already: the count is read again (count) when older than
// countRefresh. Release the reservation with unreserve when the push is
// not stored.
func (q *quota) reserveOpen(ctx context.Context, count func(ctx context.Context, limit int) (int, error), now time.Time) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.outstanding == 0 {
		return true, nil
	}
	if q.read.IsZero() || now.Sub(q.read) >= countRefresh {
		n, err := count(ctx, q.outstanding)
		if err != nil {
			return false, err
		}
		q.open, q.read = n, now
	}
	if q.open >= q.outstanding {
		return false, nil
	}
	q.open++
	return true, nil
}

// unreserve gives back a reservation whose push was not stored.
func (q *quota) unreserve() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.outstanding > 0 && q.open > 0 {
		q.open--
	}
}

// openCount is the open count as last known (the outstanding gauge).
func (q *quota) openCount() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return float64(q.open)
}
