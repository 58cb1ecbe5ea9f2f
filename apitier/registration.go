package apitier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/sender/apns/alert"
	"github.com/autopush-go/autopush/apitier/sender/bridge"
	"github.com/autopush-go/autopush/internal/bridgeauth"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/storage"
)

// The bridge registration API (seed 004, "Push Service Bridge HTTP
// Interface"; autoendpoint's routes/registration.rs), for mobile user
// agents whose pushes travel over a bridge (FCM, APNs) rather than a
// websocket:
//
//	POST   /v1/{type}/{app_id}/registration                      new UAID and channel; no auth
//	PUT    /v1/{type}/{app_id}/registration/{uaid}               new bridge token
//	GET    /v1/{type}/{app_id}/registration/{uaid}[/]            its channel ids
//	DELETE /v1/{type}/{app_id}/registration/{uaid}               drop it and its channels
//	POST   /v1/{type}/{app_id}/registration/{uaid}/subscription  new channel
//	DELETE /v1/{type}/{app_id}/registration/{uaid}/subscription/{chid}
//
// {type} is webpush, fcm, gcm (stored as "gcm", routed as FCM) or apns;
// anything else is 400 errno 108. The routes under {uaid} need
// "Authorization: Bearer <secret>", the secret the POST answered
// (internal/bridgeauth; any bridge-auth-keys key verifies); without
// bridge-auth-keys every route answers 401. The checks run in this
// order: the type (else 400 errno 108), a bearer secret is present (401
// errno 109), the uaid parses (410 errno 103), the secret verifies (401
// errno 109), the user exists (410 errno 103); then, unlike the
// reference, the user's router type must be the path's (fcm and gcm
// count as one; else 400 errno 108), so that one bridge's client cannot
// rewrite another's record. The body's token and the app id are checked
// last (400, errno null, as the reference). The reference checks the
// uaid and the secret before the type; a request with one fault gets
// the same answer either way.
//
// Answers: the reference's field names ("uaid", "channelID", "endpoint",
// "secret"; "uaid" and "channelIDs" for the GET; UUIDs dashed). The
// PUT and the DELETEs answer 200 with {} as seed 004 documents (the
// reference sends an empty body).

// BridgeApps says which app ids each bridge serves: the bridges'
// configuration (FCM projects, APNs release channels), owned by the
// bridge tier. Known must be safe for concurrent use. routerType is
// "fcm", "gcm" or "apns".
type BridgeApps interface {
	Known(routerType, appID string) bool
}

// SetBridgeApps wires the bridges' app ids. Safe at any time, from any
// goroutine (a reload of the bridges' configuration may swap it). Without
// it (nil) no bridge app id is known: fcm, gcm and apns registrations
// answer 400, and only the webpush type registers (it takes any app id,
// as the reference's webpush router does).
func (s *Server) SetBridgeApps(b BridgeApps) { s.bridgeApps.Store(&bridgeAppsRef{b}) }

type bridgeAppsRef struct{ BridgeApps }

func validRouterType(t string) bool { return t == bridge.TypeWebPush || bridge.IsBridged(t) }

// sameBridge reports router types one bridge routes (gcm is FCM's legacy
// name).
func sameBridge(a, b string) bool {
	pa, _, _ := bridge.ProviderOf(a)
	pb, _, _ := bridge.ProviderOf(b)
	return a == b || (pa != "" && pa == pb)
}

// Route labels of the registration API (mRequests, mRequestSeconds).
const (
	routeRegNew    = "registration_new"         // POST .../registration
	routeRegUpdate = "registration_update"      // PUT .../registration/{uaid}
	routeRegGet    = "registration_get"         // GET .../registration/{uaid}
	routeRegDelete = "registration_delete"      // DELETE .../registration/{uaid}
	routeRegSub    = "registration_subscribe"   // POST .../subscription
	routeRegUnsub  = "registration_unsubscribe" // DELETE .../subscription/{chid}
)

// Limits of a registration request.
const (
	// maxRegistrationBody bounds a body: a token, an APS dictionary, a
	// key and a channel id, with room for JSON.
	maxRegistrationBody = 4 << 10
	// minBridgeToken and maxBridgeToken bound a bridge token: the
	// reference's at least 8 characters; at most what the sender's
	// storage keeps of a push key.
	minBridgeToken = 8
	maxBridgeToken = 256
	// maxAPS bounds the APNs "aps" dictionary (JSON text) kept with a
	// registration; the router data as a whole is storage.MaxRouterData.
	maxAPS = 2 << 10
)

// Reasons of mBridgeAuthFailures.
const (
	authClosed  = "closed"  // no bridge-auth-keys configured
	authMissing = "missing" // no Authorization, or not Bearer/WebPush
	authInvalid = "invalid" // a secret no key verifies
)

var (
	errRegClosed    = errno.InvalidAuth.HTTPError("Bridge registration is not enabled on this node")
	errRegNoAuth    = errno.InvalidAuth.HTTPError("Invalid Local Auth missing auth token")
	errRegAuth      = errno.InvalidAuth.HTTPError("Invalid Local Auth incorrect auth token")
	errRouterType   = errno.InvalidRouterType.HTTPError("Invalid router type")
	errTypeMismatch = errno.InvalidRouterType.HTTPError("Router type does not match the registration")
	errRouterToken  = badField("Invalid router token: 8 to 256 visible ASCII characters")
	errAppID        = badField("Unknown app id for this router type")
	errRegChannelID = badField("channelID must be a UUID")
	errRegKey       = badField("key must be a VAPID public key: an uncompressed P-256 point in base64url")
	errRegAPS       = badField("Invalid APS data: a JSON object of at most 2048 bytes whose alert fields are strings (arrays of strings for title_loc_args and loc_args) and mutable-content, badge and content-available integers")
	errRegTooLarge  = errno.PayloadTooLarge.HTTPError("The request body is over 4 KiB")
	// The reference has no channel limit, so no errno: null, as the
	// answers the reference's table has no number for.
	errRegChannels = &errno.HTTPError{Status: http.StatusTooManyRequests, Errno: errno.None,
		Message: "Too many subscriptions: this registration has the most channels allowed (bridge-max-channels)"}
)

// registrationInput is a parsed registration body.
type registrationInput struct {
	token string
	chid  uuid.UUID // uuid.Nil: make one
	key   []byte    // raw VAPID public key: a v2 endpoint; nil: v1
	aps   string    // apns only: the APS dictionary, JSON text
}

// registrationBody is the JSON of a registration or subscription body
// (the reference's RouterDataInput and NewChannelData). Other members
// are ignored: seed 004 lets bridges add their own.
type registrationBody struct {
	Token     *string `json:"token"`
	ChannelID *string `json:"channelID"`
	Key       *string `json:"key"`
	APS       *string `json:"aps"`
}

// parseRegistrationBody reads a registration body for routerType: one
// JSON object whose members are strings or null. withToken: the token
// is required (POST registration, PUT) and checked as a bridge token
// (any string for webpush, which has none); else the body may be empty
// and a token is ignored (POST subscription). "aps" is kept for apns
// only, as the reference does.
func parseRegistrationBody(body []byte, routerType string, withToken bool) (registrationInput, *errno.HTTPError) {
	var in registrationInput
	var b registrationBody
	if len(bytes.TrimSpace(body)) == 0 && !withToken {
		return in, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		if err == io.EOF {
			return in, badField("Invalid JSON body: the body is empty")
		}
		return in, badField("Invalid JSON body: " + jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return in, badField("Invalid JSON body: more than one value")
	}
	if withToken {
		if b.Token == nil {
			return in, badField("Invalid JSON body: token is required")
		}
		if routerType != storage.RouterWebPush && !validBridgeToken(*b.Token) {
			return in, errRouterToken
		}
		in.token = *b.Token
	}
	if b.ChannelID != nil {
		chid, err := uuid.Parse(*b.ChannelID)
		if err != nil || chid == uuid.Nil {
			return in, errRegChannelID
		}
		in.chid = chid
	}
	if b.Key != nil {
		key, err := vapid.DecodeKey(*b.Key)
		if err != nil {
			return in, errRegKey
		}
		in.key = key
	}
	if b.APS != nil && routerType == bridge.TypeAPNs && withToken {
		var obj map[string]json.RawMessage
		// alert.Check: the types the alert's derivation and autopush-rs's
		// registration ask for, so that a stored aps always derives.
		if len(*b.APS) > maxAPS || json.Unmarshal([]byte(*b.APS), &obj) != nil || obj == nil || alert.Check(*b.APS) != nil {
			return in, errRegAPS
		}
		in.aps = *b.APS
	}
	return in, nil
}

// validBridgeToken: 8 to 256 visible ASCII characters. The reference
// asks for 8 or more non-space characters; FCM registration tokens and
// APNs device tokens are ASCII, and the sender stores at most 256.
func validBridgeToken(t string) bool {
	if len(t) < minBridgeToken || len(t) > maxBridgeToken {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] >= 0x7f {
			return false
		}
	}
	return true
}

// routerData is what a bridge keeps of a registration (bridge.RouterData)
// and, for APNs, the "aps" the device sent, as the reference keeps it.
func routerData(routerType, appID string, in *registrationInput) map[string]string {
	d := bridge.RouterData(routerType, appID, in.token)
	if in.aps != "" && routerType == bridge.TypeAPNs {
		d["aps"] = in.aps
	}
	return d
}

// regGate refuses every registration call when no key is configured.
func (s *Server) regGate(c *app.RequestContext, st *reqState) bool {
	if len(s.cfg.BridgeAuthKeys) > 0 {
		return true
	}
	s.refuseReg(c, st, errRegClosed, authClosed)
	return false
}

func (s *Server) refuseReg(c *app.RequestContext, st *reqState, e *errno.HTTPError, reason string) {
	s.writeError(c, st, e)
	c.Response.Header.Set("WWW-Authenticate", `Bearer realm="registration"`)
	s.metrics.bridgeAuthFailure(reason)
}

// knownApp reports whether appID is configured for routerType; the
// webpush type takes any.
func (s *Server) knownApp(routerType, appID string) bool {
	if routerType == storage.RouterWebPush {
		return true
	}
	ref := s.bridgeApps.Load()
	return ref != nil && ref.BridgeApps != nil && ref.Known(routerType, appID)
}

// readRegistrationBody reads a body of at most maxRegistrationBody.
func (s *Server) readRegistrationBody(c *app.RequestContext, st *reqState) ([]byte, *errno.HTTPError) {
	var buf []byte
	body, e := readBodyUpTo(c, &buf, maxRegistrationBody, errRegTooLarge)
	if e == nil {
		st.bodyRead = true
	}
	return body, e
}

// handleRegister is POST /v1/{type}/{app_id}/registration: a new UAID
// with the bridge token and one channel. The channel is written first
// and the router record last, so a failure leaves no record without its
// channel (a channel without a record is unreachable and is removed).
func (s *Server) handleRegister(ctx context.Context, c *app.RequestContext, st *reqState) {
	if !s.regGate(c, st) {
		return
	}
	routerType, appID := c.Param("type"), c.Param("app_id")
	if !validRouterType(routerType) {
		s.writeError(c, st, errRouterType)
		return
	}
	body, e := s.readRegistrationBody(c, st)
	if e != nil {
		s.writeError(c, st, e)
		return
	}
	in, ok := s.tokenInput(c, st, body)
	if !ok {
		return
	}
	uaid := uuid.New()
	endpoint, ok := s.newChannel(c, st, uaid, &in)
	if !ok {
		return
	}
	secret := bridgeauth.Secret(s.cfg.BridgeAuthKeys[0], uaid)

	sctx, cancel := context.WithTimeout(ctx, s.cfg.StorageTimeout)
	defer cancel()
	if !s.stored(c, st, "add channel", func() error { return s.store.AddChannel(sctx, uaid, in.chid) }) {
		return
	}
	u := storage.User{UAID: uaid, RouterType: routerType, RouterData: routerData(routerType, appID, &in),
		ConnectedAt: time.Now().UnixMilli()}
	if !s.stored(c, st, "add user", func() error { return s.store.Connect(sctx, u) }) {
		s.undoChannel(uaid, in.chid)
		return
	}
	writeJSON(c, http.StatusOK, map[string]string{
		"uaid": uaid.String(), "channelID": in.chid.String(), "endpoint": endpoint, "secret": secret,
	})
}

// tokenInput parses a body with a token (POST registration, PUT) for
// the path's type, and checks the path's app id; or answers and returns
// false.
func (s *Server) tokenInput(c *app.RequestContext, st *reqState, body []byte) (registrationInput, bool) {
	routerType := c.Param("type")
	in, e := parseRegistrationBody(body, routerType, true)
	if e == nil && !s.knownApp(routerType, c.Param("app_id")) {
		e = errAppID
	}
	if e != nil {
		s.writeError(c, st, e)
		return in, false
	}
	return in, true
}

// newChannel picks the channel id (the body's, or a new one) and makes
// its endpoint; or answers and returns false.
func (s *Server) newChannel(c *app.RequestContext, st *reqState, uaid uuid.UUID, in *registrationInput) (string, bool) {
	if in.chid == uuid.Nil {
		in.chid = uuid.New()
	}
	endpoint, err := s.keys.MakeEndpoint(s.cfg.EndpointURL, uaid, in.chid, in.key)
	if err != nil {
		// The key was checked: this is a bug or a bad endpoint-url.
		s.log.Error("registration: make endpoint", "error", err)
		s.writeError(c, st, errInternal)
		return "", false
	}
	return endpoint, true
}

// undoChannel removes the channel of a registration whose record could
// not be written, on its own deadline: the request's may be what ran out.
func (s *Server) undoChannel(uaid, chid uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StorageTimeout)
	defer cancel()
	if err := s.timed(func() error { return s.store.RemoveChannel(ctx, uaid, chid) }); err != nil {
		s.log.Warn("registration: remove the channel of a failed registration", "error", err)
	}
}

// timed runs one storage call, timed and counted.
func (s *Server) timed(call func() error) error {
	start := time.Now()
	err := call()
	s.metrics.storage(start, err)
	return err
}

// regAuth runs the checks of the routes under {uaid} that cost no I/O
// (see the top of this file): it returns the uaid, or answers and
// returns false.
func (s *Server) regAuth(c *app.RequestContext, st *reqState) (uuid.UUID, bool) {
	if !s.regGate(c, st) {
		return uuid.Nil, false
	}
	if !validRouterType(c.Param("type")) {
		s.writeError(c, st, errRouterType)
		return uuid.Nil, false
	}
	secret, ok := bridgeauth.FromAuthorization(string(c.Request.Header.Peek("Authorization")))
	if !ok {
		s.refuseReg(c, st, errRegNoAuth, authMissing)
		return uuid.Nil, false
	}
	uaid, err := uuid.Parse(c.Param("uaid"))
	if err != nil || uaid == uuid.Nil {
		s.writeError(c, st, errRegNoUser)
		return uuid.Nil, false
	}
	if !bridgeauth.Verify(s.cfg.BridgeAuthKeys, uaid, secret) {
		s.refuseReg(c, st, errRegAuth, authInvalid)
		return uuid.Nil, false
	}
	return uaid, true
}

// regLookup reads uaid's record and checks that its router type is the
// path's, or answers and returns false. sctx bounds the storage call.
func (s *Server) regLookup(sctx context.Context, c *app.RequestContext, st *reqState, uaid uuid.UUID) (storage.User, bool) {
	u, err := s.getUser(sctx, uaid)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		s.writeError(c, st, errRegNoUser)
		return u, false
	case err != nil:
		s.writeError(c, st, s.storageError("registration: read router record", err))
		return u, false
	case !sameBridge(u.RouterType, c.Param("type")):
		s.writeError(c, st, errTypeMismatch)
		return u, false
	}
	return u, true
}

// regHandler is a handler of a route under {uaid}, called once the
// checks passed with the record, and the body (withBody routes); sctx
// bounds its storage calls.
type regHandler func(sctx context.Context, c *app.RequestContext, st *reqState, u storage.User, body []byte)

// regRoute runs regAuth, reads the body (withBody) before the record so
// that no storage deadline runs while a client sends, runs regLookup,
// then h.
func (s *Server) regRoute(withBody bool, h regHandler) handlerFunc {
	return func(ctx context.Context, c *app.RequestContext, st *reqState) {
		sctx, cancel := context.WithTimeout(ctx, s.cfg.StorageTimeout)
		defer cancel()
		uaid, ok := s.regAuth(c, st)
		if !ok {
			return
		}
		var body []byte
		if withBody {
			var e *errno.HTTPError
			if body, e = s.readRegistrationBody(c, st); e != nil {
				s.writeError(c, st, e)
				return
			}
		}
		if u, ok := s.regLookup(sctx, c, st, uaid); ok {
			h(sctx, c, st, u, body)
		}
	}
}

// stored runs one storage call (timed); on failure it answers (503
// errno 201 or 500) and returns false.
func (s *Server) stored(c *app.RequestContext, st *reqState, what string, call func() error) bool {
	if err := s.timed(call); err != nil {
		s.writeError(c, st, s.storageError("registration: "+what, err))
		return false
	}
	return true
}

// handleRegUpdate is PUT /v1/{type}/{app_id}/registration/{uaid}: the
// bridge has a new token for the client. A gcm record updated through
// an fcm path becomes fcm (the reference stores the path's type). A
// webpush record has no bridge data: nothing is written.
func (s *Server) handleRegUpdate(sctx context.Context, c *app.RequestContext, st *reqState, u storage.User, body []byte) {
	routerType, appID := c.Param("type"), c.Param("app_id")
	in, ok := s.tokenInput(c, st, body)
	if !ok {
		return
	}
	if routerType != storage.RouterWebPush {
		u.RouterType, u.RouterData = routerType, routerData(routerType, appID, &in)
		if !s.stored(c, st, "update router record", func() error { return s.refresh(sctx, &u) }) {
			return
		}
	}
	writeJSON(c, http.StatusOK, struct{}{})
}

// refresh writes u back as a newer connection: Connect keeps the newest
// ConnectedAt, and refreshes the record's and its channels' idle
// expiry. A concurrent write that won (ErrConflict) is 503: retry.
func (s *Server) refresh(ctx context.Context, u *storage.User) error {
	u.ConnectedAt = max(time.Now().UnixMilli(), u.ConnectedAt+1)
	u.LastConnect = 0
	err := s.store.Connect(ctx, *u)
	if errors.Is(err, storage.ErrConflict) {
		return errors.Join(storage.ErrUnavailable, err)
	}
	return err
}

// handleRegGet is GET /v1/{type}/{app_id}/registration/{uaid}[/]: the
// channel ids. Mobile clients call it daily, so it also refreshes a
// bridged record's expiry, as the reference does; a failed refresh is
// logged, the list still answered.
func (s *Server) handleRegGet(sctx context.Context, c *app.RequestContext, st *reqState, u storage.User, _ []byte) {
	if u.RouterType != storage.RouterWebPush {
		if err := s.timed(func() error { return s.refresh(sctx, &u) }); err != nil {
			s.log.Warn("registration: refresh router record", "error", err)
		}
	}
	var chids []uuid.UUID
	if !s.stored(c, st, "list channels", func() (err error) { chids, err = s.store.Channels(sctx, u.UAID); return err }) {
		return
	}
	ids := make([]string, len(chids))
	for i, id := range chids {
		ids[i] = id.String()
	}
	writeJSON(c, http.StatusOK, map[string]any{"uaid": u.UAID.String(), "channelIDs": ids})
}

// handleRegDelete is DELETE /v1/{type}/{app_id}/registration/{uaid}:
// the record, its channels and stored messages go.
func (s *Server) handleRegDelete(sctx context.Context, c *app.RequestContext, st *reqState, u storage.User, _ []byte) {
	if !s.stored(c, st, "drop user", func() error { return s.store.DropUser(sctx, u.UAID) }) {
		return
	}
	writeJSON(c, http.StatusOK, struct{}{})
}

// handleRegSubscribe is POST .../registration/{uaid}/subscription: a
// new channel (the body's channelID, or a new one), with a v2 endpoint
// when the body has a key. The body may be empty.
func (s *Server) handleRegSubscribe(sctx context.Context, c *app.RequestContext, st *reqState, u storage.User, body []byte) {
	in, e := parseRegistrationBody(body, u.RouterType, false)
	if e != nil {
		s.writeError(c, st, e)
		return
	}
	if !s.roomForChannel(sctx, c, st, u.UAID, in.chid) {
		return
	}
	endpoint, ok := s.newChannel(c, st, u.UAID, &in)
	if !ok {
		return
	}
	if !s.stored(c, st, "add channel", func() error { return s.store.AddChannel(sctx, u.UAID, in.chid) }) {
		return
	}
	writeJSON(c, http.StatusOK, map[string]string{"channelID": in.chid.String(), "endpoint": endpoint})
}

// roomForChannel reports whether uaid may subscribe chid under
// bridge-max-channels: below the limit, or chid (given in the body) is
// one it has already; else it answers 429 and returns false. It counts
// up to the limit: one storage read per 5000 channels.
func (s *Server) roomForChannel(sctx context.Context, c *app.RequestContext, st *reqState, uaid, chid uuid.UUID) bool {
	limit := s.cfg.BridgeMaxChannels
	if limit == 0 {
		return true
	}
	var n int
	if !s.stored(c, st, "count channels", func() (err error) { n, err = s.store.CountChannels(sctx, uaid, limit); return err }) {
		return false
	}
	if n < limit {
		return true
	}
	has := false
	if chid != uuid.Nil && !s.stored(c, st, "read channel", func() (err error) { has, err = s.store.HasChannel(sctx, uaid, chid); return err }) {
		return false
	}
	if !has {
		s.writeError(c, st, errRegChannels)
	}
	return has
}

// handleRegUnsubscribe is DELETE .../registration/{uaid}/subscription/{chid}.
// A channel id that is not a UUID, or not subscribed, is 410 errno 106,
// as in the reference.
func (s *Server) handleRegUnsubscribe(sctx context.Context, c *app.RequestContext, st *reqState, u storage.User, _ []byte) {
	chid, err := uuid.Parse(c.Param("chid"))
	if err != nil || chid == uuid.Nil {
		s.writeError(c, st, errNoChannel)
		return
	}
	var has bool
	if !s.stored(c, st, "read channel", func() (err error) { has, err = s.store.HasChannel(sctx, u.UAID, chid); return err }) {
		return
	}
	if !has {
		s.writeError(c, st, errNoChannel)
		return
	}
	if !s.stored(c, st, "remove channel", func() error { return s.store.RemoveChannel(sctx, u.UAID, chid) }) {
		return
	}
	writeJSON(c, http.StatusOK, struct{}{})
}
