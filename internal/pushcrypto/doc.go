// Package pushcrypto is the application server's and the user agent's
// side of Web Push, which the push service itself never runs: message
// encryption and decryption (RFC 8291 over RFC 8188, aes128gcm, and the
// legacy aesgcm draft) and VAPID signing (RFC 8292). The load tester, the
// operator tools and the tests use it to play sender and browser.
//
// A tier (engine/, apitier/) must never import it: the service only
// verifies VAPID (package vapid) and forwards payloads it cannot read.
package pushcrypto
