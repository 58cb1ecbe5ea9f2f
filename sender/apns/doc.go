// Package apns is a provider.Provider for Apple's Push Notification
// service (APNs): the bridge that delivers WebPush notifications to
// Firefox for iOS. One HTTP/2 POST per notification to
// https://api.push.apple.com/3/device/{token} (or the sandbox, or any
// https base URL for tests), authenticated per app either with a provider
// token (an ES256 JWT signed with the team's .p8 key, reused for 50
// minutes) or with a TLS client certificate.
//
// The payload is what Firefox for iOS reads (as autopush-rs sends it): an
// "aps" block with a mutable-content alert whose localisation keys the
// app's notification extension replaces with the decrypted message (or
// derived from the registration's "aps", as autopush-rs derives it), and
// the WebPush fields (chid, body, con, enc, cryptokey, ver) at the top
// level. The collapse id is the Topic, else the push id.
//
// Answers map to verdicts: 200 sent; 410 device gone, and nothing else
// (400 BadDeviceToken, which APNs also answers for a token of its other
// environment, fails and is reported through OnBadDeviceToken); 403
// (provider token or certificate trouble), 429 and 5xx retry (honouring
// Retry-After, refreshing the JWT on ExpiredProviderToken); any other 4xx
// fails; no answer retries.
//
// It must never import the sender, storage or a tier: it only speaks the
// provider contract. It never logs or returns key material.
package apns
