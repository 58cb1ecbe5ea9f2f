// Package listener is the TCP listener under the HTTP servers of both
// tiers (the push API on Hertz, the node API on net/http). It caps the
// connections open at once, in all and per source address, bounds each
// request from its first byte (from accept for a connection's first) to
// its answer with one read deadline the server cannot extend, bounds each
// write, and knows which connections are idle between requests so that a
// graceful shutdown can close them at once.
//
// It must never parse HTTP (the servers do; the one hook that looks at
// bytes, Config.Unhandled, is the caller's) nor import a tier.
package listener
