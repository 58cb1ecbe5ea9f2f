// Package storagetest is the conformance suite every storage backend runs:
// one set of behaviours, so that the tiers can rely on the contract and not
// on a backend. A backend's test calls Run with a Harness that makes fresh,
// isolated stores.
package storagetest
