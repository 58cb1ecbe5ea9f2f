// Package engine is the connection node (autoconnect): gnet event loops
// holding the user agents' websockets, the Mozilla push protocol, and the
// internal node API the endpoint tier delivers through.
//
// It must never import apitier; what both tiers share lives in internal/
// (protocol, token, vapid, errno). It must never import
// internal/pushcrypto, the sender's and user agent's side (its tests may).
package engine
