// Package engine is the connection node (autoconnect): gnet event loops
// holding the user agents' websockets, and the internal node API the
// endpoint tier delivers through. The protocol itself is the I/O-free
// session core in engine/session; this package is its glue: it feeds
// gnet's callbacks, node API calls, storage results and timer ticks to
// the sessions and applies their effects (writes, storage jobs on a fixed
// worker pool, closes, the timing wheel).
//
// It must never import apitier, block an event loop, or keep a goroutine,
// timer or buffer per idle connection; what both tiers share lives in
// internal/ (protocol, token, nodeapi, ...). It must never import
// internal/pushcrypto, the sender's and user agent's side (its tests may).
package engine
