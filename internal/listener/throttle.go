package listener

import (
	"sync/atomic"
	"time"
)

// Throttle lets at most one call a period through: the log line of
// something that may happen thousands of times a second (refusals, a
// shortage of file descriptors), so that an operator learns of it at
// once and a flood does not fill the log. The zero value lets the first
// call through. Safe for concurrent use.
type Throttle struct{ next atomic.Int64 } // unix ns

// Allow says whether this call is the period's one.
func (t *Throttle) Allow(period time.Duration) bool {
	now, next := time.Now().UnixNano(), t.next.Load()
	return now >= next && t.next.CompareAndSwap(next, now+int64(period))
}
