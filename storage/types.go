package storage

import (
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Bounds the contract enforces on every backend. The API tier applies its
// own, stricter limits; these keep a buggy caller from writing rows no
// client could ever read.
const (
	MaxTTL         = 30 * 24 * 60 * 60 // seconds; the reference caps TTL at 30 days
	MaxDataLen     = 16 << 10          // bytes of base64url payload
	MaxTopicLen    = 32                // RFC 8030 §5.4
	MaxVersionLen  = 512               // an encrypted message id is ~200
	MaxHeaders     = 8                 // encoding, encryption, crypto_key, ...
	MaxHeaderBytes = 4 << 10           // all names and values together
	MaxNodeIDLen   = 512               // a node's internal URL
	MaxRouterData  = 4 << 10           // bridge tokens and app ids, all together
	MaxFetchLimit  = 1000              // messages per page
)

// RouterWebPush is the router type of user agents connected over websocket.
const RouterWebPush = "webpush"

// User is the router record of one user agent (UAID).
type User struct {
	UAID uuid.UUID
	// RouterType is "webpush" for websocket clients, or a bridge ("fcm",
	// "apns") for mobile clients.
	RouterType string
	// RouterData holds bridge data (tokens, app ids); empty for webpush.
	RouterData map[string]string
	// NodeID is the internal URL of the connection node holding the
	// client; empty when it is not connected anywhere.
	NodeID string
	// ConnectedAt is when the current connection started, in milliseconds
	// since the Unix epoch. It orders connections: the newest wins.
	ConnectedAt int64
	// LastConnect is when the record was last refreshed by Connect, in
	// milliseconds since the Unix epoch. Records idle longer than the
	// backend's idle period expire.
	LastConnect int64
	// Cursor is the SortKey up to which the client has acked every
	// timestamp message; reads of timestamp messages start after it.
	Cursor uint64
}

// Message is a push stored for a user agent.
type Message struct {
	CHID uuid.UUID
	// Version is the opaque id the client acks and the sender deletes
	// with (the encrypted message id).
	Version string
	// Topic, when set, makes this a topic message: a newer message with the
	// same CHID and Topic replaces it.
	Topic string
	// SortKey is the receipt time in nanoseconds since the Unix epoch,
	// unique per user (see NewSortKey). It orders timestamp messages and
	// versions topic messages.
	SortKey uint64
	// TTL in seconds, counted from SortKey; 1..MaxTTL.
	TTL int64
	// Data is the base64url (unpadded) payload; empty for a push without
	// payload.
	Data string
	// Headers are the encryption headers the client needs to decrypt.
	Headers map[string]string
	// Tracked: the message has a fate record (FateStore, keyed by
	// NewFateID(Version)) that its ack, expiry or removal settles.
	Tracked bool
}

// Key returns the key that deletes exactly this version of m.
func (m *Message) Key() MessageKey {
	return MessageKey{CHID: m.CHID, Topic: m.Topic, SortKey: m.SortKey}
}

// Received is when the message was accepted.
func (m *Message) Received() time.Time { return time.Unix(0, int64(m.SortKey)) }

// Expiry is when the message stops being deliverable.
func (m *Message) Expiry() time.Time {
	return m.Received().Add(time.Duration(m.TTL) * time.Second)
}

// Expired reports whether m is no longer deliverable at now.
func (m *Message) Expired(now time.Time) bool { return !now.Before(m.Expiry()) }

// MessageKey names one stored message: a topic message by (CHID, Topic),
// a timestamp message by (CHID, SortKey).
type MessageKey struct {
	CHID    uuid.UUID
	Topic   string
	SortKey uint64
}

var lastSortKey atomic.Uint64

// NewSortKey returns the current time in nanoseconds since the Unix epoch,
// in a microsecond later than any value it returned before in this process.
// Distinct microseconds matter because CQL write timestamps are
// microseconds (ScyllaDB rejects larger scales by default), and the scylla
// backend orders message versions and the cursor by SortKey/1000. This
// caps one process at a million sort keys a second. Safe for concurrent
// use.
func NewSortKey() uint64 {
	for {
		now := uint64(time.Now().UnixNano())
		last := lastSortKey.Load()
		if now/1000 <= last/1000 {
			now = (last/1000 + 1) * 1000
		}
		if lastSortKey.CompareAndSwap(last, now) {
			return now
		}
	}
}
