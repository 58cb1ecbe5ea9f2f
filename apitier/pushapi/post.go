package pushapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
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

// IdempotencyTTL is how long an Idempotency-Key names its first push.
const IdempotencyTTL = 24 * time.Hour

// tooMany is a 429: over a quota, retry after retryAfter seconds.
func tooMany(x *httpapi.Exchange, c *app.RequestContext, msg string, retryAfter int) {
	x.Fail(errno.Unnumbered(http.StatusTooManyRequests, msg))
	c.Response.Header.Set("Retry-After", strconv.Itoa(retryAfter))
}

// idempotencyKey reads the Idempotency-Key header: "" when absent, 1 to
// 255 bytes of visible ASCII otherwise.
func idempotencyKey(c *app.RequestContext) (string, *errno.HTTPError) {
	v := c.Request.Header.Peek("Idempotency-Key")
	if v == nil {
		return "", nil
	}
	if len(v) == 0 || len(v) > storage.MaxIdempotencyKey {
		return "", httpapi.BadRequest("Idempotency-Key: must be 1 to 255 visible ASCII characters")
	}
	for _, b := range v {
		if b < 0x21 || b > 0x7e {
			return "", httpapi.BadRequest("Idempotency-Key: must be 1 to 255 visible ASCII characters")
		}
	}
	return string(v), nil
}

// handlePost accepts a push (docs/sender.md, "Clients"): the client's
// rate, then its outstanding quota (429 and nothing stored when over
// either), then its Idempotency-Key (a repeat gets the first push's
// Location), then the sender stores it.
func (a *API) handlePost(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
	cl, ok := a.gate(c, x, clients.Send)
	if !ok {
		if cl.Name != "" {
			a.metrics.post(cl.Name, postRefused)
		}
		return
	}
	result := a.post(ctx, c, x, &cl)
	a.metrics.post(cl.Name, result)
}

// post serves an authorized POST /push and returns its result (mPosts).
func (a *API) post(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange, cl *clients.Client) string {
	body, herr := x.ReadBody(MaxBody, errPushTooLarge)
	if herr != nil {
		x.Fail(herr)
		return postRefused
	}
	req, herr := parseBody(body)
	var key string
	if herr == nil {
		key, herr = idempotencyKey(c)
	}
	if herr != nil {
		x.Fail(herr)
		return postRefused
	}
	q := a.quotas.Of(cl.Name, cl.Rate, cl.Outstanding)
	now := time.Now()
	ok, wait := q.TakePost(now)
	if !ok {
		tooMany(x, c, "Over the client's rate of "+strconv.FormatFloat(cl.Rate, 'g', -1, 64)+" pushes a second", wait)
		return postOverRate
	}
	result := a.admit(ctx, c, x, cl, q, req, key, now)
	if result != postAccepted {
		q.RefundPost()
	}
	return result
}

// admit serves a POST within its client's rate: the outstanding quota,
// the Idempotency-Key, the sender.
func (a *API) admit(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange, cl *clients.Client, q *ratelimit.ClientQuota,
	req sender.Request, key string, now time.Time) string {
	ok, err := q.ReserveOpen(ctx, func(ctx context.Context, limit int) (int, error) {
		sctx, cancel := a.storageCtx(ctx)
		defer cancel()
		return a.store.CountOpen(sctx, cl.Name, limit)
	}, now)
	if err != nil {
		a.storageError(x, opCount, err)
		return postRefused
	}
	if !ok {
		tooMany(x, c, "The client has "+strconv.Itoa(cl.Outstanding)+" pushes not yet sent, its outstanding quota", 1)
		return postOverOutstanding
	}
	req.Client = cl.Name
	if key != "" {
		first, err := a.claim(ctx, cl.Name, key, &req)
		if err != nil {
			q.Unreserve()
			a.storageError(x, opClaim, err)
			return postRefused
		}
		if first != req.ID {
			q.Unreserve() // nothing new stored
			created(c, first)
			return postRepeat
		}
	}
	p, err := a.pushes.Accept(ctx, req)
	if err != nil {
		q.Unreserve()
		if key != "" {
			a.release(cl.Name, key, req.ID)
		}
		var fe *sender.FieldError
		if errors.As(err, &fe) {
			x.Fail(httpapi.BadRequest(fe.Error()))
		} else {
			a.storageError(x, opAccept, err)
		}
		return postRefused
	}
	created(c, p.ID)
	return postAccepted
}

// claim names a new push id in req and claims key for it; it returns
// the id the key names: req.ID, or the first push's.
func (a *API) claim(ctx context.Context, client, key string, req *sender.Request) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, err
	}
	req.ID = id
	sctx, cancel := a.storageCtx(ctx)
	defer cancel()
	return a.store.ClaimIdempotencyKey(sctx, client, key, id, IdempotencyTTL)
}

// release frees a claimed key whose push was not stored, so that a retry
// can store it. A release that fails leaves the key naming a push that
// does not exist until the claim expires: a repeat then gets a Location
// that answers 404, which the log line says.
func (a *API) release(client, key string, id uuid.UUID) {
	ctx, cancel := a.storageCtx(context.Background())
	defer cancel()
	if err := a.store.ReleaseIdempotencyKey(ctx, client, key, id); err != nil {
		a.log.Warn("push API: an Idempotency-Key whose push was not stored could not be released: its repeats get a Location that answers 404 until it expires",
			"client", client, "push", id, "error", err)
	}
}

// created answers 201 with the push's Location.
func created(c *app.RequestContext, id uuid.UUID) {
	c.Response.Header.Set("Location", "/push/"+id.String())
	c.SetStatusCode(http.StatusCreated)
}
