package apns

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/sender/bridge/aps"
	"github.com/autopush-go/autopush/sender/provider"
)

// FuzzParseAnswer: whatever body APNs sends, the reason is empty or a
// short printable word, the timestamp within 1970..9999, and a body in
// APNs's shape is read exactly.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		`{"reason":"BadDeviceToken"}`,
		`{"reason":"Unregistered","timestamp":1700000000000}`,
		`{"reason":"Unregistered","timestamp":-1}`,
		`{"reason":"Unregistered","timestamp":1e300}`,
		`{"reason":7}`,
		`{"reason":"a b"}`,
		`{"reason":"` + strings.Repeat("x", 100) + `"}`,
		`<html>502 Bad Gateway</html>`,
		``, `null`, `[]`, `{"reason":null}`, "{\"reason\":\"\u00e9\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a := ParseAnswer(body)
		if a.Reason != "" && (len(a.Reason) > maxReason || !printable(a.Reason)) {
			t.Fatalf("reason %q", a.Reason)
		}
		if !a.Timestamp.IsZero() && (a.Timestamp.Year() < 1970 || a.Timestamp.Year() > 9999) {
			t.Fatalf("timestamp %s", a.Timestamp)
		}
		var raw struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(body, &raw) == nil && len(raw.Reason) <= maxReason && printable(raw.Reason) && a.Reason != raw.Reason {
			t.Fatalf("reason %q read as %q", raw.Reason, a.Reason)
		}
	})
}

// FuzzClassify: every answer gets the verdict of the table in classify's
// comment, a bounded message naming the status, and a wait only on a
// retry, within a day.
func FuzzClassify(f *testing.F) {
	for _, c := range []struct {
		status int
		after  string
		body   string
	}{
		{200, "", ""},
		{410, "", `{"reason":"Unregistered","timestamp":1700000000000}`},
		{400, "", `{"reason":"BadDeviceToken"}`},
		{400, "", `{"reason":"BadTopic"}`},
		{403, "", `{"reason":"ExpiredProviderToken"}`},
		{429, "5", `{"reason":"TooManyRequests"}`},
		{503, "Wed, 21 Oct 2015 07:28:00 GMT", `{"reason":"ServiceUnavailable"}`},
		{500, "", strings.Repeat("\xff", 500)},
		{-1, "-5", ""},
	} {
		f.Add(c.status, c.after, []byte(c.body))
	}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, status int, after string, body []byte) {
		r := classify(status, after, body, now)
		reason := ParseAnswer(body).Reason
		var want provider.Verdict
		switch {
		case status/100 == 2:
			want = provider.Sent
		case status == 410:
			want = provider.DeviceGone
		case status == 403 || status == 429 || status/100 == 5:
			want = provider.Retry
		default:
			want = provider.Fail
		}
		if r.Verdict != want || r.Status != status {
			t.Fatalf("status %d reason %q: %v, want %v", status, reason, r.Verdict, want)
		}
		if r.Verdict != provider.Sent && (!strings.HasPrefix(r.Message, "APNs ") || len(r.Message) > 400) {
			t.Fatalf("message %q", r.Message)
		}
		if r.RetryAfter < 0 || r.RetryAfter > provider.MaxRetryAfter || r.Verdict != provider.Retry && r.RetryAfter != 0 {
			t.Fatalf("wait %s on %v", r.RetryAfter, r.Verdict)
		}
	})
}

// FuzzParseApps: the apns-apps parser never panics; what it accepts has a
// valid id, a topic, an https endpoint and exactly one way of
// authenticating; its errors carry their context.
func FuzzParseApps(f *testing.F) {
	for _, s := range []string{
		`{"firefox": {"key": "/k.p8", "key_id": "K", "team_id": "T"}}`,
		`{"beta": {"endpoint": "sandbox", "cert": "/c.pem", "key": "/c.key"}}`,
		`{"dev": {"sandbox": true, "topic": "t", "cert": "-----BEGIN", "cert_key": "-----BEGIN"}}`,
		`{"t": {"endpoint": "https://127.0.0.1:1/", "key": "k", "key_id": "K", "team_id": "T"}}`,
		`{"a": {"endpoint": "https://u:p@h/", "key": "k", "key_id": "K", "team_id": "T"}}`,
		`{}`, ``, `[]`, `{"a": null}`, `{"a": {"cert": "c", "key": "k", "key_id": "K"}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		apps, err := ParseApps(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "apns-apps: ") {
				t.Fatalf("error %q without its context", err)
			}
			return
		}
		for id, a := range apps {
			if checkAppID(id) != nil || !printable(a.Topic) || !strings.HasPrefix(a.Endpoint, "https://") {
				t.Fatalf("accepted %q: %+v", id, a)
			}
			if a.TokenAuth() && (a.Key == "" || !printable(a.KeyID) || !printable(a.TeamID)) ||
				!a.TokenAuth() && (a.CertKey == "" || a.Key != "" || a.KeyID != "" || a.TeamID != "") {
				t.Fatalf("accepted %q with unclear authentication: %+v", id, a)
			}
			if a.Sandbox != (a.Endpoint == SandboxURL) {
				t.Fatalf("accepted %q: sandbox %v, endpoint %s", id, a.Sandbox, a.Endpoint)
			}
		}
	})
}

// FuzzPayload: whatever a notification carries, the payload is JSON with
// our aps block and the data's fields as they were, and the collapse id
// is a header value of at most 64 bytes.
func FuzzPayload(f *testing.F) {
	f.Add("chid", "x", "body", "y", "id", "topic")
	f.Add("aps", "evil", "ver", "v1", "", "")
	f.Add("\xff", "\x00", "a\"b", "<&>", "0f8c7b1e-2d3a-4b5c-8d9e-0a1b2c3d4e5f", strings.Repeat("t", 65))
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, id, collapse string) {
		n := &provider.Notification{ID: id, Data: map[string]string{k1: v1, k2: v2}}
		b := Payload(n)
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("payload %q: %v", b, err)
		}
		if a, _ := got["aps"].(map[string]any); a == nil || a["mutable-content"] != float64(1) {
			t.Fatalf("aps %v", got["aps"])
		}
		if string(Payload(n)) != string(b) {
			t.Fatal("payload differs between two calls")
		}
		for k, v := range n.Data {
			if k != "aps" && json.Valid([]byte(`"`+k+`"`)) && isValidUTF8(k+v) && got[k] != v {
				t.Fatalf("%q: %v, want %q", k, got[k], v)
			}
		}
		c := CollapseID(collapse)
		if len(c) > maxCollapseID || c != "" && !printable(c) || collapse != "" && c == "" {
			t.Fatalf("collapse id %q for %q", c, collapse)
		}
	})
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "\ufffd") == s }

// FuzzCheckAPS: whatever a device sends as "aps", aps.Check never panics,
// and what it accepts derives an alert (so a push to the registration
// is sent) whose payload is JSON with mutable-content 1.
func FuzzCheckAPS(f *testing.F) {
	for _, s := range []string{`{}`, `{"title":"t","loc_args":["a"],"mutable-content":1}`, `{"title":1}`,
		`{"badge":null}`, `{"mutable-content":"1"}`, `{"loc_args":[null]}`, `[]`, ``, `null`, `{"title":"\u00e9"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if aps.Check(s) != nil {
			return
		}
		b, err := payload(&provider.Notification{ID: "id", Data: map[string]string{aps.DataKey: s}})
		if err != nil && s != "" {
			t.Fatalf("aps.Check accepted %q, which does not derive: %v", s, err)
		}
		var got struct {
			APS struct {
				MutableContent int `json:"mutable-content"`
			} `json:"aps"`
		}
		if json.Unmarshal(b, &got) != nil || got.APS.MutableContent != 1 {
			t.Fatalf("payload %s", b)
		}
	})
}
