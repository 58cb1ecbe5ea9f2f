// Package stacktest runs the whole service in one test process through
// package stack (a connection node and an endpoint node over one embedded
// store, on loopback, wired as a deployment wires them) and drives it as
// user agents and application servers do: subscribe, push (encrypted and
// VAPID-signed), receive and decrypt. The cross-tier tests (stack), the
// API tier's benchmarks, and the tests of the tools and of the docs use it
// to check what they say against running nodes.
//
// It must never be imported by non-test code.
package stacktest
