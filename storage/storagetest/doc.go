// Package storagetest is the conformance suite every storage backend runs:
// one set of behaviours, so that the tiers can rely on the contract and not
// on a backend. A backend's test calls Run with a Harness that makes fresh,
// isolated stores.
//
// Size: it is the executable form of the whole storage contract, a test
// per promise of storage.Store, one file per part as in the backends;
// split into packages, every part would repeat the harness and helpers.
package storagetest
