package apitier

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/pushheader"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/bridge"
	"github.com/autopush-go/autopush/storage"
)

// Pushes to bridged users (Firefox for Android and iOS, registered through
// the registration API): checked exactly as a websocket user's, then
// handed to the outbound sender, which stores the notification durably
// before the 201 and sends it to FCM or APNs with its retries and rate
// limits. The reference sends inline instead: one slow provider call held
// the application server's request, and a provider error lost the push.

// SetBridges wires the configured bridges: the registration routes' app
// ids and the push route's routing. Without them every app id is unknown
// and a bridged user's push answers 502 errno 900. Call before Start.
func (s *Server) SetBridges(b *bridge.Bridges) {
	s.bridges = b
	s.SetBridgeApps(b)
}

var (
	errBridgeConfig = errno.BridgeConfig.HTTPError("This registration's bridge is not configured on this server")
	errBridgeRecord = errno.InvalidSubscription.HTTPError("Registration without a bridge token")
	errBridgeOff    = errno.RetryBackoff.HTTPError("The bridges' sender is not running on this node")
)

// bridgedPushNS is the namespace of bridged pushes' ids (bridgedPushID).
var bridgedPushNS = uuid.MustParse("5b0c3e4e-8d0f-4a53-9a51-7f3c2f0e6d21")

// bridgedPushID is the sender's id for the bridged push the message id
// m names: a name-based UUID of its uaid, channel and sort key, so that
// DELETE /m/{id} finds the push to withdraw without a lookup table. It
// is as unique as the key of a stored websocket message, which is made
// of the same three.
func bridgedPushID(m *token.MessageID) uuid.UUID {
	var name [40]byte
	copy(name[:16], m.UAID[:])
	copy(name[16:32], m.CHID[:])
	binary.BigEndian.PutUint64(name[32:], m.SortKey)
	return uuid.NewSHA1(bridgedPushNS, name[:])
}

// bridgedRouter routes a bridged user's push: queued to the sender
// (routeBridged), a tracked one with its message id for its fate.
type bridgedRouter struct{ s *Server }

func (r bridgedRouter) route(_, sctx context.Context, p *push) (string, *errno.HTTPError) {
	fate := ""
	if p.n.Tracked {
		fate = p.n.Version
	}
	return outcomeBridged, r.s.routeBridged(sctx, &p.user, &p.mid, &p.h, p.n.Data, fate)
}

// routeBridged queues the notification m names for u, a bridged user,
// through the sender.
//
// fate is the message id of a tracked message (its fate settles with the
// push: bridge.Settled), else "".
func (s *Server) routeBridged(ctx context.Context, u *storage.User, m *token.MessageID, h *pushheader.Headers, body, fate string) *errno.HTTPError {
	if s.pushes == nil {
		return errBridgeOff
	}
	req, err := s.bridges.Request(u, &bridge.Notification{
		CHID: uuid.UUID(m.CHID), TTL: h.TTL, Urgency: h.Urgency, Topic: h.Topic,
		Body: body, Encoding: h.Encoding, Encryption: h.Encryption, CryptoKey: h.CryptoKey,
	})
	switch {
	case errors.Is(err, bridge.ErrTooLarge):
		// err names this node's packages and settings: not for the caller.
		s.log.Debug("bridged push over the provider's limit", "error", err)
		return errBridgeTooLarge
	case errors.Is(err, bridge.ErrBadRecord):
		return errBridgeRecord
	case err != nil:
		return errBridgeConfig
	}
	req.ID = bridgedPushID(m)
	req.Bridge.Fate = fate
	_, err = s.pushes.Accept(ctx, req)
	var fe *sender.FieldError
	switch {
	case errors.As(err, &fe):
		// The request is this tier's own making: a bug, not the caller's.
		s.log.Error("the sender refused a bridged notification", "field", fe.Field, "reason", fe.Reason)
		return errInternal
	case err != nil:
		return s.storageError("queue bridged notification", err)
	}
	return nil
}
