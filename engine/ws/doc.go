// Package ws is the connection node's websocket codec: the HTTP/1.1 upgrade
// handshake and RFC 6455 framing, as pure functions over byte slices.
//
// It does no I/O, starts no goroutine and keeps no timer, so an event-loop
// handler (gnet's OnTraffic) can feed it the bytes it has buffered and append
// what it returns to the connection's outbound buffer. Every parser answers
// "need more" with n == 0 and a nil error and never consumes a partial unit,
// so the caller leaves the bytes where they are and retries when more arrive.
//
// # Server side, and the client role
//
// Frames from the client must be masked and are unmasked in place; frames
// written here are unmasked, as RFC 6455 §5.1 requires of a server. No
// extension is ever negotiated (Firefox offers permessage-deflate; we do not
// accept it), so any RSV bit is a protocol error.
//
// client.go is the other side, for the load tester's user agents and test
// clients: AppendUpgradeRequest and ParseUpgradeResponse, AppendClientFrame
// (masked) and ParseServerFrame (unmasked; it never modifies its input).
// The Assembler serves both roles. The node itself must never use them.
//
// # Lifetimes
//
//   - Upgrade: its strings are copied out of the input (one allocation per
//     handshake) and may be kept.
//   - ParseFrame: the payload aliases the input buffer, already unmasked.
//     It is valid until the caller discards or reuses those bytes. Because
//     unmasking happens in place, a frame's bytes must be consumed exactly
//     once: never parse the same bytes twice.
//   - ParseServerFrame: the payload aliases the input, which it leaves as
//     it is.
//   - Assembler.Feed: a message made of one frame aliases that frame's
//     payload (no copy). A message reassembled from fragments lives in a
//     pooled buffer owned by the Assembler until the next Feed, Release or
//     Reset. Copy anything that must outlive those (e.g. handed to another
//     goroutine).
//
// # Errors
//
// Framing and message errors are *CloseError values carrying the close code
// to send (1002 protocol error, 1007 invalid payload data, 1009 too big)
// before closing the connection. Handshake errors are *UpgradeError values
// carrying the HTTP status to answer. All of them are preallocated package
// variables, so failing costs no allocation and errors.Is works. On the
// client side, a refused upgrade is an *UpgradeError with the status the
// server answered (allocated), other response errors are sentinels.
//
// The gobwas/ws types Header, OpCode and StatusCode are re-exported as
// aliases so callers need not import both packages (both are named ws).
package ws
