package cron

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Year bounds: the years an expression may name, and how far ahead Next
// looks (Quartz's own limit is a century ahead).
const (
	MinYear = 1970
	MaxYear = 2199
	// Horizon is how many years past the asked time Next looks before
	// it reports ErrNoFireTime.
	Horizon = 100
)

// ErrNoFireTime: the expression allows no time within Horizon years of
// the time asked from (its years are past, or its days never come, such
// as 31 February or a fifth Monday in February 2027).
var ErrNoFireTime = errors.New("cron: the expression allows no time in the next 100 years")

// Error is an expression that does not parse: Field names the field
// ("seconds", "minutes", "hours", "day-of-month", "month", "day-of-week",
// "year", or "expression" for the whole), Value is its text.
type Error struct {
	Field, Value, Reason string
}

func (e *Error) Error() string {
	if e.Value == "" {
		return e.Field + ": " + e.Reason
	}
	return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Reason)
}

// Schedule is a parsed expression. It is immutable, so safe for
// concurrent use.
type Schedule struct {
	sec, min, hour uint64 // bit i: the value i is allowed
	month          uint16 // bits 1..12
	year           [(MaxYear - MinYear + 64) / 64]uint64
	dom            domRule
	dow            dowRule
}

// domRule is the day-of-month field.
type domRule struct {
	any     bool   // * or ?
	days    uint32 // bits 1..31
	last    bool   // L or L-n: the month's last day minus offset
	offset  int    //
	near    int    // nW: the weekday nearest day near, in its month (0: none)
	lastWkd bool   // LW: the month's last weekday
}

// dowRule is the day-of-week field (weekdays as time.Weekday: Sunday 0).
type dowRule struct {
	any  bool
	days uint8 // bits 0..6
	nth  int   // x#n: the n-th such weekday of the month (one weekday in days)
	last bool  // xL: the last such weekday of the month (one weekday in days)
}

type field struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i ("JAN" for 1)
}

var (
	fSec   = field{name: "seconds", max: 59}
	fMin   = field{name: "minutes", max: 59}
	fHour  = field{name: "hours", max: 23}
	fDom   = field{name: "day-of-month", min: 1, max: 31}
	fMonth = field{name: "month", min: 1, max: 12,
		names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}}
	// Quartz numbers weekdays 1 (Sunday) to 7 (Saturday).
	fDow  = field{name: "day-of-week", min: 1, max: 7, names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}}
	fYear = field{name: "year", min: MinYear, max: MaxYear}
)

// Parse reads a Quartz expression: seconds, minutes, hours, day of month,
// month, day of week and an optional year, separated by spaces. Case does
// not matter. Each field is *, a value, a range a-b (wrapping past the
// field's end, as 22-2 hours; not for years), a step (*/n, a/n, a-b/n)
// or a list of these; months and weekdays also by name (JAN, MON).
// Exactly one of day of month and day of week is ? (no specific value);
// ? is allowed nowhere else. Day of month also takes, alone: L (the last
// day), L-n (n days before it), nW (the weekday nearest day n, within its
// month) and LW (the last weekday). Day of week also takes, alone: L
// (Saturday), xL (the month's last weekday x) and x#n (its n-th weekday
// x, n 1..5).
//
// What Quartz's CronExpression refuses is refused, with a reason: both
// or neither of the day fields ?, a step */n or a/n over the field's
// largest value (0/60 seconds, 0/24 hours, 1/32 days), a range of a name
// and a number (JAN-3), a signed number (+5). So is a step after a name, which Quartz takes
// but ignores (MON/2 is Mondays there), so that no expression means one
// thing here and another there. Some that Quartz takes, this refuses
// too (a step of 0, text after a name, 8 fields): none is refused the
// other way round.
func Parse(expr string) (*Schedule, error) {
	fs := strings.Fields(strings.ToUpper(expr))
	if len(fs) < 6 || len(fs) > 7 {
		return nil, &Error{Field: "expression", Reason: fmt.Sprintf("has %d fields; want 6 or 7: seconds minutes hours day-of-month month day-of-week [year]", len(fs))}
	}
	s := &Schedule{}
	var err error
	var v uint64
	if s.sec, err = fSec.parse(fs[0]); err != nil {
		return nil, err
	}
	if s.min, err = fMin.parse(fs[1]); err != nil {
		return nil, err
	}
	if s.hour, err = fHour.parse(fs[2]); err != nil {
		return nil, err
	}
	if v, err = fMonth.parse(fs[4]); err != nil {
		return nil, err
	}
	s.month = uint16(v)
	if s.dom, err = parseDom(fs[3]); err != nil {
		return nil, err
	}
	if s.dow, err = parseDow(fs[5]); err != nil {
		return nil, err
	}
	switch dom, dow := fs[3] == "?", fs[5] == "?"; {
	case dom && dow:
		return nil, &Error{Field: "day-of-week", Value: fs[5], Reason: "day of month is ? too: exactly one of them is ? (0 0 9 * * ? every day, 0 0 9 ? * MON on Mondays)"}
	case !dom && !dow:
		return nil, &Error{Field: "day-of-week", Value: fs[5], Reason: "day of month is given too: exactly one of them is ? (0 0 9 * * ? every day, 0 0 9 ? * MON on Mondays)"}
	}
	yf := "*"
	if len(fs) == 7 {
		yf = fs[6]
	}
	if err := s.parseYears(yf); err != nil {
		return nil, err
	}
	return s, nil
}

// parse reads a field of values into a bit set (bit v for value v).
func (f field) parse(s string) (uint64, error) {
	var set uint64
	for _, tok := range strings.Split(s, ",") {
		lo, hi, step, err := f.token(s, tok)
		if err != nil {
			return 0, err
		}
		span := f.max - f.min + 1
		for i := 0; lo+i <= hi; i += step {
			set |= 1 << uint((lo+i-f.min)%span+f.min)
		}
	}
	return set, nil
}

// token reads one list entry: its first and last value (last may exceed
// max for a range that wraps: 22-2 is 22..26) and step.
func (f field) token(whole, tok string) (lo, hi, step int, err error) {
	bad := func(reason string) error { return &Error{Field: f.name, Value: whole, Reason: reason} }
	step = 1
	base := tok
	if i := strings.IndexByte(tok, '/'); i >= 0 {
		base = tok[:i]
		most := f.stepMax(base)
		n, err := number(tok[i+1:])
		if err != nil || n < 1 || n > most {
			return 0, 0, 0, bad(fmt.Sprintf("step %q is not 1..%d", tok[i+1:], most))
		}
		step = n
	}
	switch {
	case base == "*":
		return f.min, f.max, step, nil
	case base == "?":
		return 0, 0, 0, bad("? is only for day-of-month or day-of-week")
	case base == "":
		return 0, 0, 0, bad("an empty value")
	}
	a, b, isRange := strings.Cut(base, "-")
	switch {
	case step > 1 && (f.isName(a) || f.isName(b)):
		return 0, 0, 0, bad("a step after a name: Quartz ignores it (MON/2 is every Monday there); write numbers (2/2)")
	case isRange && f.isName(a) != f.isName(b):
		return 0, 0, 0, bad("a range of a name and a number: write both as names or both as numbers")
	}
	if lo, err = f.value(whole, a); err != nil {
		return 0, 0, 0, err
	}
	hi = f.max // a/n runs to the end
	if step == 1 {
		hi = lo
	}
	if isRange {
		if hi, err = f.value(whole, b); err != nil {
			return 0, 0, 0, err
		}
		if hi < lo {
			if f.name == fYear.name {
				return 0, 0, 0, bad("a range of years must not run backwards")
			}
			hi += f.max - f.min + 1 // wraps past the end
		}
	}
	return lo, hi, step, nil
}

// stepMax is the largest step after base: Quartz's for */n and a/n, the
// field's largest value (59 seconds, 23 hours, 31 days); a range's, and a
// year's, the field's span (Quartz sets none, so any step past it would
// give the range's first value alone).
func (f field) stepMax(base string) int {
	if strings.Contains(base, "-") || f.name == fYear.name {
		return f.max - f.min + 1
	}
	return f.max
}

// number reads a decimal number of digits alone: Quartz takes no sign
// (strconv.Atoi takes "+5").
func number(s string) (int, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, strconv.ErrSyntax
	}
	return strconv.Atoi(s)
}

// isName reports whether s is one of the field's names (JAN, MON).
func (f field) isName(s string) bool { return slices.Contains(f.names, s) }

// value reads one number or name of the field.
func (f field) value(whole, s string) (int, error) {
	for i, n := range f.names {
		if s == n {
			return f.min + i, nil
		}
	}
	v, err := number(s)
	if err != nil || len(s) > 4 || v < f.min || v > f.max {
		return 0, &Error{Field: f.name, Value: whole, Reason: fmt.Sprintf("%q is not a value of %d..%d", s, f.min, f.max)}
	}
	return v, nil
}

func parseDom(s string) (domRule, error) {
	bad := func(reason string) (domRule, error) {
		return domRule{}, &Error{Field: fDom.name, Value: s, Reason: reason}
	}
	switch {
	case s == "?" || s == "*":
		return domRule{any: true}, nil
	case s == "L":
		return domRule{last: true}, nil
	case s == "LW":
		return domRule{lastWkd: true}, nil
	case strings.HasPrefix(s, "L-"):
		n, err := number(s[2:])
		if err != nil || n < 0 || n > 30 {
			return bad("L-n wants n of 0..30")
		}
		return domRule{last: true, offset: n}, nil
	case strings.HasSuffix(s, "W"):
		n, err := number(s[:len(s)-1])
		if err != nil || n < 1 || n > 31 {
			return bad("nW wants one day n of 1..31")
		}
		return domRule{near: n}, nil
	case strings.ContainsAny(s, "LW"):
		return bad("L and W stand alone (L, L-n, nW, LW)")
	}
	days, err := fDom.parse(s)
	return domRule{days: uint32(days)}, err
}

func parseDow(s string) (dowRule, error) {
	bad := func(reason string) (dowRule, error) {
		return dowRule{}, &Error{Field: fDow.name, Value: s, Reason: reason}
	}
	one := func(v string) (uint8, error) {
		d, err := fDow.value(s, v)
		return 1 << uint(d-1), err
	}
	switch {
	case s == "?" || s == "*":
		return dowRule{any: true}, nil
	case s == "L":
		return dowRule{days: 1 << time.Saturday}, nil
	case strings.Contains(s, "#"):
		d, n, _ := strings.Cut(s, "#")
		k, err := number(n)
		if err != nil || k < 1 || k > 5 {
			return bad("x#n wants n of 1..5")
		}
		days, err := one(d)
		return dowRule{days: days, nth: k}, err
	case strings.HasSuffix(s, "L"):
		days, err := one(s[:len(s)-1])
		return dowRule{days: days, last: true}, err
	}
	set, err := fDow.parse(s)
	return dowRule{days: uint8(set >> 1)}, err // Quartz's 1..7 to Sunday 0
}

func (s *Schedule) parseYears(f string) error {
	for _, tok := range strings.Split(f, ",") {
		lo, hi, step, err := fYear.token(f, tok)
		if err != nil {
			return err
		}
		for y := lo; y <= hi; y += step {
			i := y - MinYear
			s.year[i/64] |= 1 << uint(i%64)
		}
	}
	return nil
}

func (s *Schedule) hasYear(y int) bool {
	if y < MinYear || y > MaxYear {
		return false
	}
	i := y - MinYear
	return s.year[i/64]&(1<<uint(i%64)) != 0
}

// matchesDay reports whether the date is one of the expression's days.
func (s *Schedule) matchesDay(y int, m time.Month, d int) bool {
	if !s.hasYear(y) || s.month&(1<<uint(m)) == 0 {
		return false
	}
	last := daysIn(y, m)
	wd := time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Weekday()
	r := s.dom
	switch {
	case r.any:
	case r.last:
		if d != last-r.offset {
			return false
		}
	case r.lastWkd:
		if d != nearestWeekday(y, m, last) {
			return false
		}
	case r.near > 0:
		if r.near > last || d != nearestWeekday(y, m, r.near) {
			return false
		}
	default:
		if r.days&(1<<uint(d)) == 0 {
			return false
		}
	}
	w := s.dow
	switch {
	case w.any:
		return true
	case w.days&(1<<uint(wd)) == 0:
		return false
	case w.nth > 0:
		return (d-1)/7+1 == w.nth
	case w.last:
		return d+7 > last
	}
	return true
}

// nearestWeekday is the Monday-to-Friday day nearest day d of the month,
// never in another month: a Saturday gives the Friday before (the Monday
// after on the 1st), a Sunday the Monday after (the Friday before on the
// last day).
func nearestWeekday(y int, m time.Month, d int) int {
	last := daysIn(y, m)
	switch time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Weekday() {
	case time.Saturday:
		if d == 1 {
			return 3
		}
		return d - 1
	case time.Sunday:
		if d == last {
			return d - 2
		}
		return d + 1
	}
	return d
}

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 12, 0, 0, 0, time.UTC).Day()
}

// Next returns the first time at or after t (to the second) that the
// expression allows, in loc, or ErrNoFireTime when there is none within
// Horizon years. Its cost is bounded: a day at a time over at most
// Horizon years, skipping months and years the expression leaves out.
//
// Times are wall-clock times in loc. A time that a daylight-saving change
// skips (02:30 on a spring-forward night) fires as much later as the
// clock jumped (03:30), as Quartz does; a time that a change repeats
// fires at both of its instants.
func (s *Schedule) Next(t time.Time, loc *time.Location) (time.Time, error) {
	t = t.In(loc)
	if t.Nanosecond() != 0 {
		t = t.Truncate(time.Second)
	}
	y, m, d := t.Date()
	end := min(y+Horizon, MaxYear)
	first := true
	for y <= end {
		switch {
		case !s.hasYear(y):
			y, m, d = y+1, time.January, 1
		case s.month&(1<<uint(m)) == 0:
			if m == time.December {
				y, m = y+1, time.January
			} else {
				m++
			}
			d = 1
		default:
			if s.matchesDay(y, m, d) {
				if at, ok := s.timeOn(y, m, d, loc, t, first); ok {
					return at, nil
				}
			}
			if d++; d > daysIn(y, m) {
				d = 1
				if m == time.December {
					y, m = y+1, time.January
				} else {
					m++
				}
			}
		}
		first = false
	}
	return time.Time{}, ErrNoFireTime
}

// dstMargin exceeds any daylight-saving shift (2 h at most anywhere): an
// instant more than this away from a wall time cannot be one of its.
const dstMargin = 3 * time.Hour

// timeOn is the expression's first instant on the date at or after lo
// (only when bounded; else the day's first).
func (s *Schedule) timeOn(y int, m time.Month, d int, loc *time.Location, lo time.Time, bounded bool) (time.Time, bool) {
	midnight := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // the date's wall clock, read as UTC
	from := time.Duration(0)
	if bounded {
		h, mi, sec := lo.Clock()
		from = time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(sec)*time.Second
	} else {
		lo = time.Time{}
	}
	// The offsets in force around the day: one on most days, the one
	// before and the one after a daylight-saving change on the others.
	before := offsetAt(midnight.Add(-dstMargin), loc)
	after := offsetAt(midnight.Add(24*time.Hour+dstMargin), loc)
	if before == after {
		w, ok := s.clockFrom(from)
		if !ok {
			return time.Time{}, false
		}
		return midnight.Add(w - before).In(loc), true
	}
	// A day with a change: wall time and instant are no longer in the
	// same order near it, so every wall time within the margin of the
	// first found is weighed, and the earliest instant wins.
	var best time.Time
	var bestWall time.Duration
	for w, ok := s.clockFrom(max(0, from-dstMargin)); ok; w, ok = s.clockFrom(w + time.Second) {
		if !best.IsZero() && w > bestWall+dstMargin {
			break
		}
		for _, at := range instants(midnight, w, before, after, loc) {
			if !at.Before(lo) && (best.IsZero() || at.Before(best)) {
				best, bestWall = at, w
			}
		}
	}
	return best, !best.IsZero()
}

// instants are the instants whose wall clock is midnight+w in loc: one,
// two where a change repeats it, and where a change skips it the
// instant as much later as the clock jumped.
func instants(midnight time.Time, w, before, after time.Duration, loc *time.Location) []time.Time {
	wall := midnight.Add(w)
	var out []time.Time
	for _, off := range []time.Duration{before, after} {
		at := wall.Add(-off).In(loc)
		if sameWall(at, wall) && (len(out) == 0 || !out[0].Equal(at)) {
			out = append(out, at)
		}
	}
	if len(out) == 0 {
		out = append(out, wall.Add(-before).In(loc))
	}
	return out
}

func sameWall(at, wall time.Time) bool {
	y, m, d := at.Date()
	h, mi, s := at.Clock()
	wy, wm, wd := wall.Date()
	wh, wmi, ws := wall.Clock()
	return y == wy && m == wm && d == wd && h == wh && mi == wmi && s == ws
}

func offsetAt(utc time.Time, loc *time.Location) time.Duration {
	_, off := utc.In(loc).Zone()
	return time.Duration(off) * time.Second
}

// clockFrom is the first time of day at or after from (since midnight)
// that the time fields allow; false when none is left in the day.
func (s *Schedule) clockFrom(from time.Duration) (time.Duration, bool) {
	if from < 0 || from >= 24*time.Hour {
		return 0, false
	}
	secs := int(from / time.Second)
	h, mi, sec := secs/3600, secs/60%60, secs%60
	for ; h < 24; h, mi, sec = h+1, 0, 0 {
		if s.hour&(1<<uint(h)) == 0 {
			continue
		}
		for ; mi < 60; mi, sec = mi+1, 0 {
			if s.min&(1<<uint(mi)) == 0 {
				continue
			}
			if rest := s.sec >> uint(sec); rest != 0 {
				sec += bits.TrailingZeros64(rest)
				return time.Duration(h*3600+mi*60+sec) * time.Second, true
			}
		}
	}
	return 0, false
}

// Why says which field leaves no time within Horizon years of t, for an
// expression whose Next failed: the years and months when all are past,
// else the day field that never falls in them.
func (s *Schedule) Why(t time.Time) string {
	y, m, _ := t.Date()
	months, days := false, false
	for ; y <= min(t.Year()+Horizon, MaxYear) && !days; y, m = y+1, time.January {
		for ; m <= time.December && !days; m++ {
			if !s.hasYear(y) || s.month&(1<<uint(m)) == 0 {
				continue
			}
			months = true
			for d := 1; d <= daysIn(y, m) && !days; d++ {
				days = s.matchesDay(y, m, d)
			}
		}
	}
	switch {
	case !months:
		return fmt.Sprintf("its years and months are all before %s or after %d", t.Format("2006-01"), min(t.Year()+Horizon, MaxYear))
	case !days && !s.dom.any:
		return "its day-of-month never falls in its months and years"
	case !days:
		return "its day-of-week never falls in its months and years"
	}
	return "its last time is before " + t.Format(time.RFC3339)
}
