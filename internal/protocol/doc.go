// Package protocol is Mozilla's push websocket protocol as a connection
// node speaks it, and the notification the API tier hands the engine over
// the internal node API: client messages decoded without allocating, with
// internal/jsonscan's scanner (DecodeClient into a ClientMessage,
// DecodeNotification), server messages appended to a caller's buffer
// (Append*), the UAID and channel ID forms, the limits a client message
// must keep and the ack and nack codes.
//
// It only turns bytes into values and back: it must never do I/O (no
// sockets, files, clocks or logs) and never import the tiers (engine/,
// apitier/) or storage.
package protocol
