package scylla

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// GetUser reads the static columns of the user's router partition. A
// partition without router_type (none at all, or only channel rows or a
// cursor left after the record expired) is ErrNotFound. 1 RT. Safe for
// concurrent use.
func (s *Store) GetUser(ctx context.Context, uaid uuid.UUID) (storage.User, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return storage.User{}, fmt.Errorf("scylla: get user: %w", err)
	}
	if err := s.open("get user"); err != nil {
		return storage.User{}, err
	}
	u := storage.User{UAID: uaid}
	var (
		routerType, nodeID       *string
		connectedAt, lastConnect *int64
		cursor                   *int64
	)
	err := s.query(ctx, qGetUser, uuidArg(uaid)).
		Scan(&routerType, &u.RouterData, &nodeID, &connectedAt, &lastConnect, &cursor)
	if errors.Is(err, gocql.ErrNotFound) || err == nil && routerType == nil {
		return storage.User{}, fmt.Errorf("scylla: get user %s: %w", uaid, storage.ErrNotFound)
	}
	if err != nil {
		return storage.User{}, wrap("get user", err)
	}
	fillUser(&u, *routerType, nodeID, connectedAt, lastConnect, cursor)
	return u, nil
}

// fillUser sets u's fields from the router record's static columns as
// read (null: zero).
func fillUser(u *storage.User, routerType string, nodeID *string, connectedAt, lastConnect, cursor *int64) {
	u.RouterType = routerType
	u.NodeID = deref(nodeID)
	u.ConnectedAt = deref(connectedAt)
	u.LastConnect = deref(lastConnect)
	u.Cursor = uint64(deref(cursor))
	if u.RouterData == nil {
		u.RouterData = map[string]string{}
	}
}

// Subscription implements storage.Store: the record and the channel's
// row in one read of the user's partition. Without the channel's row the
// read finds nothing (Cassandra returns no statics without the clustering
// row, TestSubscriptionReads), so GetUser then tells a missing channel
// from a missing record: a second read only on the way to a 410.
func (s *Store) Subscription(ctx context.Context, uaid, chid uuid.UUID) (storage.User, bool, error) {
	if err := storage.ValidateChannel(uaid, chid); err != nil {
		return storage.User{}, false, fmt.Errorf("scylla: subscription: %w", err)
	}
	if err := s.open("subscription"); err != nil {
		return storage.User{}, false, err
	}
	u := storage.User{UAID: uaid}
	var (
		routerType, nodeID       *string
		connectedAt, lastConnect *int64
		cursor                   *int64
		got                      *[16]byte
	)
	err := s.query(ctx, qSubscription, uuidArg(uaid), uuidArg(chid)).
		Scan(&routerType, &u.RouterData, &nodeID, &connectedAt, &lastConnect, &cursor, &got)
	if errors.Is(err, gocql.ErrNotFound) {
		u, err := s.GetUser(ctx, uaid)
		return u, false, err
	}
	if err != nil {
		return storage.User{}, false, wrap("subscription", err)
	}
	if routerType == nil {
		return storage.User{}, false, fmt.Errorf("scylla: subscription %s: %w", uaid, storage.ErrNotFound)
	}
	fillUser(&u, *routerType, nodeID, connectedAt, lastConnect, cursor)
	return u, got != nil && *got == [16]byte(chid), nil
}

// connState is what Connect reads before writing.
type connState struct {
	connectedAt       int64  // 0 when there is no record
	channelsRefreshed *int64 // ms; nil: never (or expired)
	cursor            *int64 // nil: no cursor
	cursorWritetime   *int64 // write timestamp of cursor (µs)
}

// Connect records the connection u in 2 RT: it reads the stored record
// (connected_at, refresh time, cursor), refuses a connection older than the
// stored one with ErrConflict, then writes the connection cells
// (router_type, router_data, node_id, connected_at, last_connect) with
// write timestamp ConnectedAt*1000 and TTL IdleTTL. The cursor is not
// written, so it is kept.
//
// Concurrency: the read-then-write is not atomic, and need not be. Every
// connection cell carries its connection's own timestamp, so if a newer
// connection's write lands between this read and this write, Cassandra
// still keeps the newer cells whatever the arrival order; this call then
// returns nil although it lost, which the contract allows ("a newer
// connection racing this call may win silently").
//
// Once per RefreshInterval it also rewrites the user's channel rows and
// cursor to push back their expiry (refreshChannels, 2 more RT for up to
// refreshPageSize channels).
func (s *Store) Connect(ctx context.Context, u storage.User) error {
	if err := storage.ValidateUser(&u); err != nil {
		return fmt.Errorf("scylla: connect: %w", err)
	}
	if err := s.open("connect"); err != nil {
		return err
	}
	now := time.Now()
	st, err := s.connState(ctx, u.UAID)
	if err != nil {
		return wrap("connect: read record", err)
	}
	return s.connectOver(ctx, "connect", u, st, now)
}

// connectOver is Connect's work after its read: refuse a connection
// older than the stored one (st), write u's cells, refresh the channels
// when due. op names the caller in errors.
func (s *Store) connectOver(ctx context.Context, op string, u storage.User, st connState, now time.Time) error {
	if st.connectedAt > u.ConnectedAt {
		return fmt.Errorf("scylla: %s: stored connection of %d is newer than %d: %w",
			op, st.connectedAt, u.ConnectedAt, storage.ErrConflict)
	}
	if err := s.writeConnection(ctx, &u, now); err != nil {
		return wrap(op+": write record", err)
	}
	if s.refreshDue(st, now) {
		if err := s.refreshChannels(ctx, u.UAID, st, now); err != nil {
			return wrap(op+": refresh channels", err)
		}
	}
	return nil
}

// Reconnect implements storage.Store: GetUser's and Connect's reads as
// one, then Connect's write (and refresh when due).
func (s *Store) Reconnect(ctx context.Context, u storage.User) (storage.User, error) {
	if err := storage.ValidateUser(&u); err != nil {
		return storage.User{}, fmt.Errorf("scylla: reconnect: %w", err)
	}
	if err := s.open("reconnect"); err != nil {
		return storage.User{}, err
	}
	now := time.Now()
	prev := storage.User{UAID: u.UAID}
	var (
		routerType, nodeID       *string
		connectedAt, lastConnect *int64
		st                       connState
	)
	err := s.query(ctx, qReconnectState, uuidArg(u.UAID)).Scan(&routerType, &prev.RouterData, &nodeID, &connectedAt,
		&lastConnect, &st.cursor, &st.channelsRefreshed, &st.cursorWritetime)
	if errors.Is(err, gocql.ErrNotFound) || err == nil && (routerType == nil || *routerType != u.RouterType) {
		return storage.User{}, fmt.Errorf("scylla: reconnect %s: %w", u.UAID, storage.ErrNotFound)
	}
	if err != nil {
		return storage.User{}, wrap("reconnect: read record", err)
	}
	fillUser(&prev, *routerType, nodeID, connectedAt, lastConnect, st.cursor)
	st.connectedAt = prev.ConnectedAt
	return prev, s.connectOver(ctx, "reconnect", u, st, now)
}

// ConnectNew implements storage.Store: Connect's write with the refresh
// mark and the first channel's row, nothing read: one single-partition
// batch, applied as one mutation. 1 RT.
func (s *Store) ConnectNew(ctx context.Context, u storage.User, chid uuid.UUID) error {
	if err := storage.ValidateUser(&u); err != nil {
		return fmt.Errorf("scylla: connect new: %w", err)
	}
	if err := storage.ValidateChannel(u.UAID, chid); err != nil {
		return fmt.Errorf("scylla: connect new: %w", err)
	}
	if err := s.open("connect new"); err != nil {
		return err
	}
	now := time.Now()
	lastConnect := u.LastConnect
	if lastConnect == 0 {
		lastConnect = now.UnixMilli()
	}
	b := s.batch(ctx, classRouterWrite)
	b.Query(qConnectNew.cql, connTimestamp(u.ConnectedAt), s.idleTTL,
		u.RouterType, nonNil(u.RouterData), u.NodeID, u.ConnectedAt, lastConnect, now.UnixMilli(), uuidArg(u.UAID))
	b.Query(qAddChannel.cql, uuidArg(u.UAID), uuidArg(chid), s.channelTTL)
	return wrap("connect new", b.Exec())
}

// writeConnection writes the connection cells of u at write timestamp
// u.ConnectedAt*1000 with TTL IdleTTL. LastConnect 0 means now.
func (s *Store) writeConnection(ctx context.Context, u *storage.User, now time.Time) error {
	lastConnect := u.LastConnect
	if lastConnect == 0 {
		lastConnect = now.UnixMilli()
	}
	// router_data is a frozen map bound never nil: one live cell that
	// replaces the previous value, where a null would write a tombstone on
	// every connect. An empty node_id is likewise "", not a tombstone.
	return s.query(ctx, qConnect, connTimestamp(u.ConnectedAt), s.idleTTL,
		u.RouterType, nonNil(u.RouterData), u.NodeID, u.ConnectedAt, lastConnect, uuidArg(u.UAID)).Exec()
}

// connState reads what Connect needs. A missing partition is the zero
// state.
func (s *Store) connState(ctx context.Context, uaid uuid.UUID) (connState, error) {
	var st connState
	var connectedAt *int64
	err := s.query(ctx, qConnectState, uuidArg(uaid)).
		Scan(&connectedAt, &st.channelsRefreshed, &st.cursor, &st.cursorWritetime)
	if errors.Is(err, gocql.ErrNotFound) {
		return connState{}, nil
	}
	st.connectedAt = deref(connectedAt)
	return st, err
}

// refreshDue reports whether the channel rows were last refreshed more than
// RefreshInterval ago (or never, or that mark expired with the record).
func (s *Store) refreshDue(st connState, now time.Time) bool {
	return st.channelsRefreshed == nil || now.UnixMilli()-*st.channelsRefreshed >= s.refreshMS
}

// ClearNode deletes node_id with write timestamp connectedAt*1000: the
// tombstone shadows the node_id written by that connection (a tombstone
// wins a tie with a live cell of equal timestamp) and any older one, never
// the node_id of a newer connection (higher timestamp), whatever order the
// clear and the newer connection's write arrive in. If the clear arrives
// before the write of its own connection, that write is shadowed too: the
// connection already ended. Clearing a missing user writes a lone
// tombstone, harmless. 1 RT. Safe for concurrent use.
//
// Unlike a read-compare-delete, a clear naming a connection newer than the
// stored one also removes the stored, older node_id. That only happens when
// a clear overtakes the write of its own connection, and then the stored
// connection has been superseded anyway.
func (s *Store) ClearNode(ctx context.Context, uaid uuid.UUID, connectedAt int64) error {
	if err := storage.ValidateUAID(uaid); err != nil {
		return fmt.Errorf("scylla: clear node: %w", err)
	}
	if err := s.open("clear node"); err != nil {
		return err
	}
	err := s.query(ctx, qClearNode, connTimestamp(connectedAt), uuidArg(uaid)).Exec()
	return wrap("clear node", err)
}

// DropUser deletes the router partition (record and channels) and the
// message partition. 2 RT, in that order, so that no new delivery is routed
// to the user once the first succeeds; a failure between them leaves
// messages that expire by TTL, and a retry finishes the job.
//
// Both partition tombstones are written at now (µs). A Connect
// whose ConnectedAt is older than the drop is shadowed by it (as if it had
// lost to a newer connection): only connections started after the drop
// re-create the user. Safe for concurrent use.
func (s *Store) DropUser(ctx context.Context, uaid uuid.UUID) error {
	if err := storage.ValidateUAID(uaid); err != nil {
		return fmt.Errorf("scylla: drop user: %w", err)
	}
	if err := s.open("drop user"); err != nil {
		return err
	}
	now := time.Now()
	id := uuidArg(uaid)
	if err := s.query(ctx, qDropRouter, nowMicros(now), id).Exec(); err != nil {
		return wrap("drop user: router", err)
	}
	err := s.query(ctx, qDropMessages, nowMicros(now), id).Exec()
	return wrap("drop user: messages", err)
}

// DropUserAt deletes the router partition and the message partition as
// DropUser does, but with write timestamp connectedAt*1000, the
// timestamp of that connection's cells: the tombstones shadow the record
// of that connection and of older ones, never the cells of a newer
// connection, whatever order the two writes arrive in (as ClearNode).
// Rows written after that instant at the server's clock (a channel
// subscribed since, a message stored since) outlive it until their TTL;
// without its record the partition reads as no user. 2 RT. Safe for
// concurrent use.
func (s *Store) DropUserAt(ctx context.Context, uaid uuid.UUID, connectedAt int64) error {
	if err := storage.ValidateUAID(uaid); err != nil {
		return fmt.Errorf("scylla: drop user at: %w", err)
	}
	if err := s.open("drop user at"); err != nil {
		return err
	}
	ts, id := connTimestamp(connectedAt), uuidArg(uaid)
	if err := s.query(ctx, qDropRouter, ts, id).Exec(); err != nil {
		return wrap("drop user at: router", err)
	}
	err := s.query(ctx, qDropMessages, ts, id).Exec()
	return wrap("drop user at: messages", err)
}

// AdvanceCursor writes cursor = sortKey with write timestamp sortKey/1000
// (see timestamps.go) and TTL IdleTTL+RefreshInterval. A
// larger cursor has a larger timestamp, so under any interleaving of
// concurrent calls the largest value wins and the cursor never moves back;
// an equal value is the same value. No read, 1 RT. Safe for concurrent use.
func (s *Store) AdvanceCursor(ctx context.Context, uaid uuid.UUID, sortKey uint64) error {
	if err := storage.ValidateUAID(uaid); err != nil {
		return fmt.Errorf("scylla: advance cursor: %w", err)
	}
	if !validSortKey(sortKey) {
		return fmt.Errorf("scylla: advance cursor: sort key %d exceeds int64: %w", sortKey, storage.ErrInvalid)
	}
	if err := s.open("advance cursor"); err != nil {
		return err
	}
	err := s.query(ctx, qAdvanceCursor, sortKeyTimestamp(sortKey), s.channelTTL, int64(sortKey), uuidArg(uaid)).Exec()
	return wrap("advance cursor", err)
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// nonNil binds an empty frozen map instead of null (a tombstone).
func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
