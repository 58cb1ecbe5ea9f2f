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
// An accepted push becomes a message (its id and notification), is
// tracked when its VAPID key or Push-Receipt asks (track), then routed:
// on its cached route, else by its user's router (router.go; a bridged
// user's is queued to the sender, bridged.go). It is answered 201
// Created with Location: {endpoint-url}/m/{message id} and the effective
// TTL, whether it was delivered, stored or (TTL 0, nobody connected)
// dropped, as the reference answers.
func (s *Server) handlePush(ctx context.Context, c *app.RequestContext, st *reqState) {
	version := c.Param("version")
	st.route = pushRoute(version)
	p := pushPool.Get().(*push)
	defer p.release()
	if e := s.parsePush(c, st, p, version); e != nil {
		st.x.Fail(e)
		return
	}
	// One deadline for every storage call of this push (node calls have
	// their own).
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StorageTimeout)
	defer cancel()
	if e := s.checkPush(sctx, c, p); e != nil {
		st.x.Fail(e)
		return
	}
	if e := s.message(st, p); e != nil {
		st.x.Fail(e)
		return
	}
	if e := s.track(sctx, c, st, p); e != nil {
		st.x.Fail(e)
		return
	}
	// A cached route that misses re-reads the subscription, which may be
	// gone by now: settled like a route's error (a tracked push's fate
	// ends errored).
	outcome, e := s.routeCachedPush(ctx, sctx, p)
	if e == nil && outcome == "" {
		outcome, e = s.routerOf(&p.user).route(ctx, sctx, p)
	}
	if e := s.settle(sctx, p, outcome, e); e != nil {
		st.x.Fail(e)
		return
	}
	s.answer(c, st, p, outcome)
}

// pushRoute is the request summary's route of a push to an endpoint of
// version (the path's; "" is v1).
func pushRoute(version string) string {
	switch version {
	case "", "v1":
		return routeWPushV1
	case "v2":
		return routeWPushV2
	}
	return routeWPushBad
}

// parsePush checks what needs no storage, in the order handlePush
// documents: the body (read whole; one over max-data-bytes is kept in
// p.bodyErr and answered after the subscription check), the token
// (endpoint) and VAPID.
func (s *Server) parsePush(c *app.RequestContext, st *reqState, p *push, version string) *errno.HTTPError {
	var e *errno.HTTPError
	p.body, e = st.x.ReadBodyInto(&p.buf, s.cfg.MaxDataBytes, errTooLarge)
	if e != nil && e != errTooLarge {
		return e
	}
	p.bodyErr = e
	if e := s.endpoint(c, version, p); e != nil {
		return e
	}
	return s.checkVAPID(c, st, &p.ep)
}

// endpoint decrypts the path's subscription token into p.ep: one that
// does not decrypt, or whose version is not the path's, is 404 errno 102.
func (s *Server) endpoint(c *app.RequestContext, version string, p *push) *errno.HTTPError {
	var err error
	if p.ep, err = s.keys.ParseToken(version, c.Param("token")); err == nil {
		return nil
	}
	var te *token.EndpointError
	if errors.As(err, &te) {
		return te.HTTPError()
	}
	return errNotFound
}

// checkPush runs the checks that read storage, in handlePush's order: the
// subscription (lookup), the body's size, the headers. ctx bounds the
// storage calls.
func (s *Server) checkPush(ctx context.Context, c *app.RequestContext, p *push) *errno.HTTPError {
	p.uaid = uuid.UUID(p.ep.UAID)
	p.now = time.Now()
	if e := s.lookup(ctx, p); e != nil {
		return e
	}
	if p.bodyErr != nil {
		return p.bodyErr
	}
	var e *errno.HTTPError
	p.h, e = pushheader.Parse(&c.Request.Header, len(p.body) > 0)
	return e
}

// lookup finds where p goes: its channel's route when the route cache
// (apitier/routecache) holds it, else its router record, which must hold
// the channel (subscription). ctx bounds the storage calls.
func (s *Server) lookup(ctx context.Context, p *push) *errno.HTTPError {
	p.key = routecache.NewKey(p.ep.UAID, p.ep.CHID)
	if p.cached, p.fromCache = s.routes.Get(p.key, p.now); p.fromCache {
		return nil
	}
	var e *errno.HTTPError
	p.user, e = s.subscription(ctx, p.uaid, p.ep.CHID)
	return e
}

// message makes p's message id and its notification, p.n: it lives in
// p because it is handed to the node by an interface call (the
// single-node server's local delivery), where a local would escape to the
// heap on every push.
func (s *Server) message(st *reqState, p *push) *errno.HTTPError {
	sortKey := storage.NewSortKey()
	p.mid = token.MessageID{UAID: p.ep.UAID, CHID: p.ep.CHID, Topic: p.h.Topic, SortKey: sortKey}
	msgID, err := s.keys.MakeMessageID(p.mid)
	if err != nil {
		// The topic was checked with the same rule: cannot happen.
		s.log.Error("make message id", "error", err)
		return errInternal
	}
	p.n = protocol.Notification{
		ChannelID: string(protocol.AppendChannelID(p.chid[:0], p.ep.CHID)),
		Version:   msgID,
		TTL:       p.h.TTL,
		Topic:     p.h.Topic,
		Timestamp: p.now.Unix(),
		SortKey:   sortKey,
		Headers:   p.h.Append(p.hdrs[:0]),
	}
	if len(p.body) > 0 {
		p.b64 = base64.RawURLEncoding.AppendEncode(p.b64[:0], p.body)
		p.n.Data = string(p.b64)
	}
	st.encoding, st.dataLen = p.h.Encoding, len(p.n.Data)
	return nil
}

// routeCachedPush pushes p on its cached route, if it has one:
// outcomeDirect when delivered. Otherwise it reads the router record
// whose router routes p instead, and the outcome is "". ctx is the
// request's, sctx bounds the storage calls.
func (s *Server) routeCachedPush(ctx, sctx context.Context, p *push) (string, *errno.HTTPError) {
	if !p.fromCache {
		return "", nil
	}
	if s.routeCached(ctx, p.key, p.cached, p.uaid, &p.n) {
		return outcomeDirect, nil
	}
	// Not delivered on the cached route: route from storage.
	var e *errno.HTTPError
	p.user, e = s.subscription(sctx, p.uaid, p.ep.CHID)
	return "", e
}

// answer is 201 Created for a push that reached outcome: the request
// summary's and the push metrics, Location (its message's URL), its
// effective TTL and, with receipts on, their Link.
func (s *Server) answer(c *app.RequestContext, st *reqState, p *push, outcome string) {
	st.outcome = outcome
	s.metrics.outcome(outcome, len(p.n.Data))
	s.metrics.encoding(p.h.Encoding)
	c.SetStatusCode(http.StatusCreated)
	rh := &c.Response.Header
	p.loc = append(append(p.loc[:0], s.location...), p.n.Version...)
	rh.SetBytesV("Location", p.loc)
	rh.SetBytesV("TTL", strconv.AppendInt(p.ttl[:0], p.h.TTL, 10))
	if s.receiptLink != "" {
		rh.Set("Link", s.receiptLink)
	}
}

// track is tracking and receipts, one step: with fates on (apitier/
// tracking), the push p is tracked when its VAPID key is one of
// tracking-keys or it names a receipt subscription of that key
// (Push-Receipt, apitier/receipts), and then its fate is recorded.
func (s *Server) track(ctx context.Context, c *app.RequestContext, st *reqState, p *push) *errno.HTTPError {
	if !s.tracker.On() {
		return nil
	}
	hasKey := st.key != [32]byte{}
	sub, e := s.recAPI.PushReceipt(ctx, string(c.Request.Header.Peek("Push-Receipt")), st.key, hasKey)
	if e != nil {
		return e
	}
	if sub == (storage.ReceiptSubID{}) && !(hasKey && s.tracker.Tracks(st.key)) {
		return nil
	}
	if err := s.tracker.Track(ctx, p.uaid, &p.n, sub, p.now); err != nil {
		return s.storageError("track a push", err)
	}
	return nil
}

// settle records the fate a tracked push reached by its route (fateOf)
// and returns the route's error; a stored push with a topic replaced the
// message stored with it, whose fate ends so (tracking.Replaced).
func (s *Server) settle(ctx context.Context, p *push, outcome string, e *errno.HTTPError) *errno.HTTPError {
	if p.n.Tracked {
		s.tracker.Reached(ctx, p.uaid, &p.n, fateOf(outcome, e))
	}
	if e != nil {
		return e
	}
	if outcome == outcomeStored && p.n.Topic != "" && s.tracker.On() {
		s.tracker.Replaced(ctx, p.uaid, &p.n)
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

// verifyVAPID verifies a VAPID authorization for this tier's origin and,
// when its aud names another, for each of vapid-former-aud's.
func (s *Server) verifyVAPID(authorization, cryptoKey string) (vapid.Result, error) {
	res, err := s.vapid.Verify(authorization, cryptoKey, s.audience)
	var ve *vapid.Error
	if err == nil || len(s.formerAud) == 0 || !errors.As(err, &ve) || ve.Rule != vapid.RuleAud {
		return res, err
	}
	for _, aud := range s.formerAud {
		if former, ferr := s.vapid.Verify(authorization, cryptoKey, aud); ferr == nil {
			s.metrics.vapidFormerAud.Inc()
			return former, nil
		}
	}
	return res, err
}

// checkVAPID verifies the Authorization header when there is one, and
// always on a v2 endpoint (whose key binding it enforces).
func (s *Server) checkVAPID(c *app.RequestContext, st *reqState, ep *token.Endpoint) *errno.HTTPError {
	auth := c.Request.Header.Peek("Authorization")
	if len(auth) == 0 && ep.Version != 2 {
		return nil
	}
	st.vapid = true
	res, err := s.verifyVAPID(string(auth), string(c.Request.Header.Peek("Crypto-Key")))
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

// push is one push's working state from parse to answer, pooled: the
// steps of handlePush hand it on, and through the router interface a
// pointer into a local would escape to the heap on every push.
type push struct {
	ep        token.Endpoint
	uaid      uuid.UUID
	now       time.Time
	body      []byte           // the raw body, in buf
	bodyErr   *errno.HTTPError // errTooLarge, answered after lookup
	key       routecache.Key
	cached    routecache.Route // when fromCache
	fromCache bool
	user      storage.User // the router record, unless fromCache
	h         pushheader.Headers
	mid       token.MessageID
	n         protocol.Notification

	// Buffers, kept across pushes.
	buf  []byte // max-data-bytes + 1
	b64  []byte
	chid [36]byte
	hdrs [4]protocol.Header
	loc  []byte
	ttl  [20]byte
}

var pushPool = sync.Pool{New: func() any { return new(push) }}

// release returns p to the pool with nothing of its push (not the
// payload's notification, until the next push) but its buffers.
func (p *push) release() {
	*p = push{buf: p.buf, b64: p.b64, loc: p.loc}
	pushPool.Put(p)
}
