// Package bridge is the mobile bridges (FCM for Firefox for Android, APNs
// for Firefox for iOS) as the API tier sees them: which router types and
// app ids are configured, what a registration stores (its router data),
// and what a WebPush notification to a bridged user becomes: the
// outbound sender's request, with the data keys Firefox reads, checked
// against the provider's size limit before anything is queued. It also
// drops a registration whose device the provider says is gone (FCM
// UNREGISTERED, APNs 410 only), and watches APNs BadDeviceToken answers
// for a sandbox/production mix-up, which it reports (a gauge and an
// error log) without dropping anything (mixup.go).
//
// It does no I/O of its own but that drop; the providers (sender/fcm,
// sender/apns) talk to FCM and APNs, the sender queues and
// retries. It must never import apitier (the HTTP tier imports it).
package bridge
