// Package receiptwire is the delivery receipts API's JSON (docs/receipts.md):
// the bodies the endpoint node's receipts API (apitier/receipts) writes and
// reads, and its clients (tools/cmd/pushsend, the load tester's
// loadtest/receipts) read and write.
//
// It holds types only, so a client links no HTTP server: it must never
// import Hertz, a tier or storage.
package receiptwire
