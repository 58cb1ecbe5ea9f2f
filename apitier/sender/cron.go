package sender

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // time zones resolve on hosts without a zoneinfo database

	"github.com/reugn/go-quartz/quartz"
)

// Cron expressions are Quartz's (the seed's Java service took them so):
// seconds, minutes, hours, day of month, month, day of week and an
// optional year; "?" for "no specific value", ranges, lists, steps, L, W
// and #. Parsing and the fire times are github.com/reugn/go-quartz's.
//
// Not all of them, though: FuzzCronExpression found that its v0.15.2
// gets some days wrong. A day of month past the end of a month rolls into
// the next one ("0 0 0 30 * ?" from 1 February gives 2 March, "31 2"
// gives 3 March), and W and LW skip a month when asked from their own
// day. Its time of day is right, and so is its first day from the end of
// the day before, rolled-over days aside. So nextAllowed asks it only
// that: a day is the expression's when the library, asked from the end of
// the day before, names it, and (for a plain day-of-month field) when that
// field allows the day's number in January 2000, a month of 31 days where
// nothing rolls over. The time within the day comes from the expression's
// time fields alone.

func loadLocation(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(name)
}

// errNoFireTime: the expression never fires again (a past year, or a day
// that never comes, such as 31 February).
var errNoFireTime = errors.New("the expression allows no time in the future")

// maxDaySteps bounds the days nextAllowed looks at: each step moves to
// the next day the library proposes, so only an expression whose days
// never exist ("31 2": each proposal rolls into March) uses them all.
const maxDaySteps = 64

// nextAllowed returns the first time at or after t (to the second) that
// expr allows, in loc.
func nextAllowed(expr string, loc *time.Location, t time.Time) (time.Time, error) {
	fields := strings.Fields(expr)
	if len(fields) < 6 || len(fields) > 7 {
		return time.Time{}, errors.New("want 6 or 7 fields: seconds minutes hours day-of-month month day-of-week [year]")
	}
	full, err := quartz.NewCronTriggerWithLoc(strings.Join(fields, " "), loc)
	if err != nil {
		return time.Time{}, err
	}
	clock, err := quartz.NewCronTriggerWithLoc(strings.Join(fields[:3], " ")+" * * ?", loc)
	if err != nil {
		return time.Time{}, err
	}
	var dom *quartz.CronTrigger // a plain day-of-month field, in January 2000
	if f := strings.ToUpper(fields[3]); f != "?" && f != "*" && !strings.ContainsAny(f, "LW") {
		if dom, err = quartz.NewCronTriggerWithLoc("0 0 0 "+fields[3]+" 1 ? 2000", time.UTC); err != nil {
			return time.Time{}, err
		}
	}
	t = t.In(loc).Truncate(time.Second)
	day := midnight(t)
	for range maxDaySteps {
		first, err := after(full, day.Add(-time.Second))
		if err != nil {
			return time.Time{}, err
		}
		if !sameDate(first, day) {
			day = midnight(first) // the library's next day: checked on the next step
			continue
		}
		if domAllows(dom, day.Day()) {
			at, err := timeOfDay(clock, later(t, day))
			if err != nil {
				return time.Time{}, err
			}
			if sameDate(at, day) {
				return at, nil
			}
		}
		// A rolled-over day, or no time left on it: from the next one.
		day = midnight(day.AddDate(0, 0, 1))
	}
	return time.Time{}, errNoFireTime
}

// domAllows reports whether the plain day-of-month trigger (nil: any day)
// fires on day d of January 2000.
func domAllows(dom *quartz.CronTrigger, d int) bool {
	if dom == nil {
		return true
	}
	jan := time.Date(2000, 1, d, 0, 0, 0, 0, time.UTC)
	at, err := after(dom, jan.Add(-time.Second))
	return err == nil && at.Equal(jan)
}

// timeOfDay is the clock trigger's first time at or after t. A time the
// day's daylight-saving change skips (02:30 in a spring-forward night)
// is moved an hour on by the library, but only when asked from before
// the gap; asking also from an hour earlier keeps that moved time the
// answer from any instant up to it, as it is from before the gap.
func timeOfDay(clock *quartz.CronTrigger, t time.Time) (time.Time, error) {
	at, err := after(clock, t.Add(-time.Second))
	if err != nil {
		return time.Time{}, err
	}
	if moved, err := after(clock, t.Add(-time.Hour-time.Second)); err == nil && !moved.Before(t) && moved.Before(at) {
		return moved, nil
	}
	return at, nil
}

// after is trig's first fire time strictly after t (go-quartz truncates to
// the second).
func after(trig *quartz.CronTrigger, t time.Time) (time.Time, error) {
	ns, err := trig.NextFireTime(t.UnixNano())
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %w", errNoFireTime, err)
	}
	return time.Unix(0, ns).In(t.Location()), nil
}

// midnight is the start of t's date in its location (the first instant of
// the day, which a daylight-saving change may move off 00:00).
func midnight(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, t.Location())
}

func sameDate(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
