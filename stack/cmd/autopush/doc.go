// Command autopush is the single-node server: the connection node and
// the endpoint node in one process over one store (embedded by default:
// one process, one data directory, no other service). It takes every
// setting of both tiers, from flags, AUTOPUSH__NAME variables and an
// optional JSON file (-help lists them; docs/configuration.md explains
// how the tiers' shared settings appear once). SIGTERM or SIGINT drains
// the connection node, stops the API tier and exits 0.
//
// `autopush backup DIR` and `autopush restore [-force] DIR` (backup.go,
// package stack/backup) back the embedded store and its key files up,
// from a running node or a stopped one, and put a backup in place.
//
// It must stay a small main: configuration, the store, single.Run.
package main
