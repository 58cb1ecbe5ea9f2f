package scylla

import (
	"errors"

	"github.com/gocql/gocql"
)

// onceRetry is the retry policy of the plain statements that must not run
// twice (marked once: counter increments): they are tried again, on
// another host, only when they certainly did not run. gocql's own policy
// retries a non-idempotent statement after any error the server sent
// back, a write timeout included, and a write timeout says nothing of the
// outcome: an increment that landed would be counted twice.
//
// LWTs keep gocql's policy: a server's timeout of a Paxos round is mostly
// one that did not complete, and running it again is what gets it
// through a replica's loss; a retry of one that did complete finds its own
// write, which casPush reads back at SERIAL (a push's claim reported as a
// conflict lost its new index entry: TestClusterSenderFaults).
type onceRetry struct{ retries int }

func (p onceRetry) Attempt(q gocql.RetryableQuery) bool { return q.Attempts() <= p.retries }

func (p onceRetry) GetRetryType(err error) gocql.RetryType {
	if unsent(err) {
		return gocql.RetryNextHost
	}
	return gocql.Rethrow
}

// unsent reports whether err says that its statement never ran: no
// connection took it, or the coordinator refused it before starting
// (unavailable replicas, overloaded, bootstrapping).
func unsent(err error) bool {
	var qe *gocql.QueryError
	if errors.As(err, &qe) && qe.PotentiallyExecuted() {
		return false
	}
	var unavailable *gocql.RequestErrUnavailable
	if errors.As(err, &unavailable) || errors.Is(err, gocql.ErrHostDown) || errors.Is(err, gocql.ErrNoPool) ||
		errors.Is(err, gocql.ErrNoConnectionsInPool) {
		return true
	}
	var re gocql.RequestError
	return errors.As(err, &re) && (re.Code() == gocql.ErrCodeOverloaded || re.Code() == gocql.ErrCodeBootstrapping)
}
