package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ClientQuotas are this node's view of each push API client's quotas
// (docs/sender.md, "Clients"): a limiter per client for the POSTs it may
// make a second, and its count of open pushes for its outstanding quota,
// read from the store at most once a second and counted up by this
// node's own accepts in between. So the outstanding quota holds exactly
// against this node's POSTs, and within a second's worth of other nodes'
// POSTs. Safe for concurrent use.
type ClientQuotas struct {
	mu sync.Mutex
	by map[string]*ClientQuota
	// limited is called for each client's quota when it is made and
	// when its limits change (its metrics).
	limited func(name string, q *ClientQuota)
}

// NewClientQuotas makes an empty set; limited (nil: none) is called with
// each client's quota when it is made and when its limits change.
func NewClientQuotas(limited func(name string, q *ClientQuota)) *ClientQuotas {
	if limited == nil {
		limited = func(string, *ClientQuota) {}
	}
	return &ClientQuotas{by: map[string]*ClientQuota{}, limited: limited}
}

// ClientQuota limits one client: the pushes it may POST a second, and
// the pushes it may have open (stored and not yet sent). Safe for
// concurrent use.
type ClientQuota struct {
	mu          sync.Mutex
	posts       *rate.Limiter // nil: no rate limit
	perSecond   float64
	outstanding int
	open        int       // the open count as last read, plus accepts since
	read        time.Time // when open was read; zero: never
}

// countRefresh is how long an open count read from the store is used.
const countRefresh = time.Second

// Of returns client name's quota, its limits set to perSecond POSTs a
// second (0: none) and outstanding open pushes (0: none). A reload may
// change them: the limiter keeps its tokens while the rate stays.
func (qs *ClientQuotas) Of(name string, perSecond float64, outstanding int) *ClientQuota {
	qs.mu.Lock()
	q := qs.by[name]
	fresh := q == nil
	if fresh {
		q = &ClientQuota{}
		qs.by[name] = q
	}
	qs.mu.Unlock()
	if q.set(perSecond, outstanding) || fresh {
		qs.limited(name, q)
	}
	return q
}

// set gives q its limits and reports whether they changed. The limiter's
// burst is a second's POSTs (at least one), and it starts full.
func (q *ClientQuota) set(perSecond float64, outstanding int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	changed := q.outstanding != outstanding
	if q.perSecond != perSecond {
		changed = true
		q.perSecond, q.posts = perSecond, nil
		if perSecond > 0 {
			q.posts = rate.NewLimiter(rate.Limit(perSecond), int(math.Max(1, math.Ceil(perSecond))))
		}
	}
	if q.outstanding != outstanding {
		q.outstanding, q.read = outstanding, time.Time{}
	}
	return changed
}

// TakePost takes a place within the client's rate for a POST at now, or
// reports in how many whole seconds (at least 1) there will be one. A
// refused POST's reservation is cancelled at once, so it costs the
// client nothing. Give the place back with RefundPost when the POST does
// not end in a new push: the rate counts accepted pushes.
func (q *ClientQuota) TakePost(now time.Time) (ok bool, wait int) {
	// Under mu: a reservation is cancelled exactly only while it is the
	// limiter's last.
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.posts == nil {
		return true, 0
	}
	r := q.posts.ReserveN(now, 1)
	if d := r.DelayFrom(now); !r.OK() || d > 0 {
		r.CancelAt(now)
		return false, max(1, int(math.Ceil(d.Seconds())))
	}
	return true, 0
}

// RefundPost gives back a place TakePost took (never past the burst).
func (q *ClientQuota) RefundPost() { q.refundPost(time.Now()) }

// refundPost gives a place back at now. Not by cancelling the POST's
// reservation: CancelAt gives back only what no later reservation has
// used, so a POST refunded after others came (POSTs overlap) would cost
// its client part of a place. A reservation of -1 adds one place to the
// limiter as of now (x/time/rate subtracts n from its tokens, capped at
// the burst when next read): exactly the place the POST took.
// TestPostsAgainstModel holds it to the plain token bucket.
func (q *ClientQuota) refundPost(now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.posts != nil {
		q.posts.ReserveN(now, -1)
	}
}

// ReserveOpen counts one more open push for the client unless it has
// outstanding already: the count is read again (count) when older than
// countRefresh. Release the reservation with Unreserve when the push is
// not stored.
func (q *ClientQuota) ReserveOpen(ctx context.Context, count func(ctx context.Context, limit int) (int, error), now time.Time) (bool, error) {
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

// Unreserve gives back a reservation whose push was not stored.
func (q *ClientQuota) Unreserve() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.outstanding > 0 && q.open > 0 {
		q.open--
	}
}

// Outstanding is the client's outstanding quota (0: none).
func (q *ClientQuota) Outstanding() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.outstanding
}

// OpenCount is the open count as last known (the outstanding gauge).
func (q *ClientQuota) OpenCount() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return float64(q.open)
}
