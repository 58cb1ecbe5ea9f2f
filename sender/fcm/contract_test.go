package fcm

import (
	"net/http"
	"testing"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/provider/providertest"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/sender/sendertest/tcpfault"
)

// TestContract: the FCM client keeps the provider contract against the
// fake FCM (HTTP v1 with OAuth2), its sends through a front that fails
// their connections (the token endpoint is reached directly). FCM's own
// verdicts: 401 and 403 are our access token refused (retried, a new one
// fetched), every 5xx retries (FCM's documented retryable errors), and
// 404 UNREGISTERED is a device gone.
func TestContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) *providertest.Harness {
		var front *tcpfault.Front
		e := start(t, func(c *Config) {
			front, c.URL = providertest.StartFront(t, c.URL)
			c.Timeout = time.Minute
		})
		return &providertest.Harness{
			Provider:     e.c,
			Notification: *push("reg-1", map[string]string{"chid": chid, "body": "AAECAwQ", "con": "aes128gcm"}),
			Answer:       func(a providertest.Answer) { e.fake.Queue(fcmAnswer(a)) },
			Hold:         func() { e.fake.Queue(fcmfake.Answer{Delay: time.Hour}) },
			Front:        front,
			Gone:         func(token string) { e.fake.SetGone(token) },
			Except: map[int]providertest.Expect{
				401: {Verdict: provider.Retry, Auth: true}, 403: {Verdict: provider.Retry, Auth: true},
				501: {Verdict: provider.Retry}, 505: {Verdict: provider.Retry},
			},
		}
	})
}

// rpcStatus names FCM's google.rpc status for an HTTP status.
var rpcStatus = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 501: "UNIMPLEMENTED",
	503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

// fcmAnswer is FCM's answer for a: its error JSON for the status, or a's
// body as is.
func fcmAnswer(a providertest.Answer) fcmfake.Answer {
	f := fcmfake.Answer{Status: a.Status, Body: a.Body, Header: http.Header{}}
	if a.Body == nil {
		name, ok := rpcStatus[a.Status]
		if !ok {
			name = "UNKNOWN"
		}
		f = fcmfake.Error(a.Status, name, http.StatusText(a.Status), "")
	}
	if a.RetryAfter != "" {
		f.Header.Set("Retry-After", a.RetryAfter)
	}
	return f
}
