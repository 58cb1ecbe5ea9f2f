// Package fcm is a provider.Provider for Firebase Cloud Messaging's HTTP
// v1 API, the bridge of Firefox for Android: one POST per notification
// to {fcm-url}/v1/projects/{project}/messages:send with an OAuth2 bearer
// token minted from the app's Google service account (a JWT assertion
// signed with its key, exchanged at the account's token_uri and cached
// until shortly before it expires).
//
// The message is autopush's: {"message":{"android":{"data":{...},
// "ttl":"<secs>s",...},"token":"<registration token>"}}, whose data
// carries the WebPush notification (chid, body, con, enc, cryptokey); a
// priority only when the push had an Urgency (autopush-rs sends none).
// Answers map to verdicts: 200 sent; 404 UNREGISTERED device gone (a 404
// without it fails: it says nothing about the device); 401/403 retry
// after dropping the cached access token; 429 and 5xx retry (honouring
// Retry-After); any other refusal fails.
//
// It must never import the sender, a tier or storage: it only speaks the
// provider contract. It never logs or returns a credential. FCM v1 takes
// no idempotency key, so Limits reports Dedup false.
package fcm
