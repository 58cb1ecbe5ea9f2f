package jsonscan

import (
	"errors"
	"strconv"
)

// The categories the scanner itself reports. Callers add their own (see
// internal/protocol's ErrInvalidField, ErrUnknownType) and report them with
// Fail. The texts reach clients (the websocket close reason, the node API's
// 400 body): they are wire behaviour, "webpush: " prefix included.
var (
	ErrSyntax = errors.New("webpush: malformed JSON")
	ErrLimit  = errors.New("webpush: message exceeds a limit")
)

// MaxDepth bounds nesting of objects and arrays, the top level counting 1.
const MaxDepth = 16

// DecodeError says where and why an input was rejected.
type DecodeError struct {
	Offset int    // byte offset in the input where the problem was found
	Reason string // short human readable detail
	Err    error  // the category: ErrSyntax, ErrLimit or one of the caller's
}

func (e *DecodeError) Error() string {
	return e.Err.Error() + " at offset " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

func (e *DecodeError) Unwrap() error { return e.Err }
