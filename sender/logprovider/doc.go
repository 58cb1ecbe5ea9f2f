// Package logprovider is the "log" provider: a provider.Provider that
// records each notification as one JSON line in a file instead of sending
// it, and reports it sent at once. It is a real provider, not a test
// double: the single-node server's development setup (make run) sends
// through it, so that the push API can be tried without a provider
// account, and what a push would have sent can be read in the file
// (docs/sender.md, "The log provider").
//
// It must never import the sender, a tier or storage: it only speaks the
// provider contract. It takes no bridged notification (Limits.Bridge is
// false), and it checks no prototype: every push may be sent.
package logprovider
