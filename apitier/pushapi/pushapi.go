package pushapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/apitier/sender"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/storage"
)

// Service is what the routes need of the sender.
type Service interface {
	Accept(ctx context.Context, r sender.Request) (storage.Push, error)
	Get(ctx context.Context, id uuid.UUID) (storage.Push, error)
	List(ctx context.Context, state storage.PushState, cursor string, limit int) ([]storage.Push, string, error)
}

var _ Service = (*sender.Sender)(nil)

// API is the push API's routes. Goroutine-safe once the node serves
// them; SetService is called before.
type API struct {
	keys   []string
	pushes Service
	log    *slog.Logger
}

// New returns the routes, open to keys (push-api-keys; none closes
// them). Without a service (SetService) they answer 503.
func New(keys []string, log *slog.Logger) *API {
	return &API{keys: keys, log: log}
}

// SetService wires the sender the routes use; call before the node
// serves them.
func (a *API) SetService(ps Service) { a.pushes = ps }

// Route labels of the push API (autoendpoint_requests_total{route}).
const (
	routePost = "push_post"
	routeGet  = "push_get"
	routeList = "push_list"
)

// Routes lists the push API's routes.
func (a *API) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Path: "/push", Label: routePost, Handle: a.handlePost},
		{Method: http.MethodGet, Path: "/push/:id", Label: routeGet, Handle: a.handleGet},
		{Method: http.MethodGet, Path: "/push", Label: routeList, Handle: a.handleList},
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
	errPushAuth        = errno.InvalidAuth.HTTPError("Missing or invalid push API key")
	errPushUnavailable = errno.RetryBackoff.HTTPError("Database error while saving the push")
	errPushOff         = &errno.HTTPError{Status: http.StatusServiceUnavailable, Errno: errno.None, Message: "The push API is not enabled on this node"}
	errPushNotFound    = errno.InvalidEndpoint.HTTPError("No such push")
	errPushTooLarge    = errno.PayloadTooLarge.HTTPError("The request body is over 32 KiB")
)

// authorized checks the bearer key against every configured one.
func (a *API) authorized(c *app.RequestContext) bool {
	h := string(c.Request.Header.Peek("Authorization"))
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return false
	}
	match := 0
	for _, k := range a.keys {
		match |= subtle.ConstantTimeCompare([]byte(key), []byte(k))
	}
	return match == 1
}

// gate answers the request when it cannot go on (no service, no or a
// wrong key) and reports whether it may.
func (a *API) gate(c *app.RequestContext, x httpapi.Exchange) bool {
	if !a.authorized(c) {
		x.Fail(errPushAuth)
		c.Response.Header.Set("WWW-Authenticate", `Bearer realm="push"`)
		return false
	}
	if a.pushes == nil {
		x.Fail(errPushOff)
		return false
	}
	return true
}

// pushBody is the seed's POST /push body.
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

func (a *API) handlePost(ctx context.Context, c *app.RequestContext, x httpapi.Exchange) {
	if !a.gate(c, x) {
		return
	}
	body, err := x.ReadBody(MaxBody, errPushTooLarge)
	if err != nil {
		x.Fail(err)
		return
	}
	req, herr := parseBody(body)
	if herr != nil {
		x.Fail(herr)
		return
	}
	p, err2 := a.pushes.Accept(ctx, req)
	var fe *sender.FieldError
	switch {
	case errors.As(err2, &fe):
		x.Fail(httpapi.BadRequest(fe.Error()))
		return
	case err2 != nil:
		a.storageError(x, "accept push", err2)
		return
	}
	c.Response.Header.Set("Location", "/push/"+p.ID.String())
	c.SetStatusCode(http.StatusCreated)
}

// parseBody decodes the seed's POST /push body: one JSON object with
// only the seed's fields, each a string or null (null and absent are "").
// The field rules are the sender's (sender.Sender.Accept).
func parseBody(body []byte) (sender.Request, *errno.HTTPError) {
	var b pushBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return sender.Request{}, httpapi.BadRequest("Invalid JSON body: " + httpapi.JSONProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return sender.Request{}, httpapi.BadRequest("Invalid JSON body: more than one value")
	}
	return sender.Request{
		Platform: str(b.Platform), PrototypeKey: str(b.MessagePrototypeKey), PushKey: str(b.PushKey),
		Message: str(b.Message), CronExpression: str(b.CronExpression),
	}, nil
}

// invalidMessages are the 400 answers to what the store refuses
// (storage.ErrInvalid), by storageError's op: the sender checks the
// fields first, so only a cursor a client made up should get here.
var invalidMessages = map[string]string{
	"list pushes": "cursor: not a cursor this API gave",
	"accept push": "Invalid push",
	"get push":    "Invalid push id",
}

// storageError answers a failed sender call: 404, 400 or 503.
func (a *API) storageError(x httpapi.Exchange, op string, err error) {
	if errors.Is(err, storage.ErrNotFound) {
		x.Fail(errPushNotFound)
		return
	}
	if errors.Is(err, storage.ErrInvalid) {
		// The store's text names the backend and its internals: the
		// client gets what it can act on, the log the rest.
		a.log.Info("push API: the store refused the request", "op", op, "error", err)
		x.Fail(httpapi.BadRequest(invalidMessages[op]))
		return
	}
	a.log.Warn("push API storage error", "op", op, "error", err)
	x.Fail(errPushUnavailable)
}

func (a *API) handleGet(ctx context.Context, c *app.RequestContext, x httpapi.Exchange) {
	if !a.gate(c, x) {
		return
	}
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		x.Fail(errPushNotFound)
		return
	}
	p, err := a.pushes.Get(ctx, id)
	if err != nil {
		a.storageError(x, "get push", err)
		return
	}
	httpapi.WriteJSON(c, http.StatusOK, view(&p))
}

func (a *API) handleList(ctx context.Context, c *app.RequestContext, x httpapi.Exchange) {
	if !a.gate(c, x) {
		return
	}
	state := storage.PushState(c.Query("state"))
	if !state.Valid() {
		x.Fail(httpapi.BadRequest("state: must be one of SCHEDULED, PENDING, IN_MEMORY, RETRY, GIVEN_UP, SENT, FAILED"))
		return
	}
	limit := 100
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > storage.MaxPushPage {
			x.Fail(httpapi.BadRequest("limit: must be 1.." + strconv.Itoa(storage.MaxPushPage)))
			return
		}
		limit = n
	}
	ps, next, err := a.pushes.List(ctx, state, c.Query("cursor"), limit)
	if err != nil {
		a.storageError(x, "list pushes", err)
		return
	}
	out := make([]map[string]any, len(ps))
	for i := range ps {
		out[i] = view(&ps[i])
	}
	var cursor any
	if next != "" {
		cursor = next
	}
	httpapi.WriteJSON(c, http.StatusOK, map[string]any{"pushes": out, "next": cursor})
}

// view is a push as the API shows it: the seed's field names, times
// in RFC 3339 (UTC, ms).
func view(p *storage.Push) map[string]any {
	var cron any
	if p.CronExpression != "" {
		cron = p.CronExpression
	}
	attempts := make([]map[string]any, len(p.Attempts))
	for i, a := range p.Attempts {
		attempts[i] = map[string]any{
			"n": a.N, "status": a.Status, "node": a.Node, "started": rfc3339(a.Started),
			"called": nullableTime(a.Called), "millis": a.Millis,
			"errorType": nullable(string(a.ErrorType)), "providerCode": nullableInt(a.ProviderCode),
			"providerReason": nullable(a.ProviderReason), "providerMessage": nullable(a.ProviderMessage),
			"cause": nullable(a.Cause), "dedupKey": nullable(a.DedupKey),
		}
	}
	return map[string]any{
		"id": p.ID.String(), "provider": p.Provider, "platform": p.Platform, "messagePrototypeKey": p.PrototypeKey,
		"pushKey": p.PushKey, "message": p.Message, "cronExpression": cron, "state": p.State,
		"at": rfc3339(p.At), "created": rfc3339(p.Created), "updated": rfc3339(p.Updated),
		"attempts": attempts,
	}
}

func rfc3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullableTime is ms in RFC 3339, or null for 0 (not happened).
func nullableTime(ms int64) any {
	if ms == 0 {
		return nil
	}
	return rfc3339(ms)
}

func nullableInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}
