// Package apitier is the endpoint node (autoendpoint): the Hertz HTTP API
// application servers push through (RFC 8030 + VAPID), routing each push
// to the connection node holding the user agent or to storage.
//
// It must never import engine; what both tiers share lives in
// internal/webpush.
package apitier
