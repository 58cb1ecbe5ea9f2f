// Package sendernode wires the outbound sender for the binaries: it builds
// the Swrve provider and its reloadable keys, the sender over a store, and
// (for autosender, the binary that only sends) a small operations HTTP
// server: /metrics, /__heartbeat__, /__lbheartbeat__, /__version__.
//
// Only mains import it. It must never serve the push API itself: that is
// the API tier's (apitier); a sender node only sends.
package sendernode
