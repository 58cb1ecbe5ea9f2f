package apitier

import (
	"net/http"
	"sync/atomic"
	"time"

	hertzproto "github.com/cloudwego/hertz/pkg/protocol"
)

// Hertz stamps every response's Date from a value that a goroutine of its
// own refreshes each second, started with the first response: on a node
// at rest, one of the few wakeups left a second (docs/benchmarks.md). The
// tier claims that start and refreshes the value itself when a request
// starts in a later second than the value's, so the header is as fresh and
// nothing ticks. Every request passes requestStart, Hertz's own error
// answers included.

// dateSecond is the Unix second of the Date being served.
var dateSecond atomic.Int64

// claimServerDate stamps the first Date, in place of Hertz's ticker. If a
// Hertz server in this process answered before, its ticker runs anyway,
// and refreshDate's stores are merely redundant.
func claimServerDate() {
	hertzproto.ServerDateOnce.Do(func() { refreshDate(time.Now()) })
}

// refreshDate makes now the Date served, unless it is already in now's
// second.
func refreshDate(now time.Time) {
	sec, old := now.Unix(), dateSecond.Load()
	if sec == old || !dateSecond.CompareAndSwap(old, sec) {
		return
	}
	hertzproto.ServerDate.Store(now.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat))
}
