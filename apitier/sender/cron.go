package sender

import (
	"errors"
	"fmt"
	"time"
	_ "time/tzdata" // time zones resolve on hosts without a zoneinfo database

	"github.com/reugn/go-quartz/quartz"
)

// Cron expressions are Quartz's (the seed's Java service took them so):
// seconds, minutes, hours, day of month, month, day of week and an
// optional year; "?" for "no specific value", ranges, lists, steps, L, W
// and #. Parsing and the next fire time are github.com/reugn/go-quartz's.

func loadLocation(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(name)
}

// errNoFireTime: the expression never fires again (a past year).
var errNoFireTime = errors.New("the expression allows no time in the future")

// nextAllowed returns the first time at or after t (to the second) that
// expr allows, in loc.
func nextAllowed(expr string, loc *time.Location, t time.Time) (time.Time, error) {
	trig, err := quartz.NewCronTriggerWithLoc(expr, loc)
	if err != nil {
		return time.Time{}, err
	}
	// NextFireTime returns the first fire time strictly after its
	// argument, truncated to the second.
	ns, err := trig.NextFireTime(t.Truncate(time.Second).Add(-time.Second).UnixNano())
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %w", errNoFireTime, err)
	}
	next := time.Unix(0, ns)
	if next.Before(t) {
		next = t
	}
	return next, nil
}
