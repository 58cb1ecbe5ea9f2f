package sender

import (
	"time"
	_ "time/tzdata" // time zones resolve on hosts without a zoneinfo database

	"github.com/autopush-go/autopush/sender/cron"
)

func loadLocation(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(name)
}

// nextAllowed returns the first time at or after t (to the second) that
// expr allows, in loc: cron.ErrNoFireTime when there is none within
// cron.Horizon years, a *cron.Error when expr does not parse.
func nextAllowed(expr string, loc *time.Location, t time.Time) (time.Time, error) {
	s, err := cron.Parse(expr)
	if err != nil {
		return time.Time{}, err
	}
	return s.Next(t, loc)
}
