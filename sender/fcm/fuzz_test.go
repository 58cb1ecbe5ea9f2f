package fcm

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/autopush-go/autopush/sender/provider"
)

var errorBodies = []string{
	`{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}`,
	`{"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"},{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token"}]}]}}`,
	`{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`,
	`{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"@type":"x","errorCode":"QUOTA_EXCEEDED"}]}}`,
	`{"error":null}`, `{"error":{"details":"x"}}`, `{"error":{"status":7}}`, `[]`, `null`, ``,
	"<html>502 Bad Gateway</html>", "\xff\xfe", strings.Repeat("é", 600),
}

// FuzzParseError: any body parses without panic into bounded, valid
// UTF-8 strings, and FCM's own JSON gives its fields back.
func FuzzParseError(f *testing.F) {
	for _, b := range errorBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		st, code, msg := ParseError(body)
		for _, s := range []string{st, code, msg} {
			if !utf8.ValidString(s) {
				t.Fatalf("invalid UTF-8 %q", s)
			}
		}
		if len(st) > maxReasonPart || len(code) > maxReasonPart || len(msg) > maxMessage {
			t.Fatalf("unbounded: %d %d %d bytes", len(st), len(code), len(msg))
		}
		if (st != "" || code != "") && !strings.Contains(string(body), `"error"`) {
			t.Fatalf("status %q code %q from a body without error", st, code)
		}
	})
}

// FuzzClassify: whatever FCM answers, the verdict follows the rules, the
// reason and message are bounded, and a wait is only asked on a retry
// and within a day.
func FuzzClassify(f *testing.F) {
	for i, b := range errorBodies {
		for _, st := range []int{200, 400, 401, 403, 404, 429, 500, 503, 302} {
			f.Add(st, []string{"", "7", "Wed, 21 Oct 2015 07:28:00 GMT", "-1"}[i%4], []byte(b))
		}
	}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, status int, after string, body []byte) {
		r := classify(status, after, body, now)
		_, code, _ := ParseError(body)
		var want provider.Verdict
		switch {
		case status/100 == 2:
			want = provider.Sent
		case status == 404 && code == "UNREGISTERED":
			want = provider.DeviceGone
		case status == 403 && code == "SENDER_ID_MISMATCH":
			want = provider.Fail
		case status == 401 || status == 403 || status == 429 || status/100 == 5:
			want = provider.Retry
		default:
			want = provider.Fail
		}
		if r.Verdict != want || r.Status != status {
			t.Fatalf("status %d body %q: %v %d, want %v", status, body, r.Verdict, r.Status, want)
		}
		if r.Verdict == provider.Sent && (r.Message != "" || r.Reason != "") {
			t.Fatalf("a success records %q %q", r.Reason, r.Message)
		}
		if r.Verdict != provider.Sent && r.Message == "" {
			t.Fatalf("status %d: no message", status)
		}
		if len(r.Reason) > 2*maxReasonPart+1 || len(r.Message) > maxMessage {
			t.Fatalf("unbounded reason %d or message %d", len(r.Reason), len(r.Message))
		}
		if (status == 401 || status == 403) && r.Verdict == provider.Retry && r.Reason == "" {
			t.Fatal("an auth failure without a reason")
		}
		if r.RetryAfter < 0 || r.RetryAfter > provider.MaxRetryAfter || r.Verdict != provider.Retry && r.RetryAfter != 0 {
			t.Fatalf("status %d Retry-After %q: wait %s", status, after, r.RetryAfter)
		}
	})
}

// FuzzParseApps: fcm-apps never panics the parser; what it accepts has a
// single-segment project id and credentials for every app, and an error
// says where it comes from.
func FuzzParseApps(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{}`, `null`, `[]`, `{"a":null}`,
		`{"fenix":{"project_id":"fenix-1","credentials":"/etc/fcm/fenix.json"}}`,
		`{"fenix":{"project_id":"p","credential":"{\"type\":\"service_account\"}"}}`,
		`{"fenix":{"project_id":"p","server_access_token":"AIzaSyB0"}}`,
		`{"fenix":{"project_id":"p","credentials":"a","credential":"b"}}`,
		`{"":{"project_id":"p","credentials":"c"}}`,
		`{"f":{"project_id":"../x","credentials":"c"}}`,
		`{"f":{"project_id":"p","credentials":""}}`,
		`{"f":{"project_id":"p","credentials":"c"}} {}`,
		`{"f":{"project_id":"p","credentials":1}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		apps, err := ParseApps(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fcm: fcm-apps: ") {
				t.Fatalf("error %q without its context", err)
			}
			return
		}
		for id, a := range apps {
			if id == "" || !validProjectID(a.ProjectID) || strings.ContainsAny(a.ProjectID, "/?#%") || a.Credentials == "" {
				t.Fatalf("accepted %q: %+v", id, a)
			}
		}
	})
}
