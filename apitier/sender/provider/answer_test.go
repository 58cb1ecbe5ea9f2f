package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// FuzzRetryAfter: a wait is never negative nor over MaxRetryAfter, and
// delay-seconds are read exactly.
func FuzzRetryAfter(f *testing.F) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"", "0", "7", " 30 ", "-3", "999999999999999999999", "3.5",
		now.Add(time.Minute).Format(http.TimeFormat), "Mon, 01 Jan 1990 00:00:00 GMT", "later"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d := ParseRetryAfter(v, now)
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("%q: %s", v, d)
		}
		var secs int64
		if _, err := fmt.Sscanf(v, "%d", &secs); err == nil && fmt.Sprint(secs) == v && secs >= 0 && secs <= 86400 && d != time.Duration(secs)*time.Second {
			t.Fatalf("%q: %s", v, d)
		}
	})
}

func TestTransportMessage(t *testing.T) {
	for err, want := range map[error]string{
		context.DeadlineExceeded:                    "timeout",
		fmt.Errorf("post: %w", io.ErrUnexpectedEOF): "connection closed before an answer",
		errors.New("connection refused"):            "connection refused",
	} {
		if got := TransportMessage(err); got != want {
			t.Errorf("%v: %q, want %q", err, got, want)
		}
	}
}
