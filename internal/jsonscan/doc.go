// Package jsonscan is a zero-allocation scanner over small JSON objects,
// the kind a connection node reads from every client every few minutes:
// websocket messages (internal/protocol) and the node API's notification
// body (internal/nodeapi).
//
// A Scanner walks one buffer. It unescapes strings in place, so a buffer
// can be scanned only once, and the strings it returns alias the buffer:
// they are valid only while the buffer is. It never allocates on the happy
// path; only an error (a *DecodeError) does. AppendString is its
// counterpart for writing, sharing its fast path for plain bytes.
//
// It knows JSON (RFC 8259: valid UTF-8, no lone surrogates, MaxDepth levels
// of nesting) and nothing of any message schema: which keys exist, which
// are required and what their values mean is the caller's business.
package jsonscan
