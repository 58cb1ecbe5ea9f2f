// Package session is the connection node's per-connection state machine,
// with no I/O: the Mozilla push protocol from the HTTP upgrade to the
// close, flow control and the stored-message drain.
//
// A transition takes one input (bytes the client sent, a node-API
// delivery, a storage result, a timer tick, the connection closing) and
// appends its effects to a Ctx the event loop owns: bytes to write, storage
// jobs to run, a close, the next deadline. The loop applies them; the
// results of the jobs come back as inputs (Session.Done). So every
// transition can be tested and fuzzed without a socket, a goroutine or a
// clock (Env.Now).
//
// It must never import gnet, open a socket, start a goroutine, call
// storage or block: the event loop it runs on serves thousands of other
// connections. A Session is owned by one event loop and is not safe for
// concurrent use; Env is shared by all sessions of a node.
package session
