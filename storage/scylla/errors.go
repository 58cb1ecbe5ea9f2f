package scylla

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/gocql/gocql"

	"github.com/autopush-go/autopush/storage"
)

// wrap adds context to err and, when err means "the cluster cannot serve
// now", storage.ErrUnavailable. The gocql error stays in the chain (two
// %w), so callers and logs still see what happened.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if unavailable(err) {
		return fmt.Errorf("scylla: %s: %w: %w", op, storage.ErrUnavailable, err)
	}
	return fmt.Errorf("scylla: %s: %w", op, err)
}

// transientErrors are the driver's sentinels for "no node could take the
// request": no pool, no connection, a closed or timed-out connection, a
// closed or not yet ready session.
var transientErrors = []error{
	gocql.ErrNoConnections,
	gocql.ErrNoConnectionsStarted,
	gocql.ErrSessionClosed,
	gocql.ErrSessionNotReady,
	gocql.ErrConnectionClosed,
	gocql.ErrTimeoutNoResponse,
	gocql.ErrNoStreams,
	gocql.ErrHostDown,
	gocql.ErrNoPool,
	gocql.ErrNoConnectionsInPool,
	gocql.ErrNoHosts,
	gocql.ErrHostQueryFailed,
	context.DeadlineExceeded,
	context.Canceled,
	syscall.ECONNREFUSED,
	syscall.ECONNRESET,
	syscall.EPIPE,
}

// unavailable reports whether err means the cluster cannot serve now and a
// retry later may succeed. Everything else (syntax, invalid request,
// unauthorized, a missing table) is a bug or a deployment error, not an
// outage, and is returned as-is.
func unavailable(err error) bool {
	for _, t := range transientErrors {
		if errors.Is(err, t) {
			return true
		}
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true // dial failures, i/o timeouts
	}
	var rateLimited *gocql.RequestErrRateLimitReached
	if errors.As(err, &rateLimited) {
		return true
	}
	// The server's error frames (scylladb/gocql v1.19) carry their code
	// as GetCode: gocql.RequestError's Code() matches none of them.
	var reqErr interface{ GetCode() int }
	if errors.As(err, &reqErr) {
		switch reqErr.GetCode() {
		case gocql.ErrCodeUnavailable, gocql.ErrCodeOverloaded, gocql.ErrCodeBootstrapping,
			gocql.ErrCodeReadTimeout, gocql.ErrCodeWriteTimeout:
			return true
		case gocql.ErrCodeReadFailure, gocql.ErrCodeWriteFailure:
			// A replica failed the request ("received 1 responses and 1
			// failures: UNKNOWN", seen from a node just restarted): a
			// write may have reached some replicas, as with a timeout,
			// and the caller's answer (503, retry later) is the same.
			return true
		}
	}
	return false
}
