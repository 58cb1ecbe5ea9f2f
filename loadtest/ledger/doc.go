// Package ledger is the load tester's record of every push's fate: what
// the endpoint answered, how often it arrived and where it was acked,
// summed into an Accounting (lost, duplicated after ack, redelivered...).
// It also defines a push's plaintext, which names its ledger entry (run,
// worker, user agent, seq, scheduled time) and pads it with bytes derived
// from that name, so the receiving user agent can check every byte.
//
// One Ledger belongs to one worker process, shared by its application
// server and its user agents' event loops (goroutine-safe). It must never decide a verdict
// (the coordinator does) nor do I/O.
package ledger
