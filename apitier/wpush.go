package apitier

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/pushheader"
	"github.com/autopush-go/autopush/apitier/routecache"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/sender/bridge"
	"github.com/autopush-go/autopush/storage"
)

// handlePush is POST /wpush/{v1|v2}/{token} and /wpush/{token} (v1): an
// application server's push (RFC 8030 §5). The body is read first, whole
// (httpapi.ReadBody), so that nothing is looked up or stored for a body that
// never arrives complete and no storage deadline runs while a client
// sends: a body not in by request-timeout gets 408, an
// incomplete one 400. Then the checks run in this order, so a request
// with several faults gets the reference's answer for the one it cares
// most about:
//
//  1. the token decrypts, and its version matches the path: else 404
//     errno 102;
//  2. VAPID, when an Authorization header is present, and always on a v2
//     endpoint, whose key must be the one the subscription was made
//     with: else 401 errno 109 (the reference checks the signature after
//     the user lookup; doing it first keeps unauthenticated pushes from
//     costing storage reads);
//  3. the router record exists, is a webpush or bridged (fcm, gcm, apns)
//     user and has the channel: else 410 errno 106;
//  4. the body is at most max-data-bytes: else 413 errno 104;
//  5. the headers (apitier/pushheader): else 400.
//
// An accepted push is routed (router.go; a bridged user's is queued to
// the sender, bridged.go) and answered 201 Created with
// Location: {endpoint-url}/m/{message id} and the effective TTL, whether
// it was delivered, stored or (TTL 0, nobody connected) dropped, as the
// reference answers.
func (s *Server) handlePush(ctx context.Context, c *app.RequestContext, st *reqState) {
	version := c.Param("version")
	switch version {
	case "", "v1":
		st.route = routeWPushV1
	case "v2":
		st.route = routeWPushV2
	default:
		st.route = routeWPushBad
	}
	pb := pushBufPool.Get().(*pushBuf)
	defer func() {
		pb.n = protocol.Notification{} // not the payload, until its next push
		pushBufPool.Put(pb)
	}()
	body, bodyErr := st.x.ReadBodyInto(&pb.body, s.cfg.MaxDataBytes, errTooLarge)
	if bodyErr != nil && bodyErr != errTooLarge {
		st.x.Fail(bodyErr)
		return
	}
	ep, err := s.keys.ParseToken(version, c.Param("token"))
	if err != nil {
		var te *token.EndpointError
		if errors.As(err, &te) {
			st.x.Fail(te.HTTPError())
		} else {
			st.x.Fail(errNotFound)
		}
		return
	}
	if e := s.checkVAPID(c, st, &ep); e != nil {
		st.x.Fail(e)
		return
	}
	// One deadline for every storage call of this push (node calls have
	// their own).
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StorageTimeout)
	defer cancel()
	uaid := uuid.UUID(ep.UAID)
	now := time.Now()
	key := routecache.NewKey(ep.UAID, ep.CHID)
	cached, fromCache := s.routes.Get(key, now)
	var user storage.User
	var e *errno.HTTPError
	if !fromCache {
		if user, e = s.subscription(sctx, uaid, ep.CHID); e != nil {
			st.x.Fail(e)
			return
		}
	}
	if bodyErr != nil {
		st.x.Fail(bodyErr)
		return
	}
	h, e := pushheader.Parse(&c.Request.Header, len(body) > 0)
	if e != nil {
		st.x.Fail(e)
		return
	}

	sortKey := storage.NewSortKey()
	mid := token.MessageID{UAID: ep.UAID, CHID: ep.CHID, Topic: h.Topic, SortKey: sortKey}
	msgID, err := s.keys.MakeMessageID(mid)
	if err != nil {
		// The topic was checked with the same rule: cannot happen.
		s.log.Error("make message id", "error", err)
		st.x.Fail(errInternal)
		return
	}
	// n lives in pb: handed to the node by an interface call (the
	// single-node server's local delivery), a local would escape to the
	// heap on every push.
	n := &pb.n
	*n = protocol.Notification{
		ChannelID: string(protocol.AppendChannelID(pb.chid[:0], ep.CHID)),
		Version:   msgID,
		TTL:       h.TTL,
		Topic:     h.Topic,
		Timestamp: now.Unix(),
		SortKey:   sortKey,
		Headers:   h.Append(pb.hdrs[:0]),
	}
	if len(body) > 0 {
		pb.b64 = base64.RawURLEncoding.AppendEncode(pb.b64[:0], body)
		n.Data = string(pb.b64)
	}
	st.encoding, st.dataLen = h.Encoding, len(n.Data)
	if s.tracker.On() {
		if e := s.track(sctx, c, st, uaid, n, now); e != nil {
			st.x.Fail(e)
			return
		}
	}

	var outcome string
	switch {
	case fromCache && s.routeCached(ctx, key, cached, uaid, n):
		outcome = outcomeDirect
	case fromCache:
		// Not delivered on the cached route: route from storage.
		if user, e = s.subscription(sctx, uaid, ep.CHID); e != nil {
			st.x.Fail(e)
			return
		}
	}
	switch {
	case outcome == outcomeDirect:
	case user.RouterType == storage.RouterWebPush:
		outcome, e = s.route(ctx, sctx, &user, n)
		if outcome == outcomeDirect {
			s.routes.Learn(key, &user, now)
		}
	default:
		outcome = outcomeBridged
		fate := ""
		if n.Tracked {
			fate = n.Version
		}
		e = s.routeBridged(sctx, &user, &mid, &h, n.Data, fate)
	}
	if n.Tracked {
		s.tracker.Reached(sctx, uaid, n, fateOf(outcome, e))
	}
	if e != nil {
		st.x.Fail(e)
		return
	}
	if outcome == outcomeStored && n.Topic != "" && s.tracker.On() {
		s.tracker.Replaced(sctx, uaid, n)
	}
	st.outcome = outcome
	s.metrics.outcome(outcome, len(n.Data))
	s.metrics.encoding(h.Encoding)
	c.SetStatusCode(http.StatusCreated)
	rh := &c.Response.Header
	pb.loc = append(append(pb.loc[:0], s.location...), msgID...)
	rh.SetBytesV("Location", pb.loc)
	rh.SetBytesV("TTL", strconv.AppendInt(pb.ttl[:0], h.TTL, 10))
	if s.receiptLink != "" {
		rh.Set("Link", s.receiptLink)
	}
}

// track decides whether the push n is tracked (its VAPID key is one of
// tracking-keys, or it names a receipt subscription of that key) and if
// so records its fate (apitier/tracking).
func (s *Server) track(ctx context.Context, c *app.RequestContext, st *reqState, uaid uuid.UUID, n *protocol.Notification, now time.Time) *errno.HTTPError {
	hasKey := st.key != [32]byte{}
	sub, e := s.recAPI.PushReceipt(ctx, string(c.Request.Header.Peek("Push-Receipt")), st.key, hasKey)
	if e != nil {
		return e
	}
	if sub == (storage.ReceiptSubID{}) && !(hasKey && s.tracker.Tracks(st.key)) {
		return nil
	}
	if err := s.tracker.Track(ctx, uaid, n, sub, now); err != nil {
		return s.storageError("track a push", err)
	}
	return nil
}

// fateOf is the milestone a tracked push reached by its route: an error
// answered to its application server ends it as errored.
func fateOf(outcome string, e *errno.HTTPError) storage.FateState {
	switch {
	case e != nil:
		return storage.FateErrored
	case outcome == outcomeDirect:
		return storage.FateNodeTransmitted
	case outcome == outcomeDropped:
		return storage.FateExpired
	}
	return storage.FateStored
}

// checkVAPID verifies the Authorization header when there is one, and
// always on a v2 endpoint (whose key binding it enforces).
func (s *Server) checkVAPID(c *app.RequestContext, st *reqState, ep *token.Endpoint) *errno.HTTPError {
	auth := c.Request.Header.Peek("Authorization")
	if len(auth) == 0 && ep.Version != 2 {
		return nil
	}
	st.vapid = true
	res, err := s.vapid.Verify(string(auth), string(c.Request.Header.Peek("Crypto-Key")), s.audience)
	if err == nil {
		err = ep.CheckVAPID(&res)
	}
	if err == nil {
		s.metrics.vapidOK.Inc()
		if s.tracker.On() {
			st.key = sha256.Sum256(res.PublicKey[:])
		}
		return nil
	}
	var ve *vapid.Error
	if !errors.As(err, &ve) {
		s.metrics.vapidFailure("other")
		return errno.InvalidAuth.HTTPError("")
	}
	s.metrics.vapidFailure(ve.Rule)
	return ve.HTTPError()
}

// subscription reads the router record and checks the channel. ctx
// bounds the storage calls.
func (s *Server) subscription(ctx context.Context, uaid uuid.UUID, chid [16]byte) (storage.User, *errno.HTTPError) {
	start := time.Now()
	user, ok, err := s.store.Subscription(ctx, uaid, chid)
	if errors.Is(err, storage.ErrNotFound) {
		s.metrics.storage(start, nil)
		return user, errNoUser
	}
	s.metrics.storage(start, err)
	switch {
	case err != nil:
		return user, s.storageError("read router record and channel", err)
	case user.RouterType != storage.RouterWebPush && !bridge.IsBridged(user.RouterType):
		// The reference answers an unusable router type with 410 errno
		// 106 (and drops the user; this tier keeps the record).
		return user, errNoChannel
	case !ok:
		return user, errNoChannel
	}
	return user, nil
}

// getUser reads a router record; ctx bounds the call.
func (s *Server) getUser(ctx context.Context, uaid uuid.UUID) (storage.User, error) {
	start := time.Now()
	u, err := s.store.GetUser(ctx, uaid)
	if errors.Is(err, storage.ErrNotFound) {
		s.metrics.storage(start, nil)
	} else {
		s.metrics.storage(start, err)
	}
	return u, err
}

// storageError maps a storage failure: unavailable is 503 errno 201
// (retry later), anything else a 500.
func (s *Server) storageError(what string, err error) *errno.HTTPError {
	if errors.Is(err, storage.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("storage unavailable", "op", what, "error", err)
		return errStorageRead
	}
	s.log.Error("storage failed", "op", what, "error", err)
	return errInternal
}

// pushBuf is one push's working memory, pooled.
type pushBuf struct {
	body []byte // the raw body, max-data-bytes + 1
	b64  []byte
	chid [36]byte
	hdrs [4]protocol.Header
	loc  []byte
	ttl  [20]byte
	n    protocol.Notification
}

var pushBufPool = sync.Pool{New: func() any { return new(pushBuf) }}
