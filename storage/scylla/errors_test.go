package scylla

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gocql/gocql"

	"github.com/autopush-go/autopush/storage"
)

// TestServerErrorsByCode: the coordinator's "not enough replicas"
// (Unavailable, what a quorum read or write gets with too many nodes down),
// its timeouts and overload are outages (storage.ErrUnavailable: the tiers
// answer 503 with Retry-After); a syntax error or an invalid request is not.
// Measured in the fault scenario before the fix: "Cannot achieve
// consistency level LOCAL_QUORUM" (outage) and a replica's read failure
// just after its restart fell through as internal errors (500).
func TestServerErrorsByCode(t *testing.T) {
	unavail := &gocql.RequestErrUnavailable{Consistency: gocql.LocalQuorum, Required: 2, Alive: 1}
	unavail.Code, unavail.Message = gocql.ErrCodeUnavailable, "Cannot achieve consistency level LOCAL_QUORUM"
	readTimeout := &gocql.RequestErrReadTimeout{}
	readTimeout.Code = gocql.ErrCodeReadTimeout
	writeTimeout := &gocql.RequestErrWriteTimeout{}
	writeTimeout.Code = gocql.ErrCodeWriteTimeout
	readFailure := &gocql.RequestErrReadFailure{}
	readFailure.Code, readFailure.Message = gocql.ErrCodeReadFailure, "Operation failed - received 1 responses and 1 failures: UNKNOWN from /127.0.0.3:58921"
	writeFailure := &gocql.RequestErrWriteFailure{}
	writeFailure.Code = gocql.ErrCodeWriteFailure
	syntax := &gocql.RequestErrUnavailable{}
	syntax.Code, syntax.Message = gocql.ErrCodeSyntax, "line 1: no viable alternative"
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"unavailable", unavail, true},
		{"read timeout", readTimeout, true},
		{"write timeout", writeTimeout, true},
		{"read failure", readFailure, true},
		{"write failure", writeFailure, true},
		{"syntax", syntax, false},
	} {
		err := wrap("op", fmt.Errorf("query: %w", c.err))
		if got := errors.Is(err, storage.ErrUnavailable); got != c.want {
			t.Errorf("%s: errors.Is(%v, ErrUnavailable) = %v, want %v", c.name, err, got, c.want)
		}
	}
}
