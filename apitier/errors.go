package apitier

import (
	"net/http"
	"strconv"

	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/internal/errno"
)

// The errors this tier answers with (a push's header faults:
// apitier/pushheader). Every body comes from
// errno.HTTPError.AppendJSON, so the statuses, errnos and the body
// format are the one table in internal/errno. Messages are
// the reference's (autopush-rs's error texts, autopush's for the ones it
// alone defines). Package variables: answering an error allocates nothing.
var (
	errTooLarge = errno.PayloadTooLarge.HTTPError("")
	// errBridgeTooLarge: a bridged user's push whose data the mobile
	// provider would refuse.
	errBridgeTooLarge = errno.PayloadTooLarge.HTTPError("The data is over the limit of the subscription's mobile push service")
	errNoUser         = errno.InvalidSubscription.HTTPError("UAID not found")
	errNoChannel      = errno.InvalidSubscription.HTTPError("No such subscription")
	errUserDeleted    = errno.EndpointUnavailable.HTTPError("User was deleted during routing")
	errStorage        = errno.RetryBackoff.HTTPError("Database error while saving notification")
	errStorageRead    = errno.RetryBackoff.HTTPError("Database error")
	errInternal       = errno.Unknown.HTTPError("An unexpected server error occurred.")
	errBadMessageID   = errno.InvalidEndpoint.HTTPError("Invalid message ID")
	errNotFound       = errno.InvalidEndpoint.HTTPError("Not Found")
	errNoMethod       = errno.Unnumbered(http.StatusMethodNotAllowed, "Method Not Allowed")
)

// RetryAfter is the Retry-After of a 503 (storage unavailable), seconds.
const RetryAfter = 30

var retryAfter = strconv.Itoa(RetryAfter)

// writeError answers e as JSON. A 410 carries Cache-Control so that
// caches and application servers stop retrying for a day (reference), a
// 503 Retry-After, a 401 the VAPID challenge.
func (s *Server) writeError(c *app.RequestContext, st *reqState, e *errno.HTTPError) {
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
	s.metrics.errno(e.Errno)
	st.failed, st.errno = true, e.Errno
}

var jsonType = []byte("application/json")
