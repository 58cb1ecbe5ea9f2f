package httpapi

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/internal/errno"
)

// TestExchangeFail: Fail answers the error's JSON body with the headers
// of its status, and the exchange remembers its errno for the node's
// metrics and summary line; Begin forgets it.
func TestExchangeFail(t *testing.T) {
	for _, c := range []struct {
		e            *errno.HTTPError
		header, want string
	}{
		{errno.InvalidSubscription.HTTPError(""), "Cache-Control", "max-age=86400"},
		{errno.RetryBackoff.HTTPError(""), "Retry-After", "30"},
		{errno.InvalidAuth.HTTPError(""), "WWW-Authenticate", "vapid"},
		{errno.Unnumbered(http.StatusConflict, "busy"), "Retry-After", ""},
	} {
		ctx := app.NewContext(0)
		var x Exchange
		x.Begin(ctx)
		if _, failed := x.Failed(); failed {
			t.Fatal("failed before Fail")
		}
		x.Fail(c.e)
		if got := string(ctx.Response.Header.Peek(c.header)); got != c.want {
			t.Errorf("%d: %s %q, want %q", c.e.Status, c.header, got, c.want)
		}
		if ctx.Response.StatusCode() != c.e.Status || string(ctx.Response.Header.ContentType()) != "application/json" ||
			!bytes.Equal(ctx.Response.Body(), c.e.AppendJSON(nil)) {
			t.Errorf("%d: answered %d %s %s", c.e.Status, ctx.Response.StatusCode(), ctx.Response.Header.ContentType(), ctx.Response.Body())
		}
		if code, failed := x.Failed(); !failed || code != c.e.Errno {
			t.Errorf("%d: Failed() = %d, %v", c.e.Status, code, failed)
		}
		x.Begin(ctx)
		if _, failed := x.Failed(); failed {
			t.Error("Begin kept the last request's failure")
		}
	}
}

// TestExchangeReadBody: a body read whole is remembered as read (the
// node need not close the connection); one over the limit is not, and
// is answered tooLarge.
func TestExchangeReadBody(t *testing.T) {
	tooLarge := errno.PayloadTooLarge.HTTPError("")
	ctx := app.NewContext(0)
	ctx.Request.SetBody([]byte("0123456789"))
	var x Exchange
	x.Begin(ctx)
	if b, e := x.ReadBody(10, tooLarge); e != nil || string(b) != "0123456789" || !x.BodyRead() {
		t.Errorf("at the limit: %q, %v, read %v", b, e, x.BodyRead())
	}
	x.Begin(ctx)
	if b, e := x.ReadBody(9, tooLarge); e != tooLarge || b != nil || x.BodyRead() {
		t.Errorf("over the limit: %q, %v, read %v", b, e, x.BodyRead())
	}
}
