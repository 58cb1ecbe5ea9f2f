// Package protocol is Mozilla's push websocket protocol as a connection
// node speaks it, and the notification the API tier hands the engine over
// the internal node API (whose body codec is internal/nodeapi's): client
// messages decoded without allocating (DecodeClient into a ClientMessage,
// with internal/jsonscan's scanner), server messages appended to a
// caller's buffer (Append*), the UAID and channel ID forms, the limits a
// client message must keep and the ack and nack codes.
//
// It only turns bytes into values and back: it must never do I/O (no
// sockets, files, clocks or logs) and never import the tiers (engine/,
// apitier/) or storage.
package protocol
