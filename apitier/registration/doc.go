// Package registration is the bridge registration API (docs/bridges.md,
// docs/openapi.yaml; autopush-rs's routes/registration.rs), for mobile
// user agents whose pushes travel over a bridge (FCM, APNs) rather than a
// websocket:
//
//	POST   /v1/{type}/{app_id}/registration                      new UAID and channel; no auth
//	PUT    /v1/{type}/{app_id}/registration/{uaid}               new bridge token
//	GET    /v1/{type}/{app_id}/registration/{uaid}[/]            its channel ids
//	DELETE /v1/{type}/{app_id}/registration/{uaid}               drop it and its channels
//	POST   /v1/{type}/{app_id}/registration/{uaid}/subscription  new channel
//	DELETE /v1/{type}/{app_id}/registration/{uaid}/subscription/{chid}
//
// {type} is webpush, fcm, gcm (stored as "gcm", routed as FCM) or apns;
// anything else is 400 errno 108. The routes under {uaid} need
// "Authorization: Bearer <secret>", the secret the POST answered
// (internal/bridgeauth; any bridge-auth-keys key verifies); without
// bridge-auth-keys every route answers 401. The checks run in this
// order: the type (else 400 errno 108), a bearer secret is present (401
// errno 109), the uaid parses (410 errno 103), the secret verifies (401
// errno 109), the user exists (410 errno 103); then, unlike the
// reference, the user's router type must be the path's (fcm and gcm
// count as one; else 400 errno 108), so that one bridge's client cannot
// rewrite another's record. The body's token and the app id are checked
// last (400, errno null, as the reference). The reference checks the
// uaid and the secret before the type; a request with one fault gets
// the same answer either way.
//
// Answers: the reference's field names ("uaid", "channelID", "endpoint",
// "secret"; "uaid" and "channelIDs" for the GET; UUIDs dashed). The
// PUT and the DELETEs answer 200 with {} (docs/openapi.yaml; the
// reference sends an empty body).
//
// The node (apitier) serves the routes, reads the bodies and answers the
// errors (apitier/httpapi); the bridges (sender/bridge) say what
// a registration stores. It must never import apitier (the node imports
// it), engine, or a provider's client.
package registration
