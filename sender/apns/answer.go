package apns

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
)

// Answer is APNs's error body: {"reason": "BadDeviceToken"}, and for 410
// {"reason": "Unregistered", "timestamp": <ms since the epoch>}.
type Answer struct {
	// Reason is APNs's error code, "" when the body had none or it was
	// not a short printable word.
	Reason string
	// Timestamp is when APNs learnt the token is no longer valid (410
	// only); zero when absent.
	Timestamp time.Time
}

// maxReason bounds a reason: Apple's longest is 28 bytes.
const maxReason = 64

// ParseAnswer reads an APNs error body. It never fails: what it cannot
// read is left empty.
func ParseAnswer(body []byte) Answer {
	var raw struct {
		Reason    any `json:"reason"`
		Timestamp any `json:"timestamp"`
	}
	var a Answer
	if json.Unmarshal(body, &raw) != nil {
		return a
	}
	if s, ok := raw.Reason.(string); ok && len(s) <= maxReason && printable(s) {
		a.Reason = s
	}
	// Milliseconds since the epoch, within years 1970..9999.
	if ms, ok := raw.Timestamp.(float64); ok && ms > 0 && ms < 253402300800000 {
		a.Timestamp = time.UnixMilli(int64(ms)).UTC()
	}
	return a
}

// reasons are short texts for the APNs reasons a provider meets.
var reasons = map[string]string{
	"BadDeviceToken":              "the device token is not valid for this app's environment: a sandbox token sent to production or the reverse, or a malformed token (the registration is kept)",
	"Unregistered":                "the device token is no longer active (the registration is dropped)",
	"ExpiredToken":                "the device token has expired (the registration is dropped)",
	"DeviceTokenNotForTopic":      "the device token is not for this app's topic (check the app's topic)",
	"BadTopic":                    "the topic is not valid (check the app's topic)",
	"TopicDisallowed":             "the topic may not receive pushes",
	"PayloadTooLarge":             "the payload is too large",
	"BadCollapseId":               "the collapse id is too long",
	"ExpiredProviderToken":        "the provider token was too old; a new one is made",
	"InvalidProviderToken":        "the provider token is not valid (check the app's key, key_id and team_id)",
	"MissingProviderToken":        "no provider token and no client certificate (check the app's credentials)",
	"BadCertificate":              "the client certificate is not valid (check the app's cert)",
	"BadCertificateEnvironment":   "the client certificate is for the other environment (check endpoint)",
	"Forbidden":                   "APNs refused the credentials",
	"TooManyProviderTokenUpdates": "the provider token was changed too often",
	"TooManyRequests":             "too many requests to this device token",
	"InternalServerError":         "APNs internal error",
	"ServiceUnavailable":          "APNs is unavailable",
	"Shutdown":                    "the APNs server is shutting down",
}

// BadDeviceToken is APNs's reason for a token it does not accept from
// this environment: it answers a sandbox token sent to production (or
// the reverse) exactly as a malformed one, so it says nothing about the
// device (docs/bridges.md, "No mass drop").
const BadDeviceToken = "BadDeviceToken"

// classify maps an answer to a verdict:
//
//	200              Sent
//	410              DeviceGone: the only answer that says the device is gone
//	403              Retry (credentials: visible by its reason, never silent)
//	429, 5xx         Retry, after Retry-After when given
//	other            Fail (400 BadDeviceToken included: the registration stays)
func classify(status int, retryAfter string, body []byte, now time.Time) provider.Result {
	if status/100 == 2 {
		return provider.Result{Verdict: provider.Sent, Status: status}
	}
	a := ParseAnswer(body)
	r := provider.Result{Status: status, Reason: a.Reason, Message: message(status, a, body)}
	switch {
	case status == 410:
		r.Verdict = provider.DeviceGone
	case status == 403:
		r.Verdict = provider.Retry
		r.Auth = true
	case status == 429 || status/100 == 5:
		r.Verdict = provider.Retry
		r.RetryAfter = provider.ParseRetryAfter(retryAfter, now)
	default:
		r.Verdict = provider.Fail
	}
	return r
}

// maxBodyText bounds the answer text quoted in a message when APNs sent
// no reason.
const maxBodyText = 200

func message(status int, a Answer, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "APNs %d", status)
	if a.Reason != "" {
		b.WriteString(" " + a.Reason)
	}
	if text, ok := reasons[a.Reason]; ok {
		b.WriteString(": " + text)
	} else if a.Reason == "" && len(body) > 0 {
		b.WriteString(": " + quoteBody(body))
	}
	if !a.Timestamp.IsZero() {
		b.WriteString(" since " + a.Timestamp.Format(time.RFC3339))
	}
	return b.String()
}

// quoteBody is the start of an unreadable answer, printable ASCII only.
func quoteBody(body []byte) string {
	body = body[:min(len(body), maxBodyText)]
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, string(body))
}
