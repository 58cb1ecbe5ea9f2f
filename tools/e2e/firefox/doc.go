// Package firefox is the end-to-end run with a real Firefox: it starts the
// server, launches firefox-esr headless with a fresh profile pointed
// at it, has a test page's service worker subscribe, and sends pushes with
// the npm web-push package and webpush-go. `make e2e` runs it; plain
// `go test ./...` skips it, saying so. The package holds tests only, for
// Linux (Debian's firefox-esr, run in its own process group).
package firefox
