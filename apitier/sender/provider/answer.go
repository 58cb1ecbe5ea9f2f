package provider

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter caps a service's Retry-After: a longer wait is almost
// certainly a misreading, and the push's own expiry bounds it anyway.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header: delay-seconds or an HTTP
// date (RFC 9110 10.2.3), relative to now. Anything else is no wait; the
// wait is within 0..MaxRetryAfter. Shared by the providers so that they
// all read the header the same way.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		d = time.Duration(min(max(secs, 0), int64(MaxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// TransportMessage is the short text a provider records for a send that
// got no answer (Result.Message of a Retry with Status 0).
func TransportMessage(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before an answer"
	}
	return err.Error()
}
