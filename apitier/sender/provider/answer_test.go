package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
