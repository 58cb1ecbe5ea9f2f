// Package notification converts a push message between its two forms:
// the notification the protocols carry (protocol.Notification: the node
// API's body, the client's websocket message) and the message storage
// keeps (storage.Message). Both tiers convert through it. It holds no
// HTTP, so the engine's I/O-free session core uses it without linking the
// node API.
package notification
