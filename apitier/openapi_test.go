package apitier

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/internal/errno"
)

// Answers docs/openapi.yaml promises, where the schema-driven fuzzer
// (docs/schemathesis_test.go) found the node answering otherwise.

const openapiPublisher = "openapi-test-publisher"

// openapiServer is a node with receipts (and their webhooks) and the
// broadcast routes on, and a VAPID Authorization for it.
func openapiServer(t *testing.T) (*Server, string) {
	t.Helper()
	s := newServer(t, newStore(t), func(c *Config) {
		c.Receipts, c.ReceiptWebhooks = true, true
		c.BroadcastTokens = []string{openapiPublisher}
	})
	return s, newVAPIDKey(t).auth(t, testEndpointURL)
}

// receiptSub creates a receipt subscription with body and returns its
// path.
func receiptSub(t *testing.T, s *Server, auth string, body []byte) string {
	t.Helper()
	r := perform(s, http.MethodPost, "/receipts", body, hdr("Authorization", auth)...)
	if r.code != http.StatusCreated {
		t.Fatalf("POST /receipts %s: %d %s", body, r.code, r.body)
	}
	return strings.TrimPrefix(r.header.Get("Location"), testEndpointURL)
}

// TestQueryParameters: a route that takes query parameters refuses one it
// does not know (a misspelt ?wiat=30 would otherwise read at once, not
// wait) and one given empty, 400 errno null; GET /push's are
// stack.TestListQueryRules'. A route that takes none ignores the query
// string: the push routes, as the reference does (an endpoint URL is
// opaque to the application server, which must not be refused for what
// its library appends), and the others alike.
func TestQueryParameters(t *testing.T) {
	s, auth := openapiServer(t)
	sub := receiptSub(t, s, auth, nil)
	for _, q := range []string{"", "?wait=0", "?limit=1", "?wait=0&limit=1000"} {
		if r := perform(s, http.MethodGet, sub+q, nil, hdr("Authorization", auth)...); r.code != http.StatusOK {
			t.Errorf("GET %s: %d %s", q, r.code, r.body)
		}
	}
	for _, q := range []string{"?wiat=30", "?limit=5&x=1", "?x", "?=1"} {
		m := wantError(t, perform(s, http.MethodGet, sub+q, nil, hdr("Authorization", auth)...), http.StatusBadRequest, errno.None)
		if msg, _ := m["message"].(string); !strings.Contains(msg, "unknown query parameter") {
			t.Errorf("GET %s: message %q", q, msg)
		}
	}
	for _, q := range []string{"?wait=", "?limit=", "?wait=-1", "?limit=0", "?wait=x"} {
		wantError(t, perform(s, http.MethodGet, sub+q, nil, hdr("Authorization", auth)...), http.StatusBadRequest, errno.None)
	}

	u := subscribe(t, s, "", nil)
	wantCreated(t, s, perform(s, http.MethodPost, u.path+"?utm_source=lib&x", nil, hdr("TTL", "60")...), "60")
	if r := perform(s, http.MethodPut, "/v1/broadcasts/b/c?x=1", []byte("v1"), hdr("Authorization", "Bearer "+openapiPublisher)...); r.code != http.StatusCreated {
		t.Errorf("publish with a query string: %d %s", r.code, r.body)
	}
	if r := perform(s, http.MethodGet, "/__heartbeat__?cache-buster=1", nil); r.code != http.StatusOK {
		t.Errorf("heartbeat with a query string: %d %s", r.code, r.body)
	}
	if r := perform(s, http.MethodPost, "/receipts?x=1", nil, hdr("Authorization", auth)...); r.code != http.StatusCreated {
		t.Errorf("POST /receipts with a query string: %d %s", r.code, r.body)
	}
}

// TestReceiptSubscribeBody: POST /receipts takes no body, {}, or
// {"webhook": URL or null}, and nothing else: an empty webhook is not a
// URL (it was taken as none), null is not an object, and another member
// (a misspelt "webhok") would leave the subscription without the webhook
// its client meant.
func TestReceiptSubscribeBody(t *testing.T) {
	s, auth := openapiServer(t)
	for _, body := range []string{``, `{}`, ` {"webhook": null} `} {
		r := perform(s, http.MethodPost, "/receipts", []byte(body), hdr("Authorization", auth)...)
		if r.code != http.StatusCreated || strings.Contains(string(r.body), "webhook") {
			t.Errorf("body %q: %d %s, want 201 without a webhook", body, r.code, r.body)
		}
	}
	r := perform(s, http.MethodPost, "/receipts", []byte(`{"webhook":"https://app.example/r"}`), hdr("Authorization", auth)...)
	var got map[string]string
	if r.code != http.StatusCreated || json.Unmarshal(r.body, &got) != nil || got["webhook"] != "https://app.example/r" || got["webhook_secret"] == "" {
		t.Errorf("a webhook: %d %s", r.code, r.body)
	}
	for _, body := range []string{
		`{"webhook":""}`, `null`, `[]`, `"https://app.example/r"`, `{"webhook":5}`,
		`{"webhok":"https://app.example/r"}`, `{"webhook":"https://app.example/r","secret":"x"}`,
		`{"webhook":"https://app.example/r"} {}`, `{"webhook":"https://app example/r"}`,
	} {
		wantError(t, perform(s, http.MethodPost, "/receipts", []byte(body), hdr("Authorization", auth)...), http.StatusBadRequest, errno.None)
	}
}

// TestReceiptAckBody: an acknowledgement names 1 to 1000 receipt ids (1
// to 64 characters of the url-safe base64 alphabet, as GET gives them)
// and nothing else; the largest one fits the body's bound. An id that
// cannot be a receipt's is refused, not ignored.
func TestReceiptAckBody(t *testing.T) {
	s, auth := openapiServer(t)
	ack := receiptSub(t, s, auth, nil) + "/ack"
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = strings.Repeat("A", 60) + string(rune('a'+i%26)) + "-_" + string(rune('0'+i%10))
	}
	largest, _ := json.MarshalIndent(map[string][]string{"ids": ids}, "", "  ")
	for _, body := range []string{`{"ids":["x"]}`, string(largest)} {
		if r := perform(s, http.MethodPost, ack, []byte(body), hdr("Authorization", auth)...); r.code != http.StatusNoContent {
			t.Errorf("ack of %d bytes: %d %s", len(body), r.code, r.body)
		}
	}
	for _, body := range []string{
		`{"ids":[]}`, `{"ids":[""]}`, `{"ids":["a b"]}`, `{"ids":["` + strings.Repeat("A", 65) + `"]}`, `{"ids":["é"]}`,
		`{"ids":["x"],"all":true}`, `null`, `{"ids":null}`,
	} {
		wantError(t, perform(s, http.MethodPost, ack, []byte(body), hdr("Authorization", auth)...), http.StatusBadRequest, errno.None)
	}
}

// TestBroadcastBounds: a broadcaster of 1 to 64 visible ASCII
// characters, a channel of 1 to 128 (Megaphone's bounds) and a version
// of 1 to 256: an empty version (no body) is none, refused.
func TestBroadcastBounds(t *testing.T) {
	s, _ := openapiServer(t)
	publish := func(broadcaster, channel, version string) response {
		return perform(s, http.MethodPut, "/v1/broadcasts/"+broadcaster+"/"+channel, []byte(version), hdr("Authorization", "Bearer "+openapiPublisher)...)
	}
	if r := publish(strings.Repeat("b", 64), strings.Repeat("c", 128), strings.Repeat("v", 256)); r.code != http.StatusCreated {
		t.Errorf("the longest id and version: %d %s", r.code, r.body)
	}
	for _, c := range [][3]string{
		{strings.Repeat("b", 65), "c", "v"},
		{"b", strings.Repeat("c", 129), "v"},
		{"b", "c", strings.Repeat("v", 257)},
		{"b", "c", ""},
		{"b", "c", "two words"},
	} {
		wantError(t, publish(c[0], c[1], c[2]), http.StatusBadRequest, errno.None)
	}
	if all, err := s.store.Broadcasts(t.Context()); err != nil || len(all) != 1 {
		t.Errorf("stored %d broadcasts (%v), want the one taken", len(all), err)
	}
}
