package listener

import (
	"log/slog"
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

// counter is the metric LogAcceptErrors moves (a VictoriaMetrics
// counter).
type counter interface {
	Inc()
	Get() uint64
}

// LogAcceptErrors is a Config.OnAcceptError for a server: it counts each
// error in c and logs the first of each minute, with the count, under
// the message prefix+"accept failed ...".
func LogAcceptErrors(log *slog.Logger, prefix string, c counter) func(error) {
	var t Throttle
	return func(err error) {
		c.Inc()
		if t.Allow(time.Minute) {
			log.Error(prefix+"accept failed (file descriptors or kernel memory short): connections wait until it passes",
				"error", err, "accept_errors_total", c.Get())
		}
	}
}
