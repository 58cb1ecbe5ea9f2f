package stack_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
)

// TestPushAPIWithoutProvider: a stack that configures no push provider
// (no swrve-keys-file, bridge apps or log-provider-file: a WebPush-only
// deployment) runs no sender. Its push API still authenticates (401
// without a key), then answers every route 503, JSON with errno null,
// naming the settings that configure a provider; nothing is stored, no
// autosender_* series is served, and WebPush works.
func TestPushAPIWithoutProvider(t *testing.T) {
	st := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) { c.Sender.SwrveConfig.KeysFile = "" }})
	if st.Pushes() != nil {
		t.Fatal("a sender was built without a provider")
	}
	url := st.EndpointURL()
	auth := []string{"Authorization", "Bearer " + stacktest.PushAPIKey}
	body := []byte(`{"platform":"IOS","messagePrototypeKey":"` + stacktest.PushPrototype + `","pushKey":"d","message":"m"}`)
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/push"}, {http.MethodGet, "/push?state=SENT"},
		{http.MethodGet, "/push/0193c1a0-0000-7000-8000-000000000000"}, {http.MethodDelete, "/push/0193c1a0-0000-7000-8000-000000000000"},
	} {
		var b []byte
		if r.method == http.MethodPost {
			b = body
		}
		a := apitiertest.Send(t, r.method, url+r.path, b, append(auth, "Content-Type", "application/json")...)
		m := apitiertest.WantError(t, a, http.StatusServiceUnavailable, errno.None)
		if msg, _ := m["message"].(string); !strings.Contains(msg, "No push provider is configured") ||
			!strings.Contains(msg, "swrve-keys-file") || !strings.Contains(msg, "log-provider-file") {
			t.Errorf("%s %s: message %q does not say no provider is configured and what to set", r.method, r.path, msg)
		}
		if a := apitiertest.Send(t, r.method, url+r.path, b); a.Status != http.StatusUnauthorized {
			t.Errorf("%s %s without a key: %d, want 401", r.method, r.path, a.Status)
		}
	}
	_, api := st.Metrics(t)
	if strings.Contains(api, "autosender_") {
		t.Error("/metrics serves the sender's series, with no sender")
	}
	sub := st.Subscribe(t, "")
	st.Push(t, sub.Endpoint, sub, "webpush", nil)
	if got := sub.Receive(t); got != "webpush" {
		t.Errorf("WebPush delivered %q", got)
	}
}
