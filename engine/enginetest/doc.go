// Package enginetest starts connection nodes and drives them with a real
// websocket client over 127.0.0.1, for the engine's tests and for the
// tests of the tiers built on it.
//
// It must never be imported by non-test code, and listens and dials only
// on 127.0.0.1.
package enginetest
