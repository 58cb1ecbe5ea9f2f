// Package engine is the connection node (autoconnect): gnet event loops
// holding the user agents' websockets, the Mozilla push protocol, and the
// internal node API the endpoint tier delivers through.
//
// It must never import apitier; what both tiers share lives in
// internal/webpush.
package engine
