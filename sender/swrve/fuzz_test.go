package swrve

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
)

const exampleKeys = `swrve:
  messagePrototypePushKeys:
    'Hello':
      IOS: d36ae023-010c-4f3a-9bd7-9924a754b4b4
      ANDROID: f31690cb-a763-4259-af18-6aed41afd9ed
    'Good bye':
      IOS: d36ae023-010c-4f3a-9bd7-9924a754b4b4
      ANDROID: f31690cb-a763-4259-af18-6aed41afd9ed
`

// FuzzParseKeys: the prototype-key file parser never panics, and a
// mapping it accepts has only IOS and ANDROID entries with a push_key.
func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{
		exampleKeys,
		"messagePrototypePushKeys:\n  Hello: {IOS: a}\n",
		"swrve:\n  messagePrototypePushKeys: {}\n",
		"swrve:\n  messagePrototypePushKeys:\n    Hello:\n      WINDOWS: k\n",
		"swrve:\n  messagePrototypePushKeys:\n    Hello:\n      IOS: ''\n",
		"swrve:\n  other: 1\n",
		"a: &a [*a]\n",
		"",
		"swrve: [1, 2]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseKeys(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "swrve: keys: ") {
				t.Fatalf("error %q without its context", err)
			}
			return
		}
		k := NewKeys(m)
		for proto, platforms := range m {
			for platform, key := range platforms {
				if platform != "IOS" && platform != "ANDROID" || key == "" {
					t.Fatalf("accepted %q: %s -> %q", proto, platform, key)
				}
				if got, ok := k.Lookup(proto, platform); !ok || got != key {
					t.Fatalf("lookup %q %s: %q %v, want %q", proto, platform, got, ok, key)
				}
			}
		}
	})
}

// FuzzClassify: whatever Swrve answers (status, Retry-After, body), the
// verdict follows the retry rules (429, 500, 502, 503, 504 retry; any
// other 4xx or 5xx fails), the recorded message is bounded, and
// the wait is within a day.
func FuzzClassify(f *testing.F) {
	for _, c := range []struct {
		status int
		after  string
		body   string
	}{
		{200, "", `{"code":200,"message":"OK"}`},
		{429, "3", `{"code":429,"message":"Rate limit exceeded"}`},
		{503, "Wed, 21 Oct 2015 07:28:00 GMT", `{"code":503}`},
		{400, "", `{"code":400,"message":"Missing user"}`},
		{403, "", "<html>Forbidden</html>"},
		{500, "-1", `{"code":"x"}`},
		{502, "99999999999999999999", ""},
		{504, "", strings.Repeat("é", 400)},
	} {
		f.Add(c.status, c.after, []byte(c.body))
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, status int, after string, body []byte) {
		r := classify(status, after, body, now)
		var want provider.Verdict
		switch {
		case status/100 == 2:
			want = provider.Sent
		case status == 429 || status == 500 || status == 502 || status == 503 || status == 504:
			want = provider.Retry
		default:
			want = provider.Fail
		}
		if r.Verdict != want || r.Status != status {
			t.Fatalf("status %d: verdict %v status %d, want %v", status, r.Verdict, r.Status, want)
		}
		if r.Verdict == provider.Sent && r.Message != "" {
			t.Fatalf("a success records message %q", r.Message)
		}
		if len(r.Message) > len(body) && len(r.Message) > 512 {
			t.Fatalf("message of %d bytes from a body of %d", len(r.Message), len(body))
		}
		if r.RetryAfter < 0 || r.RetryAfter > 24*time.Hour || r.Verdict != provider.Retry && r.RetryAfter != 0 {
			t.Fatalf("status %d, Retry-After %q: wait %s", status, after, r.RetryAfter)
		}
		if r.Reason != "" {
			if _, err := strconv.Atoi(r.Reason); err != nil {
				t.Fatalf("reason %q is not Swrve's numeric code", r.Reason)
			}
		}
	})
}

// FuzzParseRetryAfter: delay-seconds and HTTP dates (RFC 9110 10.2.3) are
// read, anything else is no wait, and the wait is within 0..24h.
func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"", "0", "3", " 120 ", "-5", "86401", "1e3", "3.5", "+7",
		now.Add(90 * time.Second).Format(http.TimeFormat), "Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "soon"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d := parseRetryAfter(v, now)
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("%q: wait %s", v, d)
		}
		trimmed := strings.TrimSpace(v)
		if n, err := strconv.ParseInt(trimmed, 10, 64); err == nil {
			want := time.Duration(min(max(n, 0), 86400)) * time.Second
			if d != want {
				t.Fatalf("%q: wait %s, want %s", v, d, want)
			}
			return
		}
		if at, err := http.ParseTime(trimmed); err == nil {
			if want := min(max(at.Sub(now), 0), 24*time.Hour); d != want {
				t.Fatalf("%q: wait %s, want %s", v, d, want)
			}
			return
		}
		if d != 0 {
			t.Fatalf("%q is neither seconds nor a date, yet waits %s", v, d)
		}
	})
}
