package stack_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage/embedded"
)

const (
	publishToken = "publish-token-0123456789"
	readerToken  = "reader-token-0123456789"
)

// call makes one request to the API tier and returns status and body.
func call(t *testing.T, method, url, token, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestPublishBroadcast: the API tier's Megaphone-compatible publish route
// stores a version, the connection node polls it from storage and tells
// the subscribed clients; its list route serves another node as its
// Megaphone.
func TestPublishBroadcast(t *testing.T) {
	const rs = "remote-settings/monitor_changes"
	st := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) {
		c.API.BroadcastTokens = []string{publishToken}
		c.API.BroadcastReaderTokens = []string{readerToken}
		c.Engine.MegaphonePollInterval = 100 * time.Millisecond
	}})
	put := st.EndpointURL() + "/v1/broadcasts/remote-settings/monitor_changes"

	// Refused: no token, a wrong one, a reader's; a bad version.
	for _, tok := range []string{"", "wrong-token-0123456789", readerToken} {
		code, hdr, body := call(t, "PUT", put, tok, `"1"`)
		if code != 401 || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(body, `"errno":109`) {
			t.Fatalf("PUT with token %q: %d %s %v", tok, code, body, hdr)
		}
	}
	for _, bad := range []string{"", "has space", strings.Repeat("v", 257)} {
		if code, _, body := call(t, "PUT", put, publishToken, bad); code != 400 {
			t.Fatalf("PUT version %q: %d %s", bad, code, body)
		}
	}
	if code, _, _ := call(t, "GET", st.EndpointURL()+"/v1/broadcasts", "", ""); code != 401 {
		t.Fatalf("GET without a token: %d", code)
	}

	// Published: 201 for a new broadcast, then the client sees it.
	if code, _, body := call(t, "PUT", put, publishToken, `"1700000000001"`); code != 201 || body != `{"code":201}` {
		t.Fatalf("first PUT: %d %s", code, body)
	}
	et.Eventually(t, 10*time.Second, "the node to poll the new broadcast", func() bool {
		v, _ := et.Metric(t, st.NodeURL(), "autoconnect_broadcast_ids")
		return v == 1
	})
	c := et.Dial(t, st.WSAddr())
	b := c.HelloBroadcasts("", map[string]string{rs: `"1600000000000"`})["broadcasts"].(map[string]any)
	if b[rs] != `"1700000000001"` {
		t.Fatalf("hello broadcasts %v", b)
	}
	// A new version: 200, and the client is told.
	if code, _, body := call(t, "PUT", put, publishToken, `"1700000000002"`); code != 200 || body != `{"code":200}` {
		t.Fatalf("second PUT: %d %s", code, body)
	}
	r := c.Read()
	if b, _ := r["broadcasts"].(map[string]any); r["messageType"] != "broadcast" || b[rs] != `"1700000000002"` {
		t.Fatalf("after publish: %v", r)
	}

	// The list, for a reader or a publisher.
	for _, tok := range []string{readerToken, publishToken} {
		code, _, body := call(t, "GET", st.EndpointURL()+"/v1/broadcasts", tok, "")
		var got struct {
			Code       int               `json:"code"`
			Broadcasts map[string]string `json:"broadcasts"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &got) != nil || got.Code != 200 || got.Broadcasts[rs] != `"1700000000002"` {
			t.Fatalf("GET /v1/broadcasts with %q: %d %s", tok, code, body)
		}
	}

	// Another deployment's node (its own store) polls this tier as its
	// Megaphone.
	cfg := et.Config()
	cfg.MegaphoneAPIURL = st.EndpointURL() + "/v1/broadcasts"
	cfg.MegaphoneAPIToken = readerToken
	cfg.MegaphonePollInterval = 100 * time.Millisecond
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	other := et.Start(t, store, cfg)
	oc := et.Dial(t, other.Addr())
	if b := oc.HelloBroadcasts("", map[string]string{rs: "0"})["broadcasts"].(map[string]any); b[rs] != `"1700000000002"` {
		t.Fatalf("a node polling the API tier: %v", b)
	}
}
