package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestTransportMessage(t *testing.T) {
	var timeout net.Error = &net.DNSError{IsTimeout: true}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("send: %w", context.DeadlineExceeded), "timeout"},
		{timeout, "timeout"},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), "connection closed before an answer"},
		{io.EOF, "connection closed before an answer"},
		{errors.New("connection refused"), "connection refused"},
	} {
		if got := TransportMessage(tc.err); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "7": 7 * time.Second, " 120 ": 2 * time.Minute, "-3": 0, "9999999": MaxRetryAfter, "soon": 0,
		"Tue, 24 Nov 2026 12:01:30 GMT": 90 * time.Second, "Mon, 23 Nov 2026 12:00:00 GMT": 0,
	} {
		if got := ParseRetryAfter(v, now); got != want {
			t.Errorf("%q: %s, want %s", v, got, want)
		}
	}
}

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
