package pushapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/storage"
)

// What a client sees (docs/sender.md, "Clients"): its own pushes; an
// admin every push, the bridged ones included (a WebPush notification to
// an FCM or APNs phone, whose pushKey is the phone's device token), with
// the device token masked unless it asks ?reveal=pushKey. A push of no
// client (Client "": bridged, or of a key before clients) is an admin's
// only.

// visible reports whether cl may see p.
func visible(cl *clients.Client, p *storage.Push) bool {
	return cl.Can(clients.Admin) || p.Client != "" && p.Client == cl.Name
}

// reveal reads ?reveal=: absent, or "pushKey" (an admin's only).
func reveal(c *app.RequestContext, cl *clients.Client) (bool, *errno.HTTPError) {
	switch v := c.Query("reveal"); {
	case !c.QueryArgs().Has("reveal"):
		return false, nil
	case v != "pushKey":
		return false, httpapi.BadRequest("reveal: only pushKey can be revealed")
	case !cl.Can(clients.Admin):
		return false, forbidden(cl, clients.Admin)
	}
	return true, nil
}

// maskToken hides a device token but its first and last 4 characters;
// one of 16 or fewer characters is hidden whole.
func maskToken(t string) string {
	if len(t) <= 16 {
		return strings.Repeat("*", len(t))
	}
	return t[:4] + strings.Repeat("*", len(t)-8) + t[len(t)-4:]
}

// readGate is gate for the read routes, which take the query
// parameters params (reveal among them): another is refused, after the
// key (a request without a valid key learns nothing of the route).
func (a *API) readGate(c *app.RequestContext, x *httpapi.Exchange, params ...string) (clients.Client, bool, bool) {
	cl, ok := a.gate(c, x, clients.Read)
	if !ok {
		return cl, false, false
	}
	if herr := httpapi.KnownQuery(c, params...); herr != nil {
		x.Fail(herr)
		return cl, false, false
	}
	show, herr := reveal(c, &cl)
	if herr != nil {
		x.Fail(herr)
		return cl, false, false
	}
	return cl, show, true
}

// getOwn reads push id for cl: 404 (answered) when it is not there, or
// not cl's to see.
func (a *API) getOwn(ctx context.Context, x *httpapi.Exchange, cl *clients.Client, idText string, op storageOp) (storage.Push, bool) {
	id, err := uuid.Parse(idText)
	if err != nil {
		x.Fail(errPushNotFound)
		return storage.Push{}, false
	}
	p, err := a.pushes.Get(ctx, id)
	if err != nil {
		a.storageError(x, op, err)
		return storage.Push{}, false
	}
	if !visible(cl, &p) {
		x.Fail(errPushNotFound) // another's: as if there were none
		return storage.Push{}, false
	}
	return p, true
}

func (a *API) handleGet(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
	cl, show, ok := a.readGate(c, x, "reveal")
	if !ok {
		return
	}
	if p, ok := a.getOwn(ctx, x, &cl, c.Param("id"), opGet); ok {
		httpapi.WriteJSON(c, http.StatusOK, view(&p, show))
	}
}

// handleList pages through the pushes in a state (?state=) or to a
// device key (?pushKey=), the client's own only. The store lists a state
// for every client, so a page may hold fewer than limit of the client's
// pushes (none, even) while next still pages on.
func (a *API) handleList(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
	cl, show, ok := a.readGate(c, x, "state", "pushKey", "reveal", "cursor", "limit")
	if !ok {
		return
	}
	// Present and empty is not absent: "?state=&pushKey=k" is refused
	// as the schema says, not read as a search by key.
	args := c.QueryArgs()
	state, pushKey := storage.PushState(c.Query("state")), c.Query("pushKey")
	switch byKey := args.Has("pushKey"); {
	case byKey && args.Has("state"):
		x.Fail(httpapi.BadRequest("give state or pushKey, not both"))
		return
	case !byKey && !state.Valid():
		x.Fail(httpapi.BadRequest("state: must be one of SCHEDULED, PENDING, IN_MEMORY, RETRY, GIVEN_UP, SENT, FAILED (or give pushKey)"))
		return
	case byKey && (pushKey == "" || len(pushKey) > storage.MaxPushField):
		x.Fail(httpapi.BadRequest("pushKey: must be 1 to " + strconv.Itoa(storage.MaxPushField) + " bytes"))
		return
	}
	limit := 100
	if args.Has("limit") {
		n, err := strconv.Atoi(c.Query("limit"))
		if err != nil || n < 1 || n > storage.MaxPushPage {
			x.Fail(httpapi.BadRequest("limit: must be 1.." + strconv.Itoa(storage.MaxPushPage)))
			return
		}
		limit = n
	}
	listing := "state=" + string(state)
	if pushKey != "" {
		listing = "pushKey=" + pushKey
	}
	from, ok := a.cursors.open(cl.Name, listing, c.Query("cursor"))
	if !ok {
		x.Fail(errBadCursor)
		return
	}
	ps, next, err := a.list(ctx, &cl, state, pushKey, from, limit)
	if err != nil {
		a.storageError(x, opList, err)
		return
	}
	out := make([]map[string]any, 0, len(ps))
	for i := range ps {
		if visible(&cl, &ps[i]) {
			out = append(out, view(&ps[i], show))
		}
	}
	var cursor any
	if next != "" {
		sealed, err := a.cursors.seal(cl.Name, listing, next)
		if err != nil {
			a.log.Error("push API: a list cursor not sealed", "error", err)
			x.Fail(errno.Unknown.HTTPError(""))
			return
		}
		cursor = sealed
	}
	httpapi.WriteJSON(c, http.StatusOK, map[string]any{"pushes": out, "next": cursor})
}

// errBadCursor answers a cursor that does not open (cursor.go).
var errBadCursor = httpapi.BadRequest("cursor: not a cursor this API gave this client for this listing " +
	"(or given before a key change): list again without it")

// list reads a page of the pushes in state, or to pushKey when it is not
// "" (the client's own; an admin's, every client's), from the store's
// cursor from.
func (a *API) list(ctx context.Context, cl *clients.Client, state storage.PushState, pushKey, from string, limit int) ([]storage.Push, string, error) {
	if pushKey == "" {
		return a.pushes.List(ctx, state, from, limit)
	}
	owner := cl.Name
	if cl.Can(clients.Admin) {
		owner = storage.AllClients
	}
	sctx, cancel := a.storageCtx(ctx)
	defer cancel()
	return a.store.PushesByKey(sctx, owner, pushKey, from, limit)
}

// view is a push as the API shows it: the Java service's field names
// (docs/openapi.yaml), times in RFC 3339 (UTC, ms); a bridged push's
// device token masked unless showToken, in its pushKey and wherever its
// attempts' texts hold it (the providers and the sender keep it out of
// them, but an attempt written before they did, or by a provider that
// slipped, may not).
func view(p *storage.Push, showToken bool) map[string]any {
	var cron any
	if p.CronExpression != "" {
		cron = p.CronExpression
	}
	pushKey, text := p.PushKey, func(s string) any { return nullable(s) }
	if p.Bridge != nil && !showToken {
		token, masked := p.PushKey, maskToken(p.PushKey)
		pushKey = masked
		text = func(s string) any { return nullable(provider.HideToken(s, token, masked)) }
	}
	attempts := make([]map[string]any, len(p.Attempts))
	for i, a := range p.Attempts {
		attempts[i] = map[string]any{
			"n": a.N, "status": a.Status, "node": a.Node, "started": rfc3339(a.Started),
			"called": nullableTime(a.Called), "millis": a.Millis,
			"errorType": nullable(string(a.ErrorType)), "providerCode": nullableInt(a.ProviderCode),
			"providerReason": text(a.ProviderReason), "providerMessage": text(a.ProviderMessage),
			"cause": text(a.Cause), "dedupKey": nullable(a.DedupKey),
		}
	}
	return map[string]any{
		"id": p.ID.String(), "provider": p.Provider, "platform": p.Platform, "messagePrototypeKey": p.PrototypeKey,
		"pushKey": pushKey, "message": p.Message, "cronExpression": cron, "state": p.State,
		"at": rfc3339(p.At), "created": rfc3339(p.Created), "updated": rfc3339(p.Updated),
		"client": nullable(p.Client), "attempts": attempts,
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
