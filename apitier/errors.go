package apitier

import (
	"net/http"
	"strconv"

	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/internal/webpush"
)

// The errors this tier answers with. Every body comes from
// webpush.HTTPError.AppendJSON, so the statuses, errnos and the body
// format are the one table in internal/webpush (errno.go). Messages are
// the reference's (autopush-rs's error texts, autopush's for the ones it
// alone defines). Package variables: answering an error allocates nothing.
var (
	errMissingTTL   = webpush.ErrnoMissingHeader.HTTPError("Missing TTL value")
	errInvalidTTL   = webpush.ErrnoInvalidTTL.HTTPError("Invalid TTL header value")
	errNegativeTTL  = webpush.ErrnoNegativeTTL.HTTPError("TTL must be greater than 0")
	errTopicLength  = webpush.ErrnoInvalidTopic.HTTPError("Topic must be no greater than 32 characters")
	errTopicChars   = webpush.ErrnoInvalidTopic.HTTPError("Topic must be URL and Filename safe Base64 alphabet")
	errUrgency      = &webpush.HTTPError{Status: http.StatusBadRequest, Errno: webpush.ErrnoNone, Message: "Urgency must be very-low, low, normal or high"}
	errTooLarge     = webpush.ErrnoPayloadTooLarge.HTTPError("")
	errBody         = &webpush.HTTPError{Status: http.StatusBadRequest, Errno: webpush.ErrnoNone, Message: "Could not read the request body"}
	errNoUser       = webpush.ErrnoExpiredEndpoint.HTTPError("UAID not found")
	errNoChannel    = webpush.ErrnoInvalidSubscription.HTTPError("No such subscription")
	errUserDeleted  = webpush.ErrnoEndpointUnavailable.HTTPError("User was deleted during routing")
	errStorage      = webpush.ErrnoRetryBackoff.HTTPError("Database error while saving notification")
	errStorageRead  = webpush.ErrnoRetryBackoff.HTTPError("Database error")
	errInternal     = webpush.ErrnoUnknown.HTTPError("An unexpected server error occurred.")
	errBadMessageID = webpush.ErrnoInvalidEndpoint.HTTPError("Invalid message ID")
	errNotFound     = webpush.ErrnoInvalidEndpoint.HTTPError("Not Found")
	errNoMethod     = &webpush.HTTPError{Status: http.StatusMethodNotAllowed, Errno: webpush.ErrnoNone, Message: "Method Not Allowed"}
)

// Crypto header errors: a body whose encryption headers are missing gets
// errno 101 ("Missing necessary crypto keys"), one whose headers are
// wrong for its Content-Encoding gets errno 110 ("Invalid crypto keys
// specified"), with the reference's messages.
func errMissingCrypto(msg string) *webpush.HTTPError {
	return webpush.ErrnoMissingCryptoKeys.HTTPError(msg)
}

func errInvalidCrypto(msg string) *webpush.HTTPError {
	return webpush.ErrnoInvalidCryptoKeys.HTTPError(msg)
}

// RetryAfter is the Retry-After of a 503 (storage unavailable), seconds.
const RetryAfter = 30

var retryAfter = strconv.Itoa(RetryAfter)

// writeError answers e as JSON. A 410 carries Cache-Control so that
// caches and senders stop retrying for a day (reference), a 503
// Retry-After, a 401 the VAPID challenge.
func (s *Server) writeError(c *app.RequestContext, st *reqState, e *webpush.HTTPError) {
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
