package storage

import "errors"

// The kinds of failure every backend reports, wrapped with context. The
// tiers map them to HTTP statuses and errnos; they never look at backend
// errors directly.
var (
	// ErrNotFound: the user (or another named thing) does not exist.
	ErrNotFound = errors.New("storage: not found")
	// ErrConflict: a newer write already holds the record.
	ErrConflict = errors.New("storage: conflict")
	// ErrUnavailable: the backend cannot serve now (down, overloaded,
	// timed out, closed). Retrying later may succeed.
	ErrUnavailable = errors.New("storage: unavailable")
	// ErrInvalid: the caller passed input the contract rejects; nothing
	// was written.
	ErrInvalid = errors.New("storage: invalid input")
)
