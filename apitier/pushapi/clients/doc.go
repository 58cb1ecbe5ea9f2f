// Package clients is the push API's clients (docs/sender.md, "Clients"):
// each a name, the SHA-256 of its bearer key, scopes (send, read, admin)
// and quotas (rate, outstanding), read from push-clients-file and from the
// push-api-keys of earlier versions (each an admin client, "key-1",
// "key-2", ...); the file is reloaded on SIGHUP and when it changes
// (internal/filewatch). A key is looked up by its hash, compared with
// every client's in constant time; no key is kept, only hashes. Mint
// makes a new key (tools/cmd/pushclient).
//
// It holds data and checks only: it must never import the HTTP tier or
// the sender (apitier/pushapi enforces what a client may do).
package clients
