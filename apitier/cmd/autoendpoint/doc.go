// Command autoendpoint runs an endpoint node: the HTTP API application
// servers push through (RFC 8030 + VAPID). Settings come from flags,
// AUTOEND__NAME variables (the reference's prefix; AUTOENDPOINT__NAME is
// read too) and an optional JSON file (-help lists them). SIGTERM or
// SIGINT stops it gracefully and exits 0.
//
// It must stay a small main: configuration, New, Start, the signal.
package main
