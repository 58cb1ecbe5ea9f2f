// Package agent holds the load tester's virtual user agents: Firefox's side
// of the Mozilla push protocol (websocket upgrade, hello, register,
// notification, ack, pings, close) as state machines driven by a few epoll
// event loops per worker process, never a goroutine each. A user agent
// decrypts every push, checks its whole plaintext, tells the ledger of its
// arrival and acks it.
//
// Sockets are bound to 127.0.0.2-127.0.0.251 before connecting, so the
// ephemeral ports of one destination never run out; the websocket codec is
// engine/ws's client role. A user agent's state, socket and timers are
// touched only by its loop's goroutine; everything else reaches them
// through the loop (Set's methods do).
//
// It must never connect anywhere but the engines it was given, never block
// its loop (no I/O but non-blocking sockets), and never pace itself on the
// server's answers beyond the handshake cap.
package agent
