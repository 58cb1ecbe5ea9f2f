package apitier

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/routecache"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/nodeapi"
	"github.com/autopush-go/autopush/internal/notification"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// A router delivers an accepted push p to its user agent and names the
// outcome: the websocket router (wsRouter, below) through a connection
// node or storage, the bridged router (bridgedRouter, bridged.go)
// through the sender's queue. ctx is the request's, sctx bounds the
// storage calls.
type router interface {
	route(ctx, sctx context.Context, p *push) (outcome string, e *errno.HTTPError)
}

// routerOf is the router of u's router type: subscription lets through
// only webpush and the bridged types.
func (s *Server) routerOf(u *storage.User) router {
	if u.RouterType == storage.RouterWebPush {
		return wsRouter{s}
	}
	return bridgedRouter{s}
}

// wsRouter routes a websocket (webpush) user's push (Server.route); one
// delivered directly teaches the route cache its channel's route.
type wsRouter struct{ s *Server }

func (r wsRouter) route(ctx, sctx context.Context, p *push) (string, *errno.HTTPError) {
	outcome, e := r.s.route(ctx, sctx, &p.user, &p.n)
	if outcome == outcomeDirect {
		r.s.routes.Learn(p.key, &p.user, p.now)
	}
	return outcome, e
}

// Routing a push (docs/architecture.md, Flows: the reference's "Push
// Characteristics"):
//
//  1. The router record names a node: PUT {node}/push/{uaid}.
//     200: written to the client's socket; done, nothing stored.
//     404, or no answer (refused, reset, timeout): the client is not
//     there. Its node_id is cleared, on condition that connected_at is
//     still the one read (storage.ClearNode), so a client that has
//     reconnected since keeps its new record.
//     503: the client is busy (unacked messages in flight); the node now
//     owes it a storage check.
//  2. TTL 0: nobody took it, so it is dropped, never stored.
//  3. Store it (a topic replaces the stored message with its topic).
//  4. Read the router record again: the client may have connected, or
//     reconnected elsewhere, since step 1 and checked storage before the
//     message was stored. If a node is named now, PUT {node}/notif/{uaid}
//     tells it to check storage; a node that does not answer has its
//     node_id cleared. When this read fails, the check is owed
//     (internal/owedcheck): the read and the notif are tried again every
//     second until storage answers.
//
// Whatever happens after step 3, the message is stored and the
// application server gets 201: the client finds it on its next check or
// connection. A user that vanished between steps 1 and 4 gets 410 errno
// 105, as in the reference.
//
// ctx is the request's, sctx bounds its storage calls.
func (s *Server) route(ctx, sctx context.Context, u *storage.User, n *protocol.Notification) (string, *errno.HTTPError) {
	uaid := u.UAID
	if u.NodeID != "" {
		code, err := s.nodes.Push(ctx, u.NodeID, uaid, n, 0)
		switch {
		case err == nil && code == nodeapi.StatusDelivered:
			return outcomeDirect, nil
		case err != nil || code == nodeapi.StatusNotHere:
			s.clearNode(sctx, u, err)
		case code != nodeapi.StatusBusy:
			s.log.Warn("node refused a push", "node", u.NodeID, "status", code)
		}
	}
	if n.TTL == 0 {
		return outcomeDropped, nil
	}
	if e := s.save(sctx, uaid, n); e != nil {
		return "", e
	}
	switch err := s.tellHolder(ctx, sctx, uaid); {
	case errors.Is(err, storage.ErrNotFound):
		return "", errUserDeleted
	case err != nil:
		// A client that connected since step 1 may have checked storage
		// before the store: without a notif it would not see the message
		// until its next reconnect.
		owed := s.owed.Owe(uaid) // false: too many owed, it waits for the next connection
		s.log.Warn("re-read router record after storing: its node is told once storage answers", "error", err, "owed", owed)
	}
	return outcomeStored, nil
}

// tellHolder reads uaid's router record and tells the node it names to
// check storage; a node that does not answer has its node_id cleared.
func (s *Server) tellHolder(ctx, sctx context.Context, uaid uuid.UUID) error {
	u, err := s.getUser(sctx, uaid)
	if err == nil && u.NodeID != "" {
		if _, nerr := s.nodes.Notif(ctx, u.NodeID, uaid); nerr != nil {
			s.clearNode(sctx, &u, nerr)
		}
	}
	return err
}

// payOwedCheck is a check owed since a push's step 4 failed to read the
// router record (owedcheck.Try); a user dropped since is owed nothing.
func (s *Server) payOwedCheck(ctx context.Context, uaid [16]byte) bool {
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StorageTimeout)
	defer cancel()
	err := s.tellHolder(ctx, sctx, uuid.UUID(uaid))
	return err == nil || errors.Is(err, storage.ErrNotFound)
}

// routeCached pushes n on a cached route (apitier/routecache), naming the
// connection; true when delivered. Anything else forgets the entry, and
// the caller routes n from storage.
func (s *Server) routeCached(ctx context.Context, key routecache.Key, r routecache.Route, uaid uuid.UUID, n *protocol.Notification) bool {
	code, err := s.nodes.Push(ctx, r.Node, uaid, n, r.ConnectedAt)
	if err == nil && code == nodeapi.StatusDelivered {
		s.metrics.routeCache(true)
		return true
	}
	s.metrics.routeCache(false)
	s.routes.Forget(key, r, err == nil && code == nodeapi.StatusStale)
	return false
}

// clearNode clears u's node_id if it still names the connection read.
func (s *Server) clearNode(ctx context.Context, u *storage.User, why error) {
	start := time.Now()
	err := s.store.ClearNode(ctx, u.UAID, u.ConnectedAt)
	s.metrics.storage(start, err)
	if err != nil {
		s.log.Warn("clear node_id", "node", u.NodeID, "error", err)
		return
	}
	s.metrics.nodeCleared.Inc()
	if why != nil {
		s.log.Debug("node unreachable, node_id cleared", "node", u.NodeID, "error", why)
	}
}

// save stores n; storage unavailable is 503 errno 201 (retry later).
func (s *Server) save(ctx context.Context, uaid uuid.UUID, n *protocol.Notification) *errno.HTTPError {
	m := notification.ToMessage(n)
	start := time.Now()
	err := s.store.SaveMessage(ctx, uaid, m)
	s.metrics.storage(start, err)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
		s.log.Warn("storage unavailable: message not saved", "error", err)
		return errStorage
	}
	s.log.Error("save message", "error", err)
	return errInternal
}
