package pushapi

import (
	"context"
	"net/http"

	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/storage"
)

// CancelCause is the attempt log's cause of a push its client cancelled.
func CancelCause(client string) string { return "cancelled by client " + client }

// handleCancel cancels a push that has not reached its provider
// (DELETE /push/{id}, send scope, the client's own push; an admin's any):
// SCHEDULED, PENDING, RETRY, or IN_MEMORY before its attempt started. It
// ends FAILED, its cause in an attempt that made no call (the sender's
// Withdraw). 204; 409 when it is final or its call is in flight; 404 when
// it is not the client's.
func (a *API) handleCancel(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
	cl, ok := a.gate(c, x, clients.Send)
	if !ok {
		return
	}
	p, ok := a.getOwn(ctx, x, &cl, c.Param("id"), opCancel)
	if !ok {
		return
	}
	done, err := a.pushes.Withdraw(ctx, p.ID, CancelCause(cl.Name))
	if err != nil {
		a.storageError(x, opCancel, err)
		return
	}
	if done {
		c.SetStatusCode(http.StatusNoContent)
		return
	}
	// Not withdrawn: it is final now, or its call in flight. Read again to
	// say which (it may have moved on since the first read).
	if now, err := a.pushes.Get(ctx, p.ID); err == nil {
		p = now
	}
	x.Fail(notCancelled(&p))
}

// notCancelled is the 409 of a push past cancelling.
func notCancelled(p *storage.Push) *errno.HTTPError {
	msg := "The push is " + string(p.State) + ": it cannot be cancelled"
	if a := p.LastAttempt(); !p.State.Final() && a != nil && a.Status == storage.AttemptInProcess {
		msg = "The push's call to its provider is in flight: it cannot be cancelled"
	}
	return errno.Unnumbered(http.StatusConflict, msg)
}
