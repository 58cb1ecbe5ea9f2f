package apitier

import (
	"net/http"

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
