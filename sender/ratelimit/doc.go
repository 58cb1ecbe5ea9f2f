// Package ratelimit holds every rate limit of the push path, each type
// named for what it limits (docs/sender.md):
//
//   - ClientQuota: a push API client's POSTs a second and its pushes not
//     yet sent, at the door (apitier/pushapi answers 429 over either);
//   - CallGate: a provider's calls from this node, paced at the node's
//     share of the account's pace, with the sends planned ahead bounded;
//   - NodeShare: the node's share of an account's pace, kept in the
//     store, so that the nodes together never call over the account's
//     rate (docs/sender.md, "One account, several nodes").
//
// The rates are golang.org/x/time/rate limiters. The fair share of a
// provider's queue slots between clients is the queue's (sender's
// queue.go), not a rate.
//
// It must never import the sender, a provider, a tier or a storage
// backend: the sender and the push API both import it. ClientQuotas,
// ClientQuota and CallGate are safe for concurrent use; one goroutine
// drives a NodeShare (Run), and Release may be called beside it.
package ratelimit
