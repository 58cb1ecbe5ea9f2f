// Command pushclient mints a key for a client of the push API
// (POST /push and the routes beside it, docs/sender.md "Clients"): a
// random key (32 bytes from crypto/rand, base64url), printed once, and the
// client's entry for push-clients-file, which holds only the key's
// SHA-256. With -key-stdin it makes the entry of a key it reads instead
// (to move a push-api-keys key into the file).
//
// It must never write the key anywhere but its standard output.
package main
