package pushapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/ratelimit"
	"github.com/autopush-go/autopush/storage"
)

// Service is what the routes need of the sender.
type Service interface {
	Accept(ctx context.Context, r sender.Request) (storage.Push, error)
	Get(ctx context.Context, id uuid.UUID) (storage.Push, error)
	List(ctx context.Context, state storage.PushState, cursor string, limit int) ([]storage.Push, string, error)
	// Withdraw finishes a push that has not reached its provider (FAILED
	// with cause); false when it is final or its call is in flight.
	Withdraw(ctx context.Context, id uuid.UUID, cause string) (bool, error)
}

var _ Service = (*sender.Sender)(nil)

// Store is what the routes read and write themselves: the indexes of the
// clients' pushes and their idempotency keys (storage.PushStore).
type Store interface {
	PushesByKey(ctx context.Context, client, pushKey, cursor string, limit int) ([]storage.Push, string, error)
	CountOpen(ctx context.Context, client string, limit int) (int, error)
	ClaimIdempotencyKey(ctx context.Context, client, key string, id uuid.UUID, ttl time.Duration) (uuid.UUID, error)
	ReleaseIdempotencyKey(ctx context.Context, client, key string, id uuid.UUID) error
}

// Config is what the node's settings say of the push API.
type Config struct {
	// Keys are push-api-keys: each an admin client, key-1, key-2, ...
	Keys []string
	// ClientsFile is push-clients-file ("": none), reloaded by Reload
	// and, every ClientsPoll (0: never), when it changed.
	ClientsFile string
	ClientsPoll time.Duration
	// StorageTimeout bounds each of the routes' own storage calls.
	StorageTimeout time.Duration
	// CursorKey (CursorKeySize bytes) seals the listings' cursors
	// (cursor.go). Nodes behind one load balancer need the same key: the
	// node derives it from CRYPTO_KEY's first key (CursorKey).
	CursorKey []byte
}

// API is the push API's routes. Goroutine-safe once the node serves
// them; SetService is called before.
type API struct {
	cfg     Config
	clients *clients.Registry
	store   Store
	pushes  Service
	log     *slog.Logger
	quotas  *ratelimit.ClientQuotas
	cursors *cursors
	metrics *apiMetrics
	stop    context.CancelFunc
	watched sync.WaitGroup
	// named is each key's client name at the last load, under loading (a
	// poll and SIGHUP may reload at once).
	loading sync.Mutex
	named   map[[32]byte]string
}

// New loads the clients (push-api-keys and push-clients-file: none
// closes the routes, 401) and returns the routes, which use store for
// their own storage calls. Without a service (SetService: a node that
// configures no provider) they answer 503 saying so.
func New(cfg Config, store Store, log *slog.Logger) (*API, error) {
	cur, err := newCursors(cfg.CursorKey)
	if err != nil {
		return nil, err
	}
	reg, err := clients.Load(cfg.ClientsFile, cfg.Keys)
	if err != nil {
		return nil, err
	}
	a := &API{cfg: cfg, clients: reg, store: store, log: log, cursors: cur, metrics: newMetrics()}
	a.quotas = ratelimit.NewClientQuotas(a.metrics.client)
	if len(cfg.Keys) > 0 {
		log.Warn("push-api-keys is kept for compatibility: each key is an admin client without quotas (key-1, key-2, ...); "+
			"give each team a client of its own in push-clients-file (tools/cmd/pushclient mints keys)", "keys", len(cfg.Keys))
	}
	a.loaded()
	return a, nil
}

// loaded takes the clients in use: their quotas and metrics, and a log
// line naming them. A key whose client was renamed is warned of: what
// the old name made stays the old name's (docs/sender.md, "A client is
// its name").
func (a *API) loaded() {
	a.loading.Lock()
	defer a.loading.Unlock()
	set := a.clients.Clients()
	names := make([]string, 0, set.Len())
	named := make(map[[32]byte]string, set.Len())
	for _, c := range set.List() {
		a.quotas.Of(c.Name, c.Rate, c.Outstanding)
		names = append(names, c.Name)
		named[c.KeyHash] = c.Name
		if was, ok := a.named[c.KeyHash]; ok && was != c.Name {
			a.log.Warn("push API client renamed: a new client to the push API; its pushes and Idempotency-Keys stay the old name's",
				"was", was, "now", c.Name)
		}
	}
	a.named = named
	if len(names) == 0 && !a.clients.HasFile() {
		// Neither push-api-keys nor push-clients-file: the push API is
		// not used here (a WebPush-only node), nothing to warn of.
		a.log.Info("push API closed: no push-api-keys or push-clients-file, every key is answered 401")
		return
	}
	if len(names) == 0 {
		// Only "clients: {}" gets here (clients.ErrNoClients refuses
		// every other file naming none): said on purpose, but loud.
		a.log.Warn("push API clients loaded: none, every key is answered 401 (push-clients-file says \"clients: {}\")")
		return
	}
	a.log.Info("push API clients loaded", "clients", names)
}

// SetService wires the sender the routes use; call before the node
// serves them.
func (a *API) SetService(ps Service) { a.pushes = ps }

// Start watches push-clients-file for changes until Close.
func (a *API) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	a.watched.Add(1)
	go func() {
		defer a.watched.Done()
		a.clients.Watch(ctx, a.cfg.ClientsPoll, func(err error) { a.reloaded(err, "file changed") })
	}()
}

// Close stops watching the file.
func (a *API) Close() {
	if a.stop != nil {
		a.stop()
		a.watched.Wait()
	}
}

// Reload reads push-clients-file again (SIGHUP); on any error the clients
// in use stay.
func (a *API) Reload() {
	if !a.clients.HasFile() {
		return
	}
	a.reloaded(a.clients.Reload(), "SIGHUP")
}

// reloaded logs and counts a reload's outcome.
func (a *API) reloaded(err error, why string) {
	if err != nil {
		a.metrics.reloadNo.Inc()
		a.log.Error("push API clients not reloaded", "why", why, "error", err)
		return
	}
	a.metrics.reloadOK.Inc()
	a.loaded()
}

// Route labels of the push API (autoendpoint_requests_total{route}).
const (
	routePost   = "push_post"
	routeGet    = "push_get"
	routeList   = "push_list"
	routeCancel = "push_cancel"
)

// Routes lists the push API's routes.
func (a *API) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Path: "/push", Label: routePost, Handle: a.handlePost},
		{Method: http.MethodGet, Path: "/push/:id", Label: routeGet, Handle: a.handleGet},
		{Method: http.MethodGet, Path: "/push", Label: routeList, Handle: a.handleList},
		{Method: http.MethodDelete, Path: "/push/:id", Label: routeCancel, Handle: a.handleCancel},
	}
}

// MaxBody bounds a POST /push body: the longest message escaped as
// JSON, with room for the other fields.
const MaxBody = 32 << 10

// Serves reports whether a request URI is the push API's: the node reads
// a body of at most MaxBody for it.
func Serves(uri []byte) bool {
	return bytes.Equal(uri, []byte("/push")) || bytes.HasPrefix(uri, []byte("/push?"))
}

var (
	errPushAuth = errno.InvalidAuth.HTTPError("Missing or invalid push API key")
	// A node runs no sender when it configures no provider (a WebPush-only
	// node, sender/node.BuildConfigured): the answer says what to set.
	errPushOff = errno.Unnumbered(http.StatusServiceUnavailable,
		"No push provider is configured on this node: set swrve-keys-file, fcm-apps, apns-apps or log-provider-file (docs/sender.md, Providers)")
	errPushNotFound = errno.InvalidEndpoint.HTTPError("No such push")
	errPushTooLarge = errno.PayloadTooLarge.HTTPError("The request body is over 32 KiB")
)

// forbidden is the 403 of a client without scope.
func forbidden(c *clients.Client, s clients.Scope) *errno.HTTPError {
	return errno.Unnumbered(http.StatusForbidden, fmt.Sprintf("client %s has no %s scope", c.Name, s))
}

// client returns the client whose bearer key the request carries.
func (a *API) client(c *app.RequestContext) (clients.Client, bool) {
	h := string(c.Request.Header.Peek("Authorization"))
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return clients.Client{}, false
	}
	return a.clients.Clients().Lookup(key)
}

// gate answers the request when it cannot go on (no or a wrong key, no
// scope for it, no service) and returns its client when it may.
func (a *API) gate(c *app.RequestContext, x *httpapi.Exchange, scope clients.Scope) (clients.Client, bool) {
	cl, ok := a.client(c)
	if !ok {
		x.Fail(errPushAuth)
		c.Response.Header.Set("WWW-Authenticate", `Bearer realm="push"`)
		return cl, false
	}
	if !cl.Can(scope) {
		x.Fail(forbidden(&cl, scope))
		return cl, false
	}
	if a.pushes == nil || a.store == nil {
		x.Fail(errPushOff)
		return cl, false
	}
	return cl, true
}

// pushBody is POST /push's body (docs/sender.md), its field names those
// of the Java service this sender replaces, so that its clients keep
// their requests.
type pushBody struct {
	Platform            *string `json:"platform"`
	MessagePrototypeKey *string `json:"messagePrototypeKey"`
	PushKey             *string `json:"pushKey"`
	Message             *string `json:"message"`
	CronExpression      *string `json:"cronExpression"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// parseBody decodes POST /push's body: one JSON object with only
// pushBody's fields, each a string or null (null and absent are "").
// The field rules are the sender's (sender.Sender.Accept).
func parseBody(body []byte) (sender.Request, *errno.HTTPError) {
	var b pushBody
	if err := httpapi.DecodeObject(body, &b, true); err != nil {
		return sender.Request{}, httpapi.BadRequest("Invalid JSON body: " + err.Error())
	}
	return sender.Request{
		Platform: str(b.Platform), PrototypeKey: str(b.MessagePrototypeKey), PushKey: str(b.PushKey),
		Message: str(b.Message), CronExpression: str(b.CronExpression),
	}, nil
}

// storageOp is one of the routes' storage operations, with what a
// failure of it answers: a 503 (errno 201) saying what the route was
// doing when the store is unavailable (a read never says it was saving),
// and a 400 when the store refused the request (storage.ErrInvalid: the
// sender checks the fields and the cursors are sealed, so only a bug
// should get there).
type storageOp struct{ name, unavailable, invalid string }

var (
	opAccept = storageOp{"accept push", "Database error while saving the push", "Invalid push"}
	opClaim  = storageOp{"claim idempotency key", "Database error while saving the push's Idempotency-Key", "Invalid Idempotency-Key"}
	opCount  = storageOp{"count open", "Database error while counting the client's pushes not yet sent", "Invalid request"}
	opGet    = storageOp{"get push", "Database error while reading the push", "Invalid push id"}
	opCancel = storageOp{"cancel push", "Database error while cancelling the push", "Invalid push id"}
	opList   = storageOp{"list pushes", "Database error while reading pushes", "cursor: the store refused it: list again without it"}
)

// storageError answers a failed storage call of op: 404, 400 or 503.
func (a *API) storageError(x *httpapi.Exchange, op storageOp, err error) {
	if errors.Is(err, storage.ErrNotFound) {
		x.Fail(errPushNotFound)
		return
	}
	if errors.Is(err, storage.ErrInvalid) {
		// The store's text names the backend and its internals: the
		// client gets what it can act on, the log the rest.
		a.log.Info("push API: the store refused the request", "op", op.name, "error", err)
		x.Fail(httpapi.BadRequest(op.invalid))
		return
	}
	a.log.Warn("push API storage error", "op", op.name, "error", err)
	x.Fail(errno.RetryBackoff.HTTPError(op.unavailable))
}

// storageCtx bounds one of the routes' own storage calls.
func (a *API) storageCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.cfg.StorageTimeout)
}
