// Package megaphone is the endpoint node's broadcasts API, Megaphone's
// own, so a self-hoster needs no Megaphone and a publisher written for
// Megaphone (Remote Settings' kinto-megaphone) works unchanged:
//
//	PUT /v1/broadcasts/{broadcaster}/{channel}  body: the new version (text)
//	    201 {"code":201} a new broadcast, 200 {"code":200} a new version
//	GET /v1/broadcasts
//	    200 {"code":200,"broadcasts":{"broadcaster/channel":"version",...}}
//
// Both need "Authorization: Bearer <token>": a token of broadcast-tokens
// (publish and read) or, for the GET, of broadcast-reader-tokens; no
// token configured turns both off (401). The versions are stored (one
// storage table every connection node polls), so every node sees them;
// the GET serves connection nodes of another deployment, or the
// reference's autoconnect, as their megaphone-api-url.
package megaphone

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/storage"
)

// Store is what the routes read and write.
type Store interface {
	PutBroadcast(ctx context.Context, id, version string) error
	Broadcasts(ctx context.Context) (map[string]string, error)
}

// Host is what the routes use of the endpoint node that serves them.
type Host interface {
	// Timed runs one storage call, timed and counted in the node's
	// storage metrics.
	Timed(call func() error) error
}

// Config of the routes: the endpoint node's settings they read.
type Config struct {
	// Tokens are broadcast-tokens, ReaderTokens broadcast-reader-tokens.
	Tokens, ReaderTokens []string
	// StorageTimeout bounds a request's storage calls.
	StorageTimeout time.Duration
}

// API is the broadcast routes. Goroutine-safe.
type API struct {
	cfg   Config
	store Store
	host  Host
	log   *slog.Logger
}

// New makes the routes.
func New(cfg Config, store Store, host Host, log *slog.Logger) *API {
	return &API{cfg: cfg, store: store, host: host, log: log}
}

// Routes lists the routes, in the order the node registers them.
func (a *API) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPut, Path: "/v1/broadcasts/:broadcaster/:channel", Label: "broadcast_publish", Handle: a.publish},
		{Method: http.MethodGet, Path: "/v1/broadcasts", Label: "broadcasts", Handle: a.list},
	}
}

// The bounds of a broadcast id's parts are Megaphone's own (its
// table's columns), so any id a publisher written for Megaphone sends
// fits, and each part can be checked, and documented, on its own: with
// the '/', an id stays within storage.MaxBroadcastLen.
const (
	maxBroadcaster = 64
	maxChannel     = 128
)

var (
	errAuth    = errno.InvalidAuth.HTTPError("Invalid Authentication")
	errVersion = errno.Unnumbered(http.StatusBadRequest, "the broadcaster must be 1 to 64 visible ASCII characters, the channel 1 to 128, the version 1 to 256")
	errStorage = errno.RetryBackoff.HTTPError("Database error")
)

// authorized reports whether the request's bearer token is one of
// Tokens (or, with readOnly, of ReaderTokens too). Tokens compare in
// constant time.
func (a *API) authorized(c *app.RequestContext, readOnly bool) bool {
	auth := string(c.Request.Header.Peek("Authorization"))
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || tok == "" {
		return false
	}
	match := false
	check := func(list []string) {
		for _, want := range list {
			if subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1 {
				match = true
			}
		}
	}
	check(a.cfg.Tokens)
	if readOnly {
		check(a.cfg.ReaderTokens)
	}
	return match
}

func refuse(c *app.RequestContext, x *httpapi.Exchange) {
	x.Fail(errAuth)
	c.Response.Header.Set("WWW-Authenticate", `Bearer realm="broadcasts"`)
}

// publish sets a broadcast's version (Megaphone's PUT).
func (a *API) publish(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
	if !a.authorized(c, false) {
		refuse(c, x)
		return
	}
	broadcaster, channel := c.Param("broadcaster"), c.Param("channel")
	id := broadcaster + "/" + channel
	// The body, whole; longer than a version may be is 400, as any
	// invalid version.
	b, e := x.ReadBody(storage.MaxBroadcastLen, errVersion)
	if e != nil {
		x.Fail(e)
		return
	}
	version := string(b)
	if broadcaster == "" || len(broadcaster) > maxBroadcaster || channel == "" || len(channel) > maxChannel ||
		storage.ValidateBroadcast(id, version) != nil {
		x.Fail(errVersion)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.StorageTimeout)
	defer cancel()
	// A read first, for Megaphone's 201 on a new broadcast: this is an
	// operator's route, not the push path.
	var current map[string]string
	err := a.host.Timed(func() (err error) {
		current, err = a.store.Broadcasts(ctx)
		return err
	})
	if err == nil {
		err = a.host.Timed(func() error { return a.store.PutBroadcast(ctx, id, version) })
	}
	if err != nil {
		a.log.Warn("publish broadcast: storage", "error", err)
		x.Fail(errStorage)
		return
	}
	code := http.StatusOK
	if _, known := current[id]; !known {
		code = http.StatusCreated
	}
	a.log.Info("broadcast published", "id", id, "version", version)
	httpapi.WriteJSON(c, code, map[string]int{"code": code})
}

// list lists every broadcast (Megaphone's GET).
func (a *API) list(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
	if !a.authorized(c, true) {
		refuse(c, x)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.StorageTimeout)
	defer cancel()
	var all map[string]string
	err := a.host.Timed(func() (err error) {
		all, err = a.store.Broadcasts(ctx)
		return err
	})
	if err != nil {
		a.log.Warn("list broadcasts: storage", "error", err)
		x.Fail(errStorage)
		return
	}
	b, _ := json.Marshal(map[string]any{"code": http.StatusOK, "broadcasts": all})
	c.Data(http.StatusOK, "application/json", b)
}
