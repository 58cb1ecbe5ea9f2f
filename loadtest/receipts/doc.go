// Package receipts is the load tester's application server for delivery
// receipts (docs/receipts.md): it creates receipt subscriptions with the
// run's VAPID key, follows them with long-polling GETs and acks while a
// run goes, drains them at the end, reads the milestone counts, and
// compares the receipts with the workers' ledgers (Compare), which know
// which pushes their user agents acked.
//
// Compare and the Account it returns do no I/O; Client does the HTTP. It
// must never decide a run's verdict (the coordinator turns Problems into
// one) nor talk to any address but the endpoint it was given.
package receipts
