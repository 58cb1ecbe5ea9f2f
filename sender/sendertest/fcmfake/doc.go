// Package fcmfake is a fake Firebase Cloud Messaging for tests and the
// load tester: a real HTTP/1.1 server on 127.0.0.1 speaking FCM's wire
// protocol. It has Google's OAuth2 token endpoint (POST /token, the
// JWT-bearer grant: it checks the RS256 assertion against the service
// account's public key and its iss, aud, scope and exp claims, and issues
// access tokens of a set lifetime) and the HTTP v1 send endpoint (POST
// /v1/projects/{project}/messages:send: it checks the bearer token is one
// it issued for that project and unexpired, and the message's shape).
//
// It records every send it receives (method, path, headers, exact body,
// arrival time) and injects faults per call: a queue of answers (any
// status, body and headers such as Retry-After, and a delay to cause
// timeouts), device-gone tokens (404 UNREGISTERED), and queued token
// endpoint answers. NewAccount makes a test service account (a fresh RSA
// key) whose token_uri is the fake.
//
// It is a test helper: only tests and the load tester import it, never a
// service binary (stack/deps_test.go). It listens only on loopback.
package fcmfake
