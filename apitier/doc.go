// Package apitier is the endpoint node (autoendpoint): the Hertz HTTP API
// application servers push through (RFC 8030 + VAPID), routing each push
// to the connection node holding the user agent or to storage.
//
// Routes (server.go):
//
//	POST   /wpush/v1/{token}, /wpush/v2/{token}, /wpush/{token} (v1)   wpush.go
//	DELETE /m/{message_id}                                             message.go
//	GET    /__heartbeat__ /__lbheartbeat__ /__version__ /health /status   ops.go
//	GET    /__milestones__ (reference-milestones; 404 when off)           ops.go
//	PUT    /v1/broadcasts/{broadcaster}/{channel}, GET /v1/broadcasts  apitier/megaphone
//	POST, GET /push, GET, DELETE /push/{id} (the outbound sender)     apitier/pushapi
//	/v1/{type}/{app_id}/registration... (bridge registration)          apitier/registration
//	POST /receipts, GET /receipts/{id}, POST /receipts/{id}/ack        apitier/receipts
//	OPTIONS (any path): the CORS preflight                             cors.go
//
// Those four APIs live in packages of their own, built and served by
// this one (apis.go): their handlers answer and read through
// apitier/httpapi's Exchange, counted, logged and guarded alike.
//
// and JSON errors for unknown paths (404 errno 102) and methods (405, with
// Allow). GET /metrics is served apart, on metrics-listen (ops.go), never
// here. The listener (internal/listener, wired in guard.go) bounds every
// connection: one deadline per request from its first byte, a write
// deadline, a connection cap in all and per source address, and the JSON
// answer for what Hertz would refuse in plain text.
// Every error body is errno.HTTPError's {code, errno, error, message,
// more_info} (errors.go), statuses and errnos from the one table in
// internal/errno. The header rules are in apitier/pushheader, the routing to
// connection nodes (direct, stored, dropped; the reconnect races) in
// router.go, metric names in metrics.go, settings and their defaults in
// config.go.
//
// It must never import engine or stack; what both tiers share lives in
// internal/ (protocol, token, vapid, errno, nodeapi), and it must never
// import internal/pushcrypto, the application server's and user agent's
// side (its tests may). It links the outbound sender's core (a bridged
// user's push is handed to it: bridged.go) but no provider client: the
// binaries compose the sender's node (sender/node) beside it
// (stack/deps_test.go). Its end-to-end tests with a connection node live
// in package stack, and its benchmarks behind a whole stack are an
// external test package (bench_test.go) on stack/stacktest. It must never
// answer 201 for a push it has neither handed to a client's node nor
// stored (TTL 0 excepted: dropped when nobody is connected, as the
// reference).
//
// Size: the push path (wpush.go, router.go, bridged.go) with the server,
// its guards and metrics, and config.go, whose documented settings are
// a seventh of it; every API beside the push path lives in a package of
// its own.
package apitier

// Differences from the reference (autopush-rs), each deliberate:
//   - an unparsable TTL is errno 112 (the reference: 111); TTL is capped at
//     30 days (the reference: 60);
//   - aesgcm requires Crypto-Key: dh=; Content-Encoding is compared in any
//     case (the reference: exact); TTL, Topic, Urgency and
//     Content-Encoding sent twice are refused (the reference takes the
//     first); an empty Topic or Urgency is refused;
//   - a body is read whole before anything is looked up: incomplete is
//     400, not in by request-timeout 408, never a storage error;
//   - an invalid Urgency is 400 with errno null;
//   - an undecryptable DELETE /m id is 404 errno 102 (the reference: 400);
//   - a user whose router type is not webpush gets 410 errno 106 and the
//     record is kept (the reference deletes it; bridges come later);
//   - a Topic's '=' padding is stripped (storage accepts base64url only);
//   - Retry-After on 503 is 30 s (the reference: 120);
//   - VAPID is verified before any storage read, so an unauthenticated v2
//     push costs no read;
//   - bridge registration (apitier/registration): the PUT and DELETEs answer
//     {} (the reference: an empty body); a registration reached through
//     another bridge's type is 400 errno 108 (the reference rewrites or
//     serves it); an unknown FCM app id is 400 errno null (the reference:
//     410 errno 106); a bad VAPID key is 400 (the reference: 500); a bad
//     subscription body is 400 (the reference ignores it); bridge tokens
//     are 8 to 256 visible ASCII characters (the reference: 8 or more
//     non-space characters); the type is checked before the secret.
