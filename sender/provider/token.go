package provider

import (
	"net/url"
	"strings"
)

// A device token (FCM registration token, APNs device token) is its
// phone owner's secret: only an admin who asks sees it
// (docs/sender.md, "Clients"). A provider's texts are shown in the
// attempt log and logged, so none may carry it: a *url.Error names its
// URL (APNs's path is the token), and a service or a proxy on the way
// may quote the request in its answer.

// RedactedToken stands for a device token in what a provider returns.
const RedactedToken = "<device token>"

// HideToken returns s with every occurrence of token, as it is and as a
// URL path or query escapes it, replaced by mask. An empty token hides
// nothing.
func HideToken(s, token, mask string) string {
	if token == "" {
		return s
	}
	// The escaped forms first: one may hold the token itself.
	for _, form := range [...]string{url.QueryEscape(token), url.PathEscape(token), token} {
		s = strings.ReplaceAll(s, form, mask)
	}
	return s
}

// WithoutToken returns r with token hidden (RedactedToken) in its
// reason, message and error text. Every provider that sends to device
// tokens returns its results through it; the sender applies it again
// to a bridged push's result, whatever the provider.
func (r Result) WithoutToken(token string) Result {
	r.Reason = HideToken(r.Reason, token, RedactedToken)
	r.Message = HideToken(r.Message, token, RedactedToken)
	if r.Err != nil {
		if text := HideToken(r.Err.Error(), token, RedactedToken); text != r.Err.Error() {
			r.Err = &hiddenError{text: text, err: r.Err}
		}
	}
	return r
}

// hiddenError is an error whose text had a device token hidden; the
// error it wraps still matches errors.Is and errors.As.
type hiddenError struct {
	text string
	err  error
}

func (e *hiddenError) Error() string { return e.text }
func (e *hiddenError) Unwrap() error { return e.err }
