package apns

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/provider/providertest"
	"github.com/autopush-go/autopush/sender/sendertest/apnsfake"
	"github.com/autopush-go/autopush/sender/sendertest/tcpfault"
)

// TestContract: the APNs client keeps the provider contract against the
// fake APNs (HTTP/2 over TLS, provider tokens), through a front that
// fails its connections. APNs's own verdicts: 403 is our credentials
// refused (retried), every 5xx retries, and 410 is a device gone.
func TestContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) *providertest.Harness {
		var front *tcpfault.Front
		e := newEnv(t, func(c *Config) {
			var apps map[string]map[string]any
			if err := json.Unmarshal([]byte(c.Apps), &apps); err != nil {
				t.Fatal(err)
			}
			var endpoint string
			front, endpoint = providertest.StartFront(t, apps["firefox"]["endpoint"].(string))
			apps["firefox"]["endpoint"] = endpoint
			b, err := json.Marshal(apps)
			if err != nil {
				t.Fatal(err)
			}
			c.Apps, c.Timeout = string(b), time.Minute
		})
		return &providertest.Harness{
			Provider:     e.client,
			Notification: *notification(map[string]string{"chid": testCHID, "body": "AAECAwQ", "con": "aes128gcm"}),
			Answer: func(a providertest.Answer) {
				e.fake.Queue(apnsfake.Fault{Status: a.Status, Reason: reasonOf[a.Status], RetryAfter: a.RetryAfter, Body: a.Body})
			},
			Hold:  func() { t.Cleanup(e.fake.Hold()) },
			Front: front,
			Gone:  func(token string) { e.fake.Gone(token) },
			Except: map[int]providertest.Expect{
				403: {Verdict: provider.Retry, Auth: true}, 410: {Verdict: provider.DeviceGone},
				501: {Verdict: provider.Retry}, 505: {Verdict: provider.Retry},
			},
		}
	})
}

// reasonOf is APNs's reason for an HTTP status ("": none).
var reasonOf = map[int]string{
	400: "BadTopic", 403: "InvalidProviderToken", 404: "BadPath", 405: "MethodNotAllowed", 410: "Unregistered",
	413: "PayloadTooLarge", 429: "TooManyRequests", 500: "InternalServerError", 503: "ServiceUnavailable",
}
