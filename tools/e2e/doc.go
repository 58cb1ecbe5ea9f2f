// Package e2e holds the end-to-end harnesses that run the whole service
// against real clients: the interop tests (the npm web-push package and
// webpush-go sending, a Go user agent decrypting) and the tiers as
// separate processes. A real Firefox runs in tools/e2e/firefox (make e2e);
// what the harnesses share is in tools/e2e/e2etest.
package e2e
