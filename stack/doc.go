// Package stack runs the whole push service in one process: a connection
// node (engine) and an endpoint node (apitier, with the outbound sender
// and its workers, as autoendpoint runs them) over one store, wired as a
// deployment wires them: the endpoint URL is known before either tier
// starts (the connection node mints endpoints under it, the endpoint node
// checks VAPID audiences against its origin), both share the CRYPTO_KEY and
// the node secret, and router records name the connection node's internal
// API URL. The single-node server (package stack/single, the binary
// stack/cmd/autopush) runs it for self-hosters and `make run`;
// stack/stacktest runs it in tests.
//
// It sits above both tiers and is the only package that wires them
// (stack/single imports both for their config structs only). It
// must never import a test helper (engine/enginetest, stack/stacktest) nor
// open a store itself: the caller owns the store, so a laptop and a test
// choose their own.
package stack
