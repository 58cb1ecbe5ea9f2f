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

// MaxRetryAfter caps the wait a service may ask for: a longer one is
// taken as a day, so a bogus header cannot park a push for years.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header value (RFC 9110 10.2.3):
// delay-seconds or an HTTP date, relative to now. Anything else is no
// wait; the result is within [0, MaxRetryAfter]. Every provider reads
// the header the same way, so it lives here.
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

// TransportMessage is what a send that got no answer records: "timeout",
// "connection closed before an answer", or the error's text.
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
