package registration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/internal/bridgeauth"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/sender/bridge"
	"github.com/autopush-go/autopush/sender/bridge/aps"
	"github.com/autopush-go/autopush/storage"
)

// Apps says which app ids each bridge serves: the bridges'
// configuration (FCM projects, APNs release channels), owned by the
// bridges (sender/bridge). Known must be safe for concurrent use.
// routerType is "fcm", "gcm" or "apns".
type Apps interface {
	Known(routerType, appID string) bool
}

// Store is what the routes read and write: router records and channels.
type Store interface {
	GetUser(ctx context.Context, uaid uuid.UUID) (storage.User, error)
	Connect(ctx context.Context, u storage.User) error
	DropUser(ctx context.Context, uaid uuid.UUID) error
	AddChannel(ctx context.Context, uaid, chid uuid.UUID) error
	RemoveChannel(ctx context.Context, uaid, chid uuid.UUID) error
	SettleUser(ctx context.Context, uaid, chid uuid.UUID, reason storage.DropReason) (int, error)
	Channels(ctx context.Context, uaid uuid.UUID) ([]uuid.UUID, error)
	CountChannels(ctx context.Context, uaid uuid.UUID, limit int) (int, error)
	HasChannel(ctx context.Context, uaid, chid uuid.UUID) (bool, error)
}

// Host is what the routes use of the endpoint node that serves them.
type Host interface {
	// MakeEndpoint is a channel's push endpoint on this node: v2 for a
	// VAPID public key (raw), else v1.
	MakeEndpoint(uaid, chid uuid.UUID, key []byte) (string, error)
	// Timed runs one storage call, timed and counted in the node's
	// storage metrics (a nil error counts as a success).
	Timed(call func() error) error
	// StorageError logs a failed storage call (op names it) and is its
	// answer: 503 errno 201 when storage is unavailable or timed out,
	// else 500.
	StorageError(op string, err error) *errno.HTTPError
}

// Config of the routes: the endpoint node's settings they read.
type Config struct {
	// AuthKeys are bridge-auth-keys: the first signs a registration's
	// secret, any verifies; none closes the API (401).
	AuthKeys []string
	// MaxChannels is bridge-max-channels (0: no limit).
	MaxChannels int
	// StorageTimeout bounds a request's storage calls (storage-timeout).
	StorageTimeout time.Duration
}

// API is the registration routes. Goroutine-safe.
type API struct {
	cfg     Config
	store   Store
	host    Host
	log     *slog.Logger
	apps    atomic.Pointer[appsRef]
	metrics *apiMetrics
}

// New returns the routes over store, served by host. No app id is known
// until SetApps.
func New(cfg Config, store Store, host Host, log *slog.Logger) *API {
	return &API{cfg: cfg, store: store, host: host, log: log, metrics: newMetrics()}
}

// SetApps wires the bridges' app ids. Safe at any time, from any
// goroutine (a reload of the bridges' configuration may swap it). Without
// it (nil) no bridge app id is known: fcm, gcm and apns registrations
// answer 400, and only the webpush type registers (it takes any app id,
// as the reference's webpush router does).
func (a *API) SetApps(b Apps) { a.apps.Store(&appsRef{b}) }

type appsRef struct{ Apps }

// Routes lists the registration routes. The GET is served with and
// without the trailing slash docs/bridges.md shows.
func (a *API) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Path: "/v1/:type/:app_id/registration", Label: routeNew, Handle: a.handleRegister},
		{Method: http.MethodPut, Path: "/v1/:type/:app_id/registration/:uaid", Label: routeUpdate, Handle: a.route(true, a.handleUpdate)},
		{Method: http.MethodGet, Path: "/v1/:type/:app_id/registration/:uaid", Label: routeGet, Handle: a.route(false, a.handleGet)},
		{Method: http.MethodGet, Path: "/v1/:type/:app_id/registration/:uaid/", Label: routeGet, Handle: a.route(false, a.handleGet)},
		{Method: http.MethodDelete, Path: "/v1/:type/:app_id/registration/:uaid", Label: routeDelete, Handle: a.route(false, a.handleDelete)},
		{Method: http.MethodPost, Path: "/v1/:type/:app_id/registration/:uaid/subscription", Label: routeSub, Handle: a.route(true, a.handleSubscribe)},
		{Method: http.MethodDelete, Path: "/v1/:type/:app_id/registration/:uaid/subscription/:chid", Label: routeUnsub, Handle: a.route(false, a.handleUnsubscribe)},
	}
}

// Serves reports whether a request URI is the registration API's: the
// node reads a body of at most MaxBody for it.
func Serves(uri []byte) bool {
	return bytes.HasPrefix(uri, []byte("/v1/")) && bytes.Contains(uri, []byte("/registration"))
}

func validRouterType(t string) bool { return t == bridge.TypeWebPush || bridge.IsBridged(t) }

// sameBridge reports router types one bridge routes (gcm is FCM's legacy
// name).
func sameBridge(a, b string) bool {
	pa, _, _ := bridge.ProviderOf(a)
	pb, _, _ := bridge.ProviderOf(b)
	return a == b || (pa != "" && pa == pb)
}

// Route labels of the registration API (autoendpoint_requests_total
// {route}, autoendpoint_request_seconds{route}).
const (
	routeNew    = "registration_new"         // POST .../registration
	routeUpdate = "registration_update"      // PUT .../registration/{uaid}
	routeGet    = "registration_get"         // GET .../registration/{uaid}
	routeDelete = "registration_delete"      // DELETE .../registration/{uaid}
	routeSub    = "registration_subscribe"   // POST .../subscription
	routeUnsub  = "registration_unsubscribe" // DELETE .../subscription/{chid}
)

// Limits of a registration request.
const (
	// MaxBody bounds a body: a token, an APS dictionary, a key and a
	// channel id, with room for JSON.
	MaxBody = 4 << 10
	// minBridgeToken and maxBridgeToken bound a bridge token: the
	// reference's at least 8 characters; at most what the sender's
	// storage keeps of a push key.
	minBridgeToken = 8
	maxBridgeToken = 256
	// maxAPS bounds the APNs "aps" dictionary (JSON text) kept with a
	// registration; the router data as a whole is storage.MaxRouterData.
	maxAPS = 2 << 10
)

// Reasons of mAuthFailures.
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
	errRouterToken  = httpapi.BadRequest("Invalid router token: 8 to 256 visible ASCII characters")
	errAppID        = httpapi.BadRequest("Unknown app id for this router type")
	errRegChannelID = httpapi.BadRequest("channelID must be a UUID")
	errRegKey       = httpapi.BadRequest("key must be a VAPID public key: an uncompressed P-256 point in base64url")
	errRegAPS       = httpapi.BadRequest("Invalid APS data: a JSON object of at most 2048 bytes whose alert fields are strings (arrays of strings for title_loc_args and loc_args) and mutable-content, badge and content-available integers")
	errRegTooLarge  = errno.PayloadTooLarge.HTTPError("The request body is over 4 KiB")
	// The reference has no channel limit, so no errno: null, as the
	// answers the reference's table has no number for.
	errRegChannels = errno.Unnumbered(http.StatusTooManyRequests, "Too many subscriptions: this registration has the most channels allowed (bridge-max-channels)")
	// errRegNoUser: an unknown uaid (the reference's NoUser, errno 103);
	// the push route's is "UAID not found" errno 106 (its NoSubscription).
	errRegNoUser = errno.ExpiredEndpoint.HTTPError("UAID not found")
	errNoChannel = errno.InvalidSubscription.HTTPError("No such subscription")
	errInternal  = errno.Unknown.HTTPError("An unexpected server error occurred.")
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
// are ignored: a bridge may add its own (docs/openapi.yaml).
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
	if err := httpapi.DecodeObject(body, &b, false); err != nil {
		return in, httpapi.BadRequest("Invalid JSON body: " + err.Error())
	}
	if withToken {
		if b.Token == nil {
			return in, httpapi.BadRequest("Invalid JSON body: token is required")
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
		// aps.Check: the types the alert's derivation and autopush-rs's
		// registration ask for, so that a stored aps always derives.
		if len(*b.APS) > maxAPS || json.Unmarshal([]byte(*b.APS), &obj) != nil || obj == nil || aps.Check(*b.APS) != nil {
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

// gate refuses every registration call when no key is configured.
func (a *API) gate(c *app.RequestContext, x *httpapi.Exchange) bool {
	if len(a.cfg.AuthKeys) > 0 {
		return true
	}
	a.refuse(c, x, errRegClosed, authClosed)
	return false
}

func (a *API) refuse(c *app.RequestContext, x *httpapi.Exchange, e *errno.HTTPError, reason string) {
	x.Fail(e)
	c.Response.Header.Set("WWW-Authenticate", `Bearer realm="registration"`)
	a.metrics.authFailure(reason)
}

// knownApp reports whether appID is configured for routerType; the
// webpush type takes any.
func (a *API) knownApp(routerType, appID string) bool {
	if routerType == storage.RouterWebPush {
		return true
	}
	ref := a.apps.Load()
	return ref != nil && ref.Apps != nil && ref.Known(routerType, appID)
}

// handleRegister is POST /v1/{type}/{app_id}/registration: a new UAID
// with the bridge token and one channel. The channel is written first
// and the router record last, so a failure leaves no record without its
// channel (a channel without a record is unreachable and is removed).
func (a *API) handleRegister(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
	if !a.gate(c, x) {
		return
	}
	routerType, appID := c.Param("type"), c.Param("app_id")
	if !validRouterType(routerType) {
		x.Fail(errRouterType)
		return
	}
	body, e := x.ReadBody(MaxBody, errRegTooLarge)
	if e != nil {
		x.Fail(e)
		return
	}
	in, ok := a.tokenInput(c, x, body)
	if !ok {
		return
	}
	uaid := uuid.New()
	endpoint, ok := a.newChannel(x, uaid, &in)
	if !ok {
		return
	}
	secret := bridgeauth.Secret(a.cfg.AuthKeys[0], uaid)

	sctx, cancel := context.WithTimeout(ctx, a.cfg.StorageTimeout)
	defer cancel()
	if !a.stored(x, "add channel", func() error { return a.store.AddChannel(sctx, uaid, in.chid) }) {
		return
	}
	u := storage.User{UAID: uaid, RouterType: routerType, RouterData: routerData(routerType, appID, &in),
		ConnectedAt: time.Now().UnixMilli()}
	if !a.stored(x, "add user", func() error { return a.store.Connect(sctx, u) }) {
		a.undoChannel(uaid, in.chid)
		return
	}
	httpapi.WriteJSON(c, http.StatusOK, map[string]string{
		"uaid": uaid.String(), "channelID": in.chid.String(), "endpoint": endpoint, "secret": secret,
	})
}

// tokenInput parses a body with a token (POST registration, PUT) for
// the path's type, and checks the path's app id; or answers and returns
// false.
func (a *API) tokenInput(c *app.RequestContext, x *httpapi.Exchange, body []byte) (registrationInput, bool) {
	routerType := c.Param("type")
	in, e := parseRegistrationBody(body, routerType, true)
	if e == nil && !a.knownApp(routerType, c.Param("app_id")) {
		e = errAppID
	}
	if e != nil {
		x.Fail(e)
		return in, false
	}
	return in, true
}

// newChannel picks the channel id (the body's, or a new one) and makes
// its endpoint; or answers and returns false.
func (a *API) newChannel(x *httpapi.Exchange, uaid uuid.UUID, in *registrationInput) (string, bool) {
	if in.chid == uuid.Nil {
		in.chid = uuid.New()
	}
	endpoint, err := a.host.MakeEndpoint(uaid, in.chid, in.key)
	if err != nil {
		// The key was checked: this is a bug or a bad endpoint-url.
		a.log.Error("registration: make endpoint", "error", err)
		x.Fail(errInternal)
		return "", false
	}
	return endpoint, true
}

// undoChannel removes the channel of a registration whose record could
// not be written, on its own deadline: the request's may be what ran out.
func (a *API) undoChannel(uaid, chid uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.StorageTimeout)
	defer cancel()
	if err := a.host.Timed(func() error { return a.store.RemoveChannel(ctx, uaid, chid) }); err != nil {
		a.log.Warn("registration: remove the channel of a failed registration", "error", err)
	}
}

// auth runs the checks of the routes under {uaid} that cost no I/O
// (the package's doc): it returns the uaid, or answers and returns
// false.
func (a *API) auth(c *app.RequestContext, x *httpapi.Exchange) (uuid.UUID, bool) {
	if !a.gate(c, x) {
		return uuid.Nil, false
	}
	if !validRouterType(c.Param("type")) {
		x.Fail(errRouterType)
		return uuid.Nil, false
	}
	secret, ok := bridgeauth.FromAuthorization(string(c.Request.Header.Peek("Authorization")))
	if !ok {
		a.refuse(c, x, errRegNoAuth, authMissing)
		return uuid.Nil, false
	}
	uaid, err := uuid.Parse(c.Param("uaid"))
	if err != nil || uaid == uuid.Nil {
		x.Fail(errRegNoUser)
		return uuid.Nil, false
	}
	if !bridgeauth.Verify(a.cfg.AuthKeys, uaid, secret) {
		a.refuse(c, x, errRegAuth, authInvalid)
		return uuid.Nil, false
	}
	return uaid, true
}

// lookup reads uaid's record and checks that its router type is the
// path's, or answers and returns false. sctx bounds the storage call.
func (a *API) lookup(sctx context.Context, c *app.RequestContext, x *httpapi.Exchange, uaid uuid.UUID) (storage.User, bool) {
	var u storage.User
	var err error
	a.host.Timed(func() error {
		u, err = a.store.GetUser(sctx, uaid)
		if errors.Is(err, storage.ErrNotFound) {
			return nil // an answer, not a storage failure
		}
		return err
	})
	switch {
	case errors.Is(err, storage.ErrNotFound):
		x.Fail(errRegNoUser)
		return u, false
	case err != nil:
		x.Fail(a.host.StorageError("registration: read router record", err))
		return u, false
	case !sameBridge(u.RouterType, c.Param("type")):
		x.Fail(errTypeMismatch)
		return u, false
	}
	return u, true
}

// uaidHandler is a handler of a route under {uaid}, called once the
// checks passed with the record, and the body (withBody routes); sctx
// bounds its storage calls.
type uaidHandler func(sctx context.Context, c *app.RequestContext, x *httpapi.Exchange, u storage.User, body []byte)

// route runs auth, reads the body (withBody) before the record so that
// no storage deadline runs while a client sends, runs lookup, then h.
func (a *API) route(withBody bool, h uaidHandler) httpapi.Handler {
	return func(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
		sctx, cancel := context.WithTimeout(ctx, a.cfg.StorageTimeout)
		defer cancel()
		uaid, ok := a.auth(c, x)
		if !ok {
			return
		}
		var body []byte
		if withBody {
			var e *errno.HTTPError
			if body, e = x.ReadBody(MaxBody, errRegTooLarge); e != nil {
				x.Fail(e)
				return
			}
		}
		if u, ok := a.lookup(sctx, c, x, uaid); ok {
			h(sctx, c, x, u, body)
		}
	}
}

// stored runs one storage call (timed); on failure it answers (503
// errno 201 or 500) and returns false.
func (a *API) stored(x *httpapi.Exchange, what string, call func() error) bool {
	if err := a.host.Timed(call); err != nil {
		x.Fail(a.host.StorageError("registration: "+what, err))
		return false
	}
	return true
}

// settle ends the tracked messages (docs/receipts.md) of a dropped
// registration or channel (chid; uuid.Nil: all of them) as dropped for
// reason. A failure is logged: they settle later, as expired.
func (a *API) settle(ctx context.Context, uaid, chid uuid.UUID, reason storage.DropReason) {
	if err := a.host.Timed(func() error {
		_, err := a.store.SettleUser(ctx, uaid, chid, reason)
		return err
	}); err != nil {
		a.log.Warn("registration: settle the tracked messages of a dropped registration or channel", "reason", reason.String(), "error", err)
	}
}

// handleUpdate is PUT /v1/{type}/{app_id}/registration/{uaid}: the
// bridge has a new token for the client. A gcm record updated through
// an fcm path becomes fcm (the reference stores the path's type). A
// webpush record has no bridge data: nothing is written.
func (a *API) handleUpdate(sctx context.Context, c *app.RequestContext, x *httpapi.Exchange, u storage.User, body []byte) {
	routerType, appID := c.Param("type"), c.Param("app_id")
	in, ok := a.tokenInput(c, x, body)
	if !ok {
		return
	}
	if routerType != storage.RouterWebPush {
		u.RouterType, u.RouterData = routerType, routerData(routerType, appID, &in)
		if !a.stored(x, "update router record", func() error { return a.refresh(sctx, &u) }) {
			return
		}
	}
	httpapi.WriteJSON(c, http.StatusOK, struct{}{})
}

// refresh writes u back as a newer connection: Connect keeps the newest
// ConnectedAt, and refreshes the record's and its channels' idle
// expiry. A concurrent write that won (ErrConflict) is 503: retry.
func (a *API) refresh(ctx context.Context, u *storage.User) error {
	u.ConnectedAt = max(time.Now().UnixMilli(), u.ConnectedAt+1)
	u.LastConnect = 0
	err := a.store.Connect(ctx, *u)
	if errors.Is(err, storage.ErrConflict) {
		return errors.Join(storage.ErrUnavailable, err)
	}
	return err
}

// handleGet is GET /v1/{type}/{app_id}/registration/{uaid}[/]: the
// channel ids. Mobile clients call it daily, so it also refreshes a
// bridged record's expiry, as the reference does; a failed refresh is
// logged, the list still answered.
func (a *API) handleGet(sctx context.Context, c *app.RequestContext, x *httpapi.Exchange, u storage.User, _ []byte) {
	if u.RouterType != storage.RouterWebPush {
		if err := a.host.Timed(func() error { return a.refresh(sctx, &u) }); err != nil {
			a.log.Warn("registration: refresh router record", "error", err)
		}
	}
	var chids []uuid.UUID
	if !a.stored(x, "list channels", func() (err error) { chids, err = a.store.Channels(sctx, u.UAID); return err }) {
		return
	}
	ids := make([]string, len(chids))
	for i, id := range chids {
		ids[i] = id.String()
	}
	httpapi.WriteJSON(c, http.StatusOK, map[string]any{"uaid": u.UAID.String(), "channelIDs": ids})
}

// handleDelete is DELETE /v1/{type}/{app_id}/registration/{uaid}:
// the record, its channels and stored messages go.
func (a *API) handleDelete(sctx context.Context, c *app.RequestContext, x *httpapi.Exchange, u storage.User, _ []byte) {
	if !a.stored(x, "drop user", func() error { return a.store.DropUser(sctx, u.UAID) }) {
		return
	}
	a.settle(sctx, u.UAID, uuid.Nil, storage.DropUserGone)
	httpapi.WriteJSON(c, http.StatusOK, struct{}{})
}

// handleSubscribe is POST .../registration/{uaid}/subscription: a
// new channel (the body's channelID, or a new one), with a v2 endpoint
// when the body has a key. The body may be empty.
func (a *API) handleSubscribe(sctx context.Context, c *app.RequestContext, x *httpapi.Exchange, u storage.User, body []byte) {
	in, e := parseRegistrationBody(body, u.RouterType, false)
	if e != nil {
		x.Fail(e)
		return
	}
	if !a.roomForChannel(sctx, x, u.UAID, in.chid) {
		return
	}
	endpoint, ok := a.newChannel(x, u.UAID, &in)
	if !ok {
		return
	}
	if !a.stored(x, "add channel", func() error { return a.store.AddChannel(sctx, u.UAID, in.chid) }) {
		return
	}
	httpapi.WriteJSON(c, http.StatusOK, map[string]string{"channelID": in.chid.String(), "endpoint": endpoint})
}

// roomForChannel reports whether uaid may subscribe chid under
// bridge-max-channels: below the limit, or chid (given in the body) is
// one it has already; else it answers 429 and returns false. It counts
// up to the limit: one storage read per 5000 channels.
func (a *API) roomForChannel(sctx context.Context, x *httpapi.Exchange, uaid, chid uuid.UUID) bool {
	limit := a.cfg.MaxChannels
	if limit == 0 {
		return true
	}
	var n int
	if !a.stored(x, "count channels", func() (err error) { n, err = a.store.CountChannels(sctx, uaid, limit); return err }) {
		return false
	}
	if n < limit {
		return true
	}
	has := false
	if chid != uuid.Nil && !a.stored(x, "read channel", func() (err error) { has, err = a.store.HasChannel(sctx, uaid, chid); return err }) {
		return false
	}
	if !has {
		x.Fail(errRegChannels)
	}
	return has
}

// handleUnsubscribe is DELETE .../registration/{uaid}/subscription/{chid}.
// A channel id that is not a UUID, or not subscribed, is 410 errno 106,
// as in the reference.
func (a *API) handleUnsubscribe(sctx context.Context, c *app.RequestContext, x *httpapi.Exchange, u storage.User, _ []byte) {
	chid, err := uuid.Parse(c.Param("chid"))
	if err != nil || chid == uuid.Nil {
		x.Fail(errNoChannel)
		return
	}
	var has bool
	if !a.stored(x, "read channel", func() (err error) { has, err = a.store.HasChannel(sctx, u.UAID, chid); return err }) {
		return
	}
	if !has {
		x.Fail(errNoChannel)
		return
	}
	if !a.stored(x, "remove channel", func() error { return a.store.RemoveChannel(sctx, u.UAID, chid) }) {
		return
	}
	a.settle(sctx, u.UAID, chid, storage.DropUnsubscribed)
	httpapi.WriteJSON(c, http.StatusOK, struct{}{})
}
