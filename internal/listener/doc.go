// Package listener is the TCP listener under the HTTP servers of both
// tiers (the push API on Hertz, the node API on net/http). It caps the
// connections open at once, puts a read deadline on every connection from
// the moment it is accepted (and from the first byte of each later
// request), lets the server switch to a body deadline once a request's
// header is read, bounds each write, and knows which connections are idle
// between requests so that a graceful shutdown can close them at once.
//
// It must never parse HTTP (the servers do; the one hook that looks at
// bytes, Config.Unhandled, is the caller's) nor import a tier.
package listener
