// Command devserver runs the whole push service in one process over the
// embedded store, for a laptop: the websocket listener (Firefox connects
// here, :8080), the internal node API (:8081) and the WebPush HTTP API
// (:8082). A dev CRYPTO_KEY is generated on first start and kept in the
// data directory, so endpoints stay valid across restarts.
//
//	make run            # or: go run ./tools/cmd/devserver -data-dir ./data
//
// Then point Firefox at it (about:config):
//
//	dom.push.serverURL = ws://127.0.0.1:8080/
//	dom.push.testing.allowInsecureServerURL = true
//
// It must stay a small main over package stack.
package main
