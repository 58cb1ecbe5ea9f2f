package httpapi

import (
	"net/http"
	"strconv"

	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/internal/errno"
)

// Exchange is a handler's side of one request: it answers the request's
// error and reads its body, and remembers both, so that the node serving
// the route counts and logs every route's answers alike (errno metrics,
// the request summary line) and never drains a body nobody read. The
// node begins one per request (Begin), hands it to the route's handler
// and reads it once the handler returns (Failed, BodyRead). Not safe for
// concurrent use.
type Exchange struct {
	c        *app.RequestContext
	failed   bool
	errno    errno.Code
	bodyRead bool
}

// Begin starts x on c's request, forgetting any earlier one.
func (x *Exchange) Begin(c *app.RequestContext) { *x = Exchange{c: c} }

// Fail answers e as JSON (errno.HTTPError's body), with the headers of
// its status (WriteError), and remembers its errno. Call it once, as the
// answer; a handler may replace a header it set after.
func (x *Exchange) Fail(e *errno.HTTPError) {
	WriteError(x.c, e)
	x.failed, x.errno = true, e.Errno
}

// Failed is the errno of the error answered (Fail), and whether there
// was one.
func (x *Exchange) Failed() (errno.Code, bool) { return x.errno, x.failed }

// ReadBody returns the request body, whole (the package's ReadBody): a
// body over limit is tooLarge, one that has not arrived by the request's
// deadline 408, one that ends early or is malformed 400; after any of
// them the connection closes once answered, the body never drained.
func (x *Exchange) ReadBody(limit int, tooLarge *errno.HTTPError) ([]byte, *errno.HTTPError) {
	var buf []byte
	return x.ReadBodyInto(&buf, limit, tooLarge)
}

// ReadBodyInto is ReadBody into *buf, for a handler that pools its
// buffers: a streamed body is read into it, grown to limit+1 when
// smaller.
func (x *Exchange) ReadBodyInto(buf *[]byte, limit int, tooLarge *errno.HTTPError) ([]byte, *errno.HTTPError) {
	b, e := ReadBody(x.c, buf, limit, tooLarge)
	if e == nil {
		x.bodyRead = true
	}
	return b, e
}

// BodyRead reports that the handler read the whole body.
func (x *Exchange) BodyRead() bool { return x.bodyRead }

// RetryAfter is the Retry-After of a 503 (storage unavailable, too many
// connections), seconds.
const RetryAfter = 30

var retryAfter = strconv.Itoa(RetryAfter)

var jsonType = []byte("application/json")

// WriteError answers e as JSON (errno.HTTPError's body). A 410 carries
// Cache-Control so that caches and application servers stop retrying
// for a day (as the reference), a 503 Retry-After, a 401 the VAPID
// challenge (WWW-Authenticate: vapid).
func WriteError(c *app.RequestContext, e *errno.HTTPError) {
	c.SetStatusCode(e.Status)
	h := &c.Response.Header
	h.SetContentTypeBytes(jsonType)
	switch e.Status {
	case http.StatusGone:
		h.Set("Cache-Control", "max-age=86400")
	case http.StatusServiceUnavailable:
		h.Set("Retry-After", retryAfter)
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", "vapid")
	}
	bb := c.Response.BodyBuffer()
	bb.B = e.AppendJSON(bb.B[:0])
}
