// Package node wires a sender node for the binaries: Config, every
// setting of the sender and its providers (swrve-*, fcm-*, apns-*), which
// autoendpoint, autosender and the single-node server embed beside their
// own; the provider set, built from it (providers.go: Swrve always, FCM
// and APNs when their apps are configured), with the Swrve keys' reload;
// the sender over a store, with the mobile bridges over the configured
// apps (Build); and, for autosender, the binary that only sends, its
// configuration and a small operations HTTP server (autosender.go):
// /metrics, /__heartbeat__, /__lbheartbeat__, /__version__.
//
// Only mains and the process compositions (stack) import it. It must
// never serve the push API itself: that is the API tier's (apitier/pushapi,
// mounted by apitier); a sender node only sends. It must never import the
// HTTP tier (apitier) or engine.
package node
