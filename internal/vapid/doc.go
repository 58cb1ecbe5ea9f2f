// Package vapid is the push service's side of VAPID (RFC 8292): Verifier
// checks the Authorization (and, for the drafts, Crypto-Key) header of a
// push and caches the tokens it accepted; DecodeKey and HashKey read the
// application server's public key that a subscription (register, v2
// endpoints) is bound to. Errors name the rule that failed and answer as
// the reference does (401, errno 109).
//
// It only verifies: it must never hold a private key or sign (the
// application server's side is pushcrypto), and it must not import the
// tiers or token (token imports it for the key hash).
package vapid
