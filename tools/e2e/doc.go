// Package e2e holds the end-to-end harnesses that run the whole service
// against real clients: the interop tests (the npm web-push package and
// webpush-go sending, a Go user agent decrypting) and, later, Firefox.
package e2e
