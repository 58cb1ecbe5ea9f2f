// Package swrvefake is a fake Swrve push API for tests and the load
// tester: a real HTTP/1.1 server on 127.0.0.1 that takes POST /push with
// push_key, user and message (form body or query, as Swrve does), answers
// Swrve's JSON {"code", "message"}, and records every request it received.
// Faults are injected per request: any status (429 with or without
// Retry-After, 5xx, 4xx), a delay (slowness, or longer than the client's
// timeout), a connection reset, and an answer latency drawn from a
// distribution (MeasuredLatency: Swrve's measured answer times, p50
// about 1 s, p99 about 6 s).
//
// It is a test helper: only tests and the load tester import it, never a
// service binary (stack/deps_test.go). It listens only on loopback.
package swrvefake
