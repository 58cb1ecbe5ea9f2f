// Package apnsfake is a fake Apple Push Notification service for tests
// and the load tester: HTTP/2 over TLS on 127.0.0.1 with a test CA made
// in memory (CAPEM / WriteCA give it to the client's apns-ca-file). It
// takes POST /3/device/{token} as APNs does, checks the provider token
// (an ES256 JWT whose kid names a key added with AddKey, iss its team,
// iat less than an hour old) or a client certificate issued by
// IssueClientCert, the apns-topic, and APNs's headers; it answers APNs's
// JSON errors and records every request (headers, exact body, JWT, time).
//
// Faults are injected per request: queued answers (status, reason,
// Retry-After), a function of the request, delays (slowness or timeouts),
// stream resets, and gone tokens (410 Unregistered). It counts distinct
// JWTs, the most requests in flight at once and requests per second, so
// load tests can check a sender's rate and concurrency limits.
//
// It is a test helper: only tests and the load tester import it, never a
// service binary (stack/deps_test.go). It listens only on loopback.
package apnsfake
