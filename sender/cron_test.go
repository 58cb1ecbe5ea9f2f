package sender

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
)

// limitsOnly is a provider that is never sent through: validation needs
// only its name and limits.
type limitsOnly struct{}

func (limitsOnly) Name() string { return "p" }
func (limitsOnly) Limits() provider.Limits {
	return provider.Limits{Rate: 300, Delay: 4 * time.Millisecond, AverageLatency: 2 * time.Second, Timeout: 30 * time.Second}
}
func (limitsOnly) Send(context.Context, *provider.Notification) provider.Result {
	return provider.Result{Verdict: provider.Broken, Err: errors.New("limitsOnly never sends")}
}

// FuzzCronExpression drives the acceptance path of a push's
// cronExpression (Sender.validate, then the next fire time) in a zone
// with daylight saving: it never panics or hangs, a refused expression
// is a FieldError naming cronExpression (the cron field at fault in its
// reason), and an accepted one has a next time at or after now, to the
// second, that the expression allows again (asking from that time gives
// that time). Its seeds hold go-quartz's crashers and their family
// (package cron).
func FuzzCronExpression(f *testing.F) {
	for _, e := range []string{
		"* * * * * ?", "0 0 9 1 1 ? 2099", "0 0/5 14,18 ? * MON-FRI", "0 15 10 L * ?", "0 15 10 ? * 6#3",
		"0 0 12 1W * ?", "0 0 2 ? * SUN", "0 30 2 27 3 ? 2033", "0 0 0 29 2 ? *", "0 0 0 31 2 ?",
		"0 0 0 1 1 ? 2000", "1-5/2 * * * * ?", "every day", "", "* * * * *", "0 0 25 * * ?",
		"0 0 12 ? * L", "0 0 12 LW * ?", "0 0 12 ? JAN,FEB *", "0 0 12 ? * 1-7/3",
		"0 0 0 ? 2 MON#5 2027", "0 0 0 ? 2 MON#5", "0 0 0 L-31 * ?", "0 0 0 L-30 2 ?", "0 0 0 31W 2 ?",
		"0 0 0 30W 4,6,9,11 ?", "0 0 0 1 1 ? 1970", "0 0 0 ? 4 SUN#5 2027",
		"0 0 0 ? * ?", "0 0 0 * * *", "0/60 * * * * ?", "0 0 0/24 * * ?", "0 0 0 ? * MON/2",
	} {
		f.Add(e, int64(0))
	}
	s, err := New(Config{Workers: false, QueueCapacity: 1000, RetryDelay: time.Second, MaxAttempts: 3,
		TimeZone: "Europe/Stockholm", Lease: 5 * time.Minute, Interrupted: PolicyResend, Retention: time.Hour,
		StoreTimeout: time.Second, WindowGrace: 10 * time.Second, ShareHold: 10 * time.Second,
		ScheduledInterval: time.Second, ScheduledPortion: 1, PendingInterval: time.Second,
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
			if !errors.As(err, &fe) || fe.Field != "cronExpression" || !strings.HasPrefix(fe.Reason, "is not a Quartz cron expression: ") &&
				!strings.HasPrefix(fe.Reason, "allows no time in the next 100 years: its ") && !strings.HasPrefix(fe.Reason, "must be at most") {
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
