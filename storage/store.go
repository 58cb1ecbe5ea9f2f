package storage

import (
	"context"

	"github.com/google/uuid"
)

// Store is everything the tiers persist. Every method is safe for concurrent
// use by many goroutines. Each comment states the cost in round trips to the
// backend ("RT"); the embedded backend has no network, so there an RT is a
// local read or a group-committed durable write.
//
// Errors wrap one of ErrNotFound, ErrConflict, ErrUnavailable or ErrInvalid
// (test with errors.Is). Invalid input is rejected before anything is
// written.
type Store interface {
	// GetUser returns the router record of uaid, or ErrNotFound when there
	// is none or it has expired. 1 RT.
	GetUser(ctx context.Context, uaid uuid.UUID) (User, error)

	// Connect records that u.UAID is now connected to u.NodeID since
	// u.ConnectedAt and refreshes the idle expiry of the record and of its
	// channels. The newest ConnectedAt always wins: when the stored record
	// already names a newer connection, nothing changes and ErrConflict is
	// returned (on a distributed backend a newer connection racing this
	// call may win silently, which is the same outcome). The read cursor
	// is kept. 2 RT; once per Config refresh interval a user's channel
	// expiry is also refreshed (2 more RT).
	Connect(ctx context.Context, u User) error
	// Reconnect is GetUser then Connect in one read and one write, for a
	// returning user agent: when uaid has a live record of u.RouterType it
	// records the connection u as Connect does (ErrConflict when the
	// stored connection is newer) and returns the record as it was
	// before; otherwise it writes nothing and returns ErrNotFound (a
	// record of another router type is left alone). 2 RT, plus Connect's
	// channel refresh when due.
	Reconnect(ctx context.Context, u User) (User, error)
	// ConnectNew is Connect for a uaid the caller has just made (random:
	// no record of it can exist), written with its first channel chid in
	// one durable write: a new user agent's first register (the engine's
	// deferred record). Nothing need be read first and there are no
	// channels to refresh. Never pass a uaid that may exist: the backends
	// may skip Connect's comparison. 1 RT.
	ConnectNew(ctx context.Context, u User, chid uuid.UUID) error

	// ClearNode clears the record's node_id only if its ConnectedAt still
	// equals connectedAt, so an older connection (or an endpoint that read
	// an older record) can never clear a newer one. It reports no outcome:
	// callers that need to know re-read the record (and notify the newer
	// node, as autopush does). A missing user is not an error. 1 RT.
	ClearNode(ctx context.Context, uaid uuid.UUID, connectedAt int64) error

	// DropUser removes the router record, the channels and every stored
	// message of uaid. Dropping a missing user is not an error. 2 RT.
	DropUser(ctx context.Context, uaid uuid.UUID) error

	// DropUserAt drops uaid as DropUser does, unless its record is of a
	// connection newer than connectedAt, the ConnectedAt of a record the
	// caller read: a Connect of a newer connection (a bridged device's
	// new token) wins whatever order the two arrive in, where a read,
	// a compare and DropUser could lose it. It reports no outcome (re-read
	// the record to know). Dropping a missing user is not an error.
	// Embedded: one local read and one durable write. Scylla: 2 RT of
	// deletes written at connectedAt's timestamp, so that rows written
	// after it (a channel subscribed since) outlive the record until their
	// TTL; a partition without its record reads as no user.
	DropUserAt(ctx context.Context, uaid uuid.UUID, connectedAt int64) error

	// AddChannel subscribes chid for uaid. Adding twice is not an error.
	// 1 RT.
	AddChannel(ctx context.Context, uaid, chid uuid.UUID) error

	// RemoveChannel unsubscribes chid. Messages already stored for it are
	// left to expire or be acked. Removing a missing channel is not an
	// error. 1 RT.
	RemoveChannel(ctx context.Context, uaid, chid uuid.UUID) error

	// Channels lists the channels of uaid in no particular order; a user
	// without channels yields an empty slice. 1 RT (paged by the driver).
	Channels(ctx context.Context, uaid uuid.UUID) ([]uuid.UUID, error)

	// CountChannels counts the channels of uaid, stopping at limit (> 0):
	// the result is min(channels, limit). A user without channels (or no
	// user) counts 0. It reads at most limit channel keys: 1 RT per 5000
	// of them (driver paging); local keys on the embedded backend.
	CountChannels(ctx context.Context, uaid uuid.UUID, limit int) (int, error)

	// HasChannel reports whether chid is subscribed for uaid. 1 RT.
	HasChannel(ctx context.Context, uaid, chid uuid.UUID) (bool, error)

	// Subscription is GetUser and HasChannel in one read, what a push
	// needs first: the router record of uaid (ErrNotFound when there is
	// none or it has expired) and whether chid is subscribed. 1 RT (2 when
	// the channel is not subscribed, on a backend that must then read the
	// record alone).
	Subscription(ctx context.Context, uaid, chid uuid.UUID) (User, bool, error)

	// SaveMessage stores m for uaid until m.Expiry(). A topic message
	// replaces the stored message with the same channel and topic, unless
	// the stored one is newer (higher SortKey). 1 RT.
	SaveMessage(ctx context.Context, uaid uuid.UUID, m Message) error

	// TopicMessages returns the unexpired topic messages of uaid, at most
	// limit of them. 1 RT.
	TopicMessages(ctx context.Context, uaid uuid.UUID, limit int) ([]Message, error)

	// TimestampMessages returns up to limit unexpired non-topic messages
	// with SortKey > after, in SortKey order. Pass the user's Cursor for
	// the first page and the last SortKey returned for the next. A deleted
	// (acked) message is never returned. 1 RT.
	TimestampMessages(ctx context.Context, uaid uuid.UUID, after uint64, limit int) ([]Message, error)

	// DeleteMessage removes the message k names (the client acked it, or
	// the sender deleted it). For a topic message it removes the stored
	// version only if it is not newer than k.SortKey, so an ack of an old
	// version never deletes its replacement; k.SortKey == 0 removes
	// whatever version is stored. Deleting a missing message is not an
	// error. 1 RT.
	DeleteMessage(ctx context.Context, uaid uuid.UUID, k MessageKey) error

	// AdvanceCursor moves the read cursor of uaid to sortKey. The cursor
	// only moves forward: a smaller value is ignored. 1 RT.
	AdvanceCursor(ctx context.Context, uaid uuid.UUID, sortKey uint64) error

	// Broadcasts (megaphone): the current version of each broadcast id,
	// one table every node reads (ValidateBroadcast states the bounds).

	// PutBroadcast sets the version of broadcast id ("broadcaster/channel"
	// in megaphone's naming), replacing the stored one. 1 RT.
	PutBroadcast(ctx context.Context, id, version string) error

	// Broadcasts returns every stored broadcast id with its version; an
	// empty map when there is none. 1 RT.
	Broadcasts(ctx context.Context) (map[string]string, error)

	// PushStore: the outbound sender's pushes (push.go).
	PushStore

	// FateStore: tracked messages' fates, milestones and receipts
	// (fates.go).
	FateStore

	// Health returns nil when the backend can serve reads and writes, or
	// an error wrapping ErrUnavailable. 1 RT.
	Health(ctx context.Context) error

	// Close releases the backend. Calls after Close fail with
	// ErrUnavailable; closing twice is harmless.
	Close() error
}
