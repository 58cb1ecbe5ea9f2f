package cron

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestNext: Quartz's answers, worked out by hand, including the
// expressions go-quartz v0.15.2 recursed on without end or got wrong.
func TestNext(t *testing.T) {
	sthlm := zone(t, "Europe/Stockholm")
	at := func(y int, m time.Month, d, h, min, sec int) time.Time {
		return time.Date(y, m, d, h, min, sec, 0, sthlm)
	}
	for _, c := range []struct {
		expr     string
		from     time.Time
		want     time.Time // zero: ErrNoFireTime
		whyWrong string    // what go-quartz v0.15.2 did
	}{
		{"0 0 0 ? 2 MON#5 2027", at(2026, 11, 27, 0, 0, 0), time.Time{}, "endless recursion, stack overflow"},
		{"0 0 0 ? 2 MON#5", at(2026, 11, 27, 0, 0, 0), at(2044, 2, 29, 0, 0, 0), "endless recursion"},
		{"0 0 0 30 2 ?", at(2026, 11, 27, 0, 0, 0), time.Time{}, "30 February rolled into March"},
		{"0 0 12 30W 2 ?", at(2026, 11, 27, 0, 0, 0), time.Time{}, ""},
		{"0 0 0 30 * ?", at(2026, 2, 1, 0, 0, 0), at(2026, 3, 30, 0, 0, 0), "30 February rolled into 2 March"},
		{"0 0 9 31 * ?", at(2026, 4, 1, 0, 0, 0), at(2026, 5, 31, 9, 0, 0), "31 April rolled into 1 May"},
		{"0 0 0 29 2 ?", at(2026, 3, 1, 0, 0, 0), at(2028, 2, 29, 0, 0, 0), "29 February 2027 rolled into 1 March"},
		{"0 0 0 L-3 * ?", at(2026, 3, 1, 0, 0, 0), at(2026, 3, 28, 0, 0, 0), ""},
		{"0 0 0 L-30 * ?", at(2026, 3, 2, 0, 0, 0), at(2026, 5, 1, 0, 0, 0), ""}, // April has no 30th from the end
		{"0 0 12 LW * ?", at(2026, 3, 31, 11, 59, 59), at(2026, 3, 31, 12, 0, 0), "asked on the day, it skipped to April"},
		{"0 0 12 LW 2 ? 2026", at(2026, 1, 1, 0, 0, 0), at(2026, 2, 27, 12, 0, 0), ""},                // the 28th is a Saturday
		{"0 0 12 1W * ?", at(2026, 8, 1, 0, 0, 0), at(2026, 8, 3, 12, 0, 0), ""},                      // 1 August: a Saturday
		{"0 0 12 31W * ?", at(2026, 5, 1, 0, 0, 0), at(2026, 5, 29, 12, 0, 0), ""},                    // 31 May: a Sunday
		{"0 0 12 15W * ?", at(2026, 3, 16, 11, 59, 59), at(2026, 3, 16, 12, 0, 0), "skipped a month"}, // the 15th: a Sunday
		{"0 15 10 ? * 6#3", at(2026, 3, 1, 0, 0, 0), at(2026, 3, 20, 10, 15, 0), ""},
		{"0 0 0 ? 2 6L 2026", at(2026, 1, 1, 0, 0, 0), at(2026, 2, 27, 0, 0, 0), ""},
		{"0 0 0 ? * L", at(2026, 11, 27, 0, 0, 0), at(2026, 11, 28, 0, 0, 0), ""}, // L alone: Saturday
		{"0 0 22-2 * * ?", at(2026, 11, 27, 3, 0, 0), at(2026, 11, 27, 22, 0, 0), ""},
		{"0 0 22-2 * * ?", at(2026, 11, 27, 23, 0, 1), at(2026, 11, 28, 0, 0, 0), ""},
		{"0 0 9 ? * FRI-MON", at(2026, 11, 24, 10, 0, 0), at(2026, 11, 27, 9, 0, 0), ""}, // a Tuesday
		{"0 0 9 ? * fri-mon", at(2026, 11, 28, 10, 0, 0), at(2026, 11, 29, 9, 0, 0), ""},
		{"0 0/5 14,18 ? * MON-FRI", at(2026, 3, 27, 18, 56, 0), at(2026, 3, 30, 14, 0, 0), ""},
		{"* * * * * ?", at(2026, 3, 27, 12, 0, 0).Add(500 * time.Millisecond), at(2026, 3, 27, 12, 0, 0), ""},
		{"0 0 9 1 1 ? 2000", at(2026, 3, 1, 0, 0, 0), time.Time{}, ""},
		{"0 0 9 1 1 ? 2199", at(2026, 3, 1, 0, 0, 0), time.Time{}, ""}, // beyond the horizon
		{"0 0 9 1 1 ? 2126", at(2026, 3, 1, 0, 0, 0), at(2126, 1, 1, 9, 0, 0), ""},
		// 02:30 does not exist that night: it fires at 03:30, as Quartz.
		{"0 30 2 29 3 ? 2026", at(2026, 3, 29, 0, 0, 0), at(2026, 3, 29, 3, 30, 0), ""},
		{"0 30 2 29 3 ? 2026", at(2026, 3, 29, 3, 10, 0), at(2026, 3, 29, 3, 30, 0), "asked after the gap, it found no time"},
		{"0 30 2 29 3 ? 2026", at(2026, 3, 29, 3, 30, 1), time.Time{}, ""},
		{"0 0 3 29 3 ? 2026", at(2026, 3, 29, 0, 0, 0), at(2026, 3, 29, 3, 0, 0), ""},
		// 02:30 happens twice on 25 October 2026: both fire.
		{"0 30 2 25 10 ?", time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), ""},
		{"0 30 2 25 10 ?", time.Date(2026, 10, 25, 0, 30, 1, 0, time.UTC), time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), ""},
	} {
		s, err := Parse(c.expr)
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		got, err := s.Next(c.from, sthlm)
		if c.want.IsZero() {
			if !errors.Is(err, ErrNoFireTime) {
				t.Errorf("%q from %s: %s, %v; want ErrNoFireTime", c.expr, c.from, got, err)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%q from %s: %s, %v; want %s (go-quartz: %s)", c.expr, c.from, got, err, c.want, c.whyWrong)
		}
	}
}

// TestParseErrors: each malformed expression is refused naming the
// field at fault.
func TestParseErrors(t *testing.T) {
	for expr, field := range map[string]string{
		"* * * * *":               "expression",
		"0 0 0 1 1 ? 2027 x":      "expression",
		"":                        "expression",
		"60 * * * * ?":            "seconds",
		"? * * * * ?":             "seconds",
		"0 */0 * * * ?":           "minutes",
		"0 0 24 * * ?":            "hours",
		"0 0 0 32 * ?":            "day-of-month",
		"0 0 0 0 * ?":             "day-of-month",
		"0 0 0 L-31 * ?":          "day-of-month",
		"0 0 0 LW,1 * ?":          "day-of-month",
		"0 0 0 1,L * ?":           "day-of-month",
		"0 0 0 32W * ?":           "day-of-month",
		"0 0 0 ? 13 *":            "month",
		"0 0 0 ? JANUARY *":       "month",
		"0 0 0 ? * 0":             "day-of-week",
		"0 0 0 ? 2 MON#6":         "day-of-week",
		"0 0 0 ? 2 MON#0":         "day-of-week",
		"0 0 0 ? 2 8L":            "day-of-week",
		"0 0 0 1 * MON":           "day-of-week",
		"0 0 0 ? * * 1969":        "year",
		"0 0 0 ? * * 2200":        "year",
		"0 0 0 ? * * 2027-2026":   "year",
		"0 0 0 ? * * 99999999999": "year",
		"0 0 0 ? * * 2026/0":      "year",
		"0 0 0 ? * * -1":          "year",
		"1-2-3 * * * * ?":         "seconds",
		"0 0 0 ? * MON#5#5":       "day-of-week",
		"0 0 0 ? * MON,":          "day-of-week",
	} {
		_, err := Parse(expr)
		var e *Error
		if !errors.As(err, &e) || e.Field != field {
			t.Errorf("%q: %v; want an error naming %s", expr, err, field)
		}
	}
}

// TestQuartzRefuses: what Quartz's CronExpression refuses is refused,
// naming the field and why: both or neither day field ?, a step */n or
// a/n over the field's largest value, a range of a name and a number;
// and a step after a name, which Quartz ignores. Quartz's largest steps,
// and a range's step up to its field's span, are taken.
func TestQuartzRefuses(t *testing.T) {
	for _, c := range []struct{ expr, field, why string }{
		{"0 0 0 ? * ?", "day-of-week", "day of month is ? too"},
		{"0 0 0 ? * ? 2027", "day-of-week", "day of month is ? too"},
		{"0 0 0 * * *", "day-of-week", "day of month is given too"},
		{"* * * * * *", "day-of-week", "day of month is given too"},
		{"0 0 0 1 * *", "day-of-week", "day of month is given too"},
		{"0 0 0 * * MON", "day-of-week", "day of month is given too"},
		{"0 0 0 L * *", "day-of-week", "day of month is given too"},
		{"0/60 * * * * ?", "seconds", "not 1..59"},
		{"*/60 * * * * ?", "seconds", "not 1..59"},
		{"0 0/60 * * * ?", "minutes", "not 1..59"},
		{"0 5/61 * * * ?", "minutes", "not 1..59"},
		{"0 0 0/24 * * ?", "hours", "not 1..23"},
		{"0 0 */25 * * ?", "hours", "not 1..23"},
		{"0 0 0 1/32 * ?", "day-of-month", "not 1..31"},
		{"0 0 0 ? 1/13 *", "month", "not 1..12"},
		{"0 0 0 ? */13 *", "month", "not 1..12"},
		{"0 0 0 ? * 1/8", "day-of-week", "not 1..7"},
		{"0 0 0 ? * MON/2", "day-of-week", "a step after a name"},
		{"0 0 0 ? * MON-FRI/2", "day-of-week", "a step after a name"},
		{"0 0 0 ? JAN/3 *", "month", "a step after a name"},
		{"0 0 0 ? JAN-3 *", "month", "a name and a number"},
		{"0 0 0 ? 1-MAR *", "month", "a name and a number"},
		{"0 0 0 ? * 2-FRI", "day-of-week", "a name and a number"},
		{"+5 * * * * ?", "seconds", "not a value"},
		{"0 */+5 * * * ?", "minutes", "not 1..59"},
		{"0 0 0 L-+3 * ?", "day-of-month", "L-n"},
		{"0 0 0 +3W * ?", "day-of-month", "nW"},
		{"0 0 0 ? * MON#+2", "day-of-week", "x#n"},
	} {
		_, err := Parse(c.expr)
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field || !strings.Contains(e.Reason, c.why) {
			t.Errorf("%q: %v; want it refused naming %s: %s", c.expr, err, c.field, c.why)
		}
	}
	for _, expr := range []string{
		"0/59 */59 0/23 1/31 1/12 ?", "0 0 */23 ? */12 1/7", "0-59/60 * * * * ?", "0 0 0-23/24 ? * 1-7/7",
		"0 0 0 ? JAN-MAR MON-FRI", "0 0 0 ? * MON/1", "0 0 0 ? * 2-6/2", "0 0 0 L * ?", "0 0 0 ? * *",
		"0 0 0 * * ? 2026/230",
	} {
		if _, err := Parse(expr); err != nil {
			t.Errorf("%q: %v; Quartz takes it", expr, err)
		}
	}
}

// TestNextAgainstBruteForce compares Next with a second-by-second walk
// of the wall clock (oracle) for random expressions and start times in
// three zones, two with daylight saving.
func TestNextAgainstBruteForce(t *testing.T) {
	locs := []*time.Location{time.UTC, zone(t, "Europe/Stockholm"), zone(t, "America/New_York")}
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	compared := 0
	for i := range 3000 {
		expr := randomExpr(rng)
		s, err := Parse(expr)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		loc := locs[i%len(locs)]
		from := base.Add(time.Duration(rng.Int64N(2*365*24*3600)) * time.Second).In(loc)
		if i%4 == 0 { // near a daylight-saving change
			from = []time.Time{time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC),
				time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC)}[i/4%4].
				Add(time.Duration(rng.IntN(4*3600)) * time.Second).In(loc)
		}
		got, err := s.Next(from, loc)
		if err == nil && i%2 == 1 {
			// Start within two hours before the answer, so that the walk
			// reaches it: the rarer days (L, 1#5) are compared too.
			from = got.Add(-time.Duration(rng.IntN(2*3600)) * time.Second)
			got, err = s.Next(from, loc)
		}
		want, found := bruteNext(s, from, loc, 3*time.Hour)
		switch {
		case found && (err != nil || !got.Equal(want)):
			t.Fatalf("%q in %s from %s: %s, %v; the clock says %s", expr, loc, from, got, err, want)
		case !found && err == nil && got.Sub(from) < 3*time.Hour:
			t.Fatalf("%q in %s from %s: %s, but the clock walked 3h past it", expr, loc, from, got)
		case found:
			compared++
		}
	}
	if compared < 1500 {
		t.Fatalf("only %d of 3000 expressions fired within 3 hours: the comparison proves little", compared)
	}
}

// randomExpr is a valid expression with a fire time likely within hours.
func randomExpr(rng *rand.Rand) string {
	pick := func(opts ...string) string { return opts[rng.IntN(len(opts))] }
	sec := pick("*", "0", "*/7", "10-20", "0,30", "58-3")
	min := pick("*", "0", "*/15", "5/20", "59", "50-10/3")
	hour := pick("*", "2", "1-3", "*/2", "22-2", "0,12")
	dom, dow := "?", "?"
	if rng.IntN(2) == 0 {
		dom = pick("*", "1-31", "L", "L-2", "15W", "LW", "1,15", "*/2")
	} else {
		dow = pick("*", "MON-FRI", "SUN", "1,7", "FRI-MON", "6L", "1#5", "2#2", "L")
	}
	month := pick("*", "*", "1-6", "MAR,OCT,NOV", "11-2")
	return strings.Join([]string{sec, min, hour, dom, month, dow}, " ")
}

// bruteNext walks the instants from `from`, one second at a time, for up
// to limit, and returns the first the expression fires at: one whose
// wall clock it allows, or one a daylight-saving change moved a skipped
// allowed wall time to (as much later as the clock jumped).
func bruteNext(s *Schedule, from time.Time, loc *time.Location, limit time.Duration) (time.Time, bool) {
	from = from.Truncate(time.Second)
	for at := from; at.Sub(from) <= limit; at = at.Add(time.Second) {
		if wallAllowed(s, at.In(loc)) {
			return at, true
		}
		_, now := at.In(loc).Zone()
		_, then := at.Add(-time.Hour * 3).In(loc).Zone()
		if jump := time.Duration(now-then) * time.Second; jump > 0 {
			// The wall time this instant would show without the jump; if no
			// instant shows it, it was skipped.
			l := at.In(loc)
			w := time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC).Add(-jump)
			if !shown(w, loc) && wallAllowedFields(s, w) {
				return at, true
			}
		}
	}
	return time.Time{}, false
}

// shown reports whether some instant's wall clock in loc is w (given as
// UTC fields).
func shown(w time.Time, loc *time.Location) bool {
	for off := -14 * time.Hour; off <= 14*time.Hour; off += 15 * time.Minute {
		at := w.Add(-off).In(loc)
		if _, o := at.Zone(); time.Duration(o)*time.Second == off && sameWall(at, w) {
			return true
		}
	}
	return false
}

func wallAllowed(s *Schedule, at time.Time) bool { return wallAllowedFields(s, at) }

func wallAllowedFields(s *Schedule, at time.Time) bool {
	y, m, d := at.Date()
	h, mi, sec := at.Clock()
	return oracleDay(s, y, m, d) && s.hour&(1<<uint(h)) != 0 && s.min&(1<<uint(mi)) != 0 && s.sec&(1<<uint(sec)) != 0
}

// oracleDay is matchesDay worked out another way: by walking the
// calendar rather than by arithmetic on day numbers.
func oracleDay(s *Schedule, y int, m time.Month, d int) bool {
	day := func(n int) time.Time { return time.Date(y, m, n, 12, 0, 0, 0, time.UTC) }
	inMonth := func(n int) bool { return day(n).Month() == m }
	workday := func(n int) bool { w := day(n).Weekday(); return w != time.Saturday && w != time.Sunday }
	if !s.hasYear(y) || s.month&(1<<uint(m)) == 0 {
		return false
	}
	r := s.dom
	switch {
	case r.any:
	case r.last:
		if !inMonth(d+r.offset) || inMonth(d+r.offset+1) {
			return false
		}
	case r.lastWkd:
		if !workday(d) {
			return false
		}
		for n := d + 1; inMonth(n); n++ {
			if workday(n) {
				return false
			}
		}
	case r.near > 0:
		if !inMonth(r.near) || !workday(d) {
			return false
		}
		for n := 1; inMonth(n); n++ { // no workday of the month nearer
			if workday(n) && n != d && abs(n-r.near) <= abs(d-r.near) {
				return false
			}
		}
	default:
		if r.days&(1<<uint(d)) == 0 {
			return false
		}
	}
	w := s.dow
	wd := day(d).Weekday()
	switch {
	case w.any:
		return true
	case w.days&(1<<uint(wd)) == 0:
		return false
	case w.nth > 0:
		seen := 0
		for n := 1; n <= d; n++ {
			if day(n).Weekday() == wd {
				seen++
			}
		}
		return seen == w.nth
	case w.last:
		return !inMonth(d + 7)
	}
	return true
}

func abs(n int) int { return max(n, -n) }

// TestDaysAgainstCalendar: every day of 2026-2029 against the calendar
// walk, for every day rule.
func TestDaysAgainstCalendar(t *testing.T) {
	for _, f := range []string{
		"? * 1#1", "? * 2#5", "? * 7#4", "? * 1L", "? * 4L", "? * L", "? * MON-FRI", "? * FRI-MON", "? * 1,7",
		"L * ?", "L-1 * ?", "L-27 * ?", "L-30 * ?", "LW * ?", "1W * ?", "15W * ?", "30W * ?", "31W * ?", "1-31/3 * ?",
	} {
		s, err := Parse("0 0 0 " + strings.Replace(f, " * ", " 1-12 ", 1))
		if err != nil {
			t.Fatal(f, err)
		}
		hits := 0
		for at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); at.Year() < 2030; at = at.AddDate(0, 0, 1) {
			y, m, d := at.Date()
			if got, want := s.matchesDay(y, m, d), oracleDay(s, y, m, d); got != want {
				t.Fatalf("%q on %s: %v; the calendar says %v", f, at.Format(time.DateOnly), got, want)
			} else if got {
				hits++
			}
		}
		if hits == 0 {
			t.Errorf("%q: no day in four years", f)
		}
	}
}

// TestWhy names the field that leaves no time.
func TestWhy(t *testing.T) {
	from := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for expr, want := range map[string]string{
		"0 0 0 ? 2 MON#5 2027": "day-of-week",
		"0 0 0 31 2 ?":         "day-of-month",
		"0 0 9 1 1 ? 2000":     "years and months",
		"0 0 9 1 1 ? 2026":     "years and months",
		"0 0 9 27 11 ? 2026":   "last time",
	} {
		s, err := Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Next(from.Add(10*time.Hour), time.UTC); !errors.Is(err, ErrNoFireTime) {
			t.Fatalf("%q fires: %v", expr, err)
		}
		if why := s.Why(from.Add(10 * time.Hour)); !strings.Contains(why, want) {
			t.Errorf("%q: %q; want it to name %s", expr, why, want)
		}
	}
}

// FuzzNext: any text either fails to parse with an *Error, or gives a
// schedule whose Next is at or after the time asked (to the second),
// allowed again when asked from itself, never later when asked from
// earlier, and with no fire time the wall clock finds before it in the
// first ten minutes; or ErrNoFireTime with a Why. It never panics or
// hangs: the inputs below are go-quartz's crashers and their family.
func FuzzNext(f *testing.F) {
	for _, e := range []string{
		"0 0 0 ? 2 MON#5 2027", "0 0 0 ? 2 MON#5", "0 0 0 ? 2 TUE#5 2026-2030", "0 0 0 ? 4 SUN#5 2027",
		"0 0 0 L-31 * ?", "0 0 0 L-30 2 ?", "0 0 0 L-28 2 ?", "0 0 0 31W 2 ?", "0 0 0 30W 2 ?", "0 0 0 31W 4,6,9,11 ?",
		"0 0 0 1 1 ? 1970", "0 0 0 ? * * 2025", "0 0 0 31 2 ?", "0 0 0 30 2 ?", "0 0 0 29 2 ? 2027",
		"* * * * * ?", "0 0 9 1 1 ? 2099", "0 0/5 14,18 ? * MON-FRI", "0 15 10 L * ?", "0 15 10 ? * 6#3",
		"0 0 12 1W * ?", "0 0 2 ? * SUN", "0 30 2 27 3 ? 2033", "0 0 0 1 1 ? 2000", "1-5/2 * * * * ?",
		"every day", "", "* * * * *", "0 0 25 * * ?", "0 0 12 ? * L", "0 0 12 LW * ?", "0 0 12 ? JAN,FEB *",
		"0 0 12 ? * 1-7/3", "0 0 22-2 ? * FRI-MON", "59 59 23 L 12 ? 2199",
		"0 0 0 ? * ?", "0 0 0 * * *", "0/60 * * * * ?", "0/59 * * * * ?", "0 0 0/24 * * ?", "0 0 0 1/32 * ?",
		"0 0 0 ? * MON/2", "0 0 0 ? JAN-3 *", "0-59/60 * * * * ?",
	} {
		f.Add(e, int64(0))
	}
	loc := zone(f, "Europe/Stockholm")
	base := time.Date(2026, 3, 29, 0, 59, 58, 0, time.UTC) // just before Stockholm skips an hour
	f.Fuzz(func(t *testing.T, expr string, offset int64) {
		s, err := Parse(expr)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Field == "" {
				t.Fatalf("%q: %v is not a field error", expr, err)
			}
			return
		}
		now := base.Add(time.Duration(offset%(400*24*3600)) * time.Second)
		next, err := s.Next(now, loc)
		if err != nil {
			if !errors.Is(err, ErrNoFireTime) || s.Why(now) == "" {
				t.Fatalf("%q: %v", expr, err)
			}
			return
		}
		if next.Before(now.Truncate(time.Second)) {
			t.Fatalf("%q at %s: next %s is in the past", expr, now, next)
		}
		if again, err := s.Next(next, loc); err != nil || !again.Equal(next) {
			t.Fatalf("%q: next %s, but asked from it: %s, %v", expr, next, again, err)
		}
		if earlier, err := s.Next(now.Add(-time.Hour), loc); err != nil || earlier.After(next) {
			t.Fatalf("%q: from %s %s, but from an hour earlier %v, %v", expr, now, next, earlier, err)
		}
		if b, ok := bruteNext(s, now, loc, 10*time.Minute); ok && !b.Equal(next) {
			t.Fatalf("%q from %s: %s; the clock says %s", expr, now, next, b)
		}
	})
}

func ExampleSchedule_Next() {
	s, _ := Parse("0 0 9 ? * MON#1") // 09:00 on the first Monday of each month
	next, _ := s.Next(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC), time.UTC)
	fmt.Println(next)
	// Output: 2026-12-07 09:00:00 +0000 UTC
}
