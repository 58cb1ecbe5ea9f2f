package sender

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/sender/provider"
)

// limitsOnly is a provider that is never sent through: validation needs
// only its name and limits.
type limitsOnly struct{}

func (limitsOnly) Name() string { return "p" }
func (limitsOnly) Limits() provider.Limits {
	return provider.Limits{Rate: 300, AverageLatency: 2 * time.Second, Timeout: 30 * time.Second}
}
func (limitsOnly) Send(context.Context, *provider.Notification) provider.Result {
	return provider.Result{Verdict: provider.Broken, Err: errors.New("limitsOnly never sends")}
}

// FuzzCronExpression drives the acceptance path of a push's
// cronExpression (Sender.validate, then the next fire time) in a zone
// with daylight saving: it never panics, a refused expression is a
// FieldError naming cronExpression, and an accepted one has a next time
// at or after now, to the second, that the expression allows again
// (asking from that time gives that time).
func FuzzCronExpression(f *testing.F) {
	for _, e := range []string{
		"* * * * * ?", "0 0 9 1 1 ? 2099", "0 0/5 14,18 ? * MON-FRI", "0 15 10 L * ?", "0 15 10 ? * 6#3",
		"0 0 12 1W * ?", "0 0 2 ? * SUN", "0 30 2 27 3 ? 2033", "0 0 0 29 2 ? *", "0 0 0 31 2 ?",
		"0 0 0 1 1 ? 2000", "1-5/2 * * * * ?", "every day", "", "* * * * *", "0 0 25 * * ?",
		"0 0 12 ? * L", "0 0 12 LW * ?", "0 0 12 ? JAN,FEB *", "0 0 12 ? * 1-7/3",
	} {
		f.Add(e, int64(0))
	}
	s, err := New(Config{Workers: false, QueueCapacity: 1000, RetryDelay: time.Second, MaxAttempts: 3,
		TimeZone: "Europe/Stockholm", Lease: 5 * time.Minute, Interrupted: PolicyResend, Retention: time.Hour,
		StoreTimeout: time.Second, ScheduledInterval: time.Second, ScheduledPortion: 1, PendingInterval: time.Second,
		PendingPortion: 1, Node: "fuzz"}, nil, []provider.Provider{limitsOnly{}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	base := time.Date(2026, 3, 29, 0, 59, 58, 0, time.UTC) // just before Stockholm skips an hour
	f.Fuzz(func(t *testing.T, expr string, offset int64) {
		now := base.Add(time.Duration(offset%(400*24*3600)) * time.Second)
		r := Request{Platform: "IOS", PrototypeKey: "Hello", PushKey: "k", Message: "m", CronExpression: expr}
		next, err := s.validate(&r, now)
		if expr == "" {
			if err != nil || !next.IsZero() {
				t.Fatalf("an immediate push: %v, %v", next, err)
			}
			return
		}
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "cronExpression" || !strings.HasPrefix(fe.Reason, "is not a Quartz cron expression") &&
				!strings.HasPrefix(fe.Reason, "must be at most") {
				t.Fatalf("%q refused with %v", expr, err)
			}
			return
		}
		if next.Before(now.Truncate(time.Second)) {
			t.Fatalf("%q at %s: next %s is in the past", expr, now, next)
		}
		again, err := nextAllowed(expr, s.loc, next)
		if err != nil || !again.Equal(next) {
			t.Fatalf("%q: next %s, but asked from it: %s, %v", expr, next, again, err)
		}
		if later, err := nextAllowed(expr, s.loc, now.Add(time.Hour)); err == nil && later.Before(next) {
			t.Fatalf("%q: from %s %s, but from an hour later %s", expr, now, next, later)
		}
	})
}

// TestNextAllowed: Quartz's answers, worked out by hand, including the
// cases go-quartz v0.15.2 gets wrong on its own (cron.go).
func TestNextAllowed(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Stockholm")
	if err != nil {
		t.Fatal(err)
	}
	at := func(y int, m time.Month, d, h, min, sec int) time.Time {
		return time.Date(y, m, d, h, min, sec, 0, loc)
	}
	for _, c := range []struct {
		expr     string
		from     time.Time
		want     time.Time // zero: never
		whyWrong string
	}{
		{"0 0 0 30 * ?", at(2026, 2, 1, 0, 0, 0), at(2026, 3, 30, 0, 0, 0), "30 February rolled into 2 March"},
		{"0 0 9 31 * ?", at(2026, 4, 1, 0, 0, 0), at(2026, 5, 31, 9, 0, 0), "31 April rolled into 1 May"},
		{"0 0 0 29 2 ?", at(2026, 3, 1, 0, 0, 0), at(2028, 2, 29, 0, 0, 0), "29 February 2027 rolled into 1 March"},
		{"0 0 0 31 2 ?", at(2026, 3, 1, 0, 0, 0), time.Time{}, "31 February rolled into 3 March"},
		{"0 0 12 LW * ?", at(2026, 3, 31, 11, 59, 59), at(2026, 3, 31, 12, 0, 0), "asked on the day, it skipped to April"},
		{"0 0 12 15W * ?", at(2026, 3, 16, 11, 59, 59), at(2026, 3, 16, 12, 0, 0), "asked on the day, it skipped to April"},
		{"0 15 10 ? * 6#3", at(2026, 3, 1, 0, 0, 0), at(2026, 3, 20, 10, 15, 0), ""},
		{"0 30 2 29 3 ? 2026", at(2026, 3, 29, 0, 0, 0), at(2026, 3, 29, 3, 30, 0), ""}, // 02:30 does not exist that night
		{"0 30 2 29 3 ? 2026", at(2026, 3, 29, 3, 10, 0), at(2026, 3, 29, 3, 30, 0), "asked after the gap, it found no time"},
		{"0 0/5 14,18 ? * MON-FRI", at(2026, 3, 27, 18, 56, 0), at(2026, 3, 30, 14, 0, 0), ""},
		{"* * * * * ?", at(2026, 3, 27, 12, 0, 0).Add(500 * time.Millisecond), at(2026, 3, 27, 12, 0, 0), ""},
		{"0 0 9 1 1 ? 2000", at(2026, 3, 1, 0, 0, 0), time.Time{}, ""},
	} {
		got, err := nextAllowed(c.expr, loc, c.from)
		if c.want.IsZero() {
			if !errors.Is(err, errNoFireTime) {
				t.Errorf("%q from %s: %s, %v; want no time", c.expr, c.from, got, err)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%q from %s: %s, %v; want %s (go-quartz alone: %s)", c.expr, c.from, got, err, c.want, c.whyWrong)
		}
	}
}
