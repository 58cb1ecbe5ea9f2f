package stack_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/internal/bridgeauth"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage"
)

// TestE2EBridgeRegistration drives the bridge registration API through a
// running stack, on the embedded store and on ScyllaDB (CQL_HOSTS), and
// reads the results back from the store: register, list, subscribe,
// update the token, push to a bridged endpoint (201, and the fake FCM
// gets it with the new token), unsubscribe, unregister; and a webpush-type
// registration whose endpoint takes pushes.
func TestE2EBridgeRegistration(t *testing.T) {
	forBackends(t, func(t *testing.T, through func(storage.Store) storage.Store) {
		st := stacktest.StartWith(t, stacktest.Options{Bridges: true, Through: through,
			Config: func(c *stack.Config) { c.API.BridgeMaxChannels = 2 }})
		var store storage.Store = st.Store
		if through != nil {
			store = through(st.Store)
		}
		bridgeFlow(t, st, store)
	})
}

func bridgeFlow(t *testing.T, st *stacktest.Stack, store storage.Store) {
	ctx := context.Background()
	base := st.EndpointURL()
	reg := base + "/v1/fcm/fcm-app/registration"
	a := apitiertest.Send(t, http.MethodPost, reg, []byte(`{"token":"fcm-token-0123"}`), "Content-Type", "application/json")
	if a.Status != http.StatusOK {
		t.Fatalf("register: %d %s", a.Status, a.Body)
	}
	var r struct{ UAID, ChannelID, Endpoint, Secret string }
	if err := json.Unmarshal(a.Body, &r); err != nil {
		t.Fatal(err)
	}
	uaid := uuid.MustParse(r.UAID)
	auth := []string{"Authorization", "Bearer " + r.Secret}
	u, err := store.GetUser(ctx, uaid)
	if err != nil || u.RouterType != "fcm" || u.RouterData["token"] != "fcm-token-0123" || u.RouterData["app_id"] != "fcm-app" {
		t.Fatalf("stored record %+v (%v)", u, err)
	}

	channels := func() []string {
		t.Helper()
		a := apitiertest.Send(t, http.MethodGet, reg+"/"+r.UAID+"/", nil, auth...)
		var got struct {
			UAID       string   `json:"uaid"`
			ChannelIDs []string `json:"channelIDs"`
		}
		if a.Status != http.StatusOK || json.Unmarshal(a.Body, &got) != nil || got.UAID != r.UAID {
			t.Fatalf("list channels: %d %s", a.Status, a.Body)
		}
		return got.ChannelIDs
	}
	if got := channels(); len(got) != 1 || got[0] != r.ChannelID {
		t.Fatalf("channels %v, want [%s]", got, r.ChannelID)
	}
	registrationRefusals(t, base, store, r.UAID, r.Secret)
	if got := channels(); len(got) != 1 || got[0] != r.ChannelID {
		t.Fatalf("channels after the refused calls %v, want [%s]", got, r.ChannelID)
	}

	a = apitiertest.Send(t, http.MethodPost, reg+"/"+r.UAID+"/subscription", nil, auth...)
	var sub struct{ ChannelID, Endpoint string }
	if a.Status != http.StatusOK || json.Unmarshal(a.Body, &sub) != nil {
		t.Fatalf("subscribe: %d %s", a.Status, a.Body)
	}
	if got := channels(); len(got) != 2 {
		t.Fatalf("channels after subscribe %v, want 2", got)
	}
	// bridge-max-channels is 2: a third is refused and nothing changes.
	apitiertest.WantError(t, apitiertest.Send(t, http.MethodPost, reg+"/"+r.UAID+"/subscription", nil, auth...), 429, errno.None)
	if got := channels(); len(got) != 2 {
		t.Fatalf("channels after a subscription past the limit %v, want 2", got)
	}

	a = apitiertest.Send(t, http.MethodPut, reg+"/"+r.UAID, []byte(`{"token":"fcm-token-4567"}`), auth...)
	if a.Status != http.StatusOK || string(a.Body) != "{}" {
		t.Fatalf("update token: %d %s", a.Status, a.Body)
	}
	if u, err := store.GetUser(ctx, uaid); err != nil || u.RouterData["token"] != "fcm-token-4567" {
		t.Fatalf("record after update %+v (%v)", u, err)
	}
	apitiertest.WantError(t, apitiertest.Send(t, http.MethodPut, reg+"/"+r.UAID, []byte(`{"token":"bad token"}`), auth...), 400, errno.None)
	apitiertest.WantError(t, apitiertest.Send(t, http.MethodGet, reg+"/"+r.UAID, nil, "Authorization", "Bearer nope"), 401, errno.InvalidAuth)

	// A push to a bridged user's endpoint is accepted and reaches FCM
	// with the token the device registered last.
	apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, sub.Endpoint, nil, "TTL", "60"), base, "60")
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := st.FCM.WaitSends(wctx, 1); err != nil {
		t.Fatalf("FCM got no send: %v", err)
	}
	if got := st.FCM.Log()[0]; !strings.Contains(string(got.Body), `"token":"fcm-token-4567"`) ||
		!strings.Contains(string(got.Body), `"chid":"`+sub.ChannelID+`"`) {
		t.Fatalf("FCM got %s", got.Body)
	}

	a = apitiertest.Send(t, http.MethodDelete, reg+"/"+r.UAID+"/subscription/"+sub.ChannelID, nil, auth...)
	if a.Status != http.StatusOK {
		t.Fatalf("unsubscribe: %d %s", a.Status, a.Body)
	}
	apitiertest.WantError(t, apitiertest.Send(t, http.MethodDelete, reg+"/"+r.UAID+"/subscription/"+sub.ChannelID, nil, auth...), 410, errno.InvalidSubscription)
	if ok, err := store.HasChannel(ctx, uaid, uuid.MustParse(sub.ChannelID)); ok || err != nil {
		t.Fatalf("channel still subscribed (%v)", err)
	}

	a = apitiertest.Send(t, http.MethodDelete, reg+"/"+r.UAID, nil, auth...)
	if a.Status != http.StatusOK {
		t.Fatalf("unregister: %d %s", a.Status, a.Body)
	}
	if _, err := store.GetUser(ctx, uaid); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("record after unregister: %v", err)
	}
	apitiertest.WantError(t, apitiertest.Send(t, http.MethodGet, reg+"/"+r.UAID, nil, auth...), 410, errno.ExpiredEndpoint)

	// A webpush-type registration is an ordinary subscription: its
	// endpoint takes pushes, stored for the client.
	a = apitiertest.Send(t, http.MethodPost, base+"/v1/webpush/any/registration", []byte(`{"token":"unused"}`))
	if a.Status != http.StatusOK || json.Unmarshal(a.Body, &r) != nil {
		t.Fatalf("webpush register: %d %s", a.Status, a.Body)
	}
	apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, r.Endpoint, nil, "TTL", "60"), base, "60")
	if got := apitiertest.Stored(t, store, uuid.MustParse(r.UAID)); len(got) != 1 || got[0].CHID.String() != r.ChannelID {
		t.Fatalf("stored %+v, want one message on %s", got, r.ChannelID)
	}
}

// registrationRefusals runs every auth and input error of the registration
// API against a running stack, for the registration uaid (secret its
// secret), and checks that none wrote anything: the record and its
// channels are as they were, and no registration was added.
func registrationRefusals(t *testing.T, base string, store storage.Store, uaid, secret string) {
	t.Helper()
	ctx := context.Background()
	id := uuid.MustParse(uaid)
	before, err := store.GetUser(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	chans, err := store.Channels(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	other := uuid.New()
	fcm := base + "/v1/fcm/" + stacktest.FCMApp + "/registration"
	bearer := func(s string) []string { return []string{"Authorization", "Bearer " + s} }
	good := bearer(secret)
	for _, c := range []struct {
		name, method, url, body string
		header                  []string
		code                    int
		errno                   errno.Code
	}{
		// Authorization, on every route under {uaid}.
		{"no Authorization", "GET", fcm + "/" + uaid + "/", "", nil, 401, errno.InvalidAuth},
		{"Basic scheme", "GET", fcm + "/" + uaid + "/", "", []string{"Authorization", "Basic " + secret}, 401, errno.InvalidAuth},
		{"wrong secret", "PUT", fcm + "/" + uaid, `{"token":"fcm-token-9999"}`, bearer(strings.Repeat("0", 64)), 401, errno.InvalidAuth},
		{"another uaid's secret", "DELETE", fcm + "/" + uaid, "", bearer(bridgeauth.Secret(stacktest.BridgeAuthKey, other)), 401, errno.InvalidAuth},
		{"an unknown key's secret", "POST", fcm + "/" + uaid + "/subscription", "", bearer(bridgeauth.Secret("not-a-configured-key", id)), 401, errno.InvalidAuth},
		{"unsubscribe without secret", "DELETE", fcm + "/" + uaid + "/subscription/" + uuid.NewString(), "", nil, 401, errno.InvalidAuth},
		// The uaid and the type.
		{"uaid not a UUID", "GET", fcm + "/nope/", "", good, 410, errno.ExpiredEndpoint},
		{"unknown uaid", "GET", fcm + "/" + other.String() + "/", "", bearer(bridgeauth.Secret(stacktest.BridgeAuthKey, other)), 410, errno.ExpiredEndpoint},
		{"unknown type", "GET", base + "/v1/adm/" + stacktest.FCMApp + "/registration/" + uaid + "/", "", good, 400, errno.InvalidRouterType},
		{"another type's path", "DELETE", base + "/v1/apns/" + stacktest.APNsApp + "/registration/" + uaid, "", good, 400, errno.InvalidRouterType},
		{"unknown subscription", "DELETE", fcm + "/" + uaid + "/subscription/" + uuid.NewString(), "", good, 410, errno.InvalidSubscription},
		// Bodies.
		{"new token with a space", "PUT", fcm + "/" + uaid, `{"token":"fcm token 9999"}`, good, 400, errno.None},
		{"new token too short", "PUT", fcm + "/" + uaid, `{"token":"short"}`, good, 400, errno.None},
		{"update without token", "PUT", fcm + "/" + uaid, `{}`, good, 400, errno.None},
		{"bad channelID", "POST", fcm + "/" + uaid + "/subscription", `{"channelID":"nope"}`, good, 400, errno.None},
		{"bad key", "POST", fcm + "/" + uaid + "/subscription", `{"key":"AAAA"}`, good, 400, errno.None},
		{"bad JSON", "POST", fcm + "/" + uaid + "/subscription", `{"channelID":`, good, 400, errno.None},
		{"oversized body", "PUT", fcm + "/" + uaid, `{"token":"fcm-token-9999","pad":"` + strings.Repeat("x", 5000) + `"}`, good, 413, errno.PayloadTooLarge},
		// New registrations refused.
		{"unknown app id", "POST", base + "/v1/fcm/other-app/registration", `{"token":"fcm-token-0123"}`, nil, 400, errno.None},
		{"another bridge's app id", "POST", base + "/v1/apns/" + stacktest.FCMApp + "/registration", `{"token":"fcm-token-0123"}`, nil, 400, errno.None},
		{"register unknown type", "POST", base + "/v1/adm/x/registration", `{"token":"fcm-token-0123"}`, nil, 400, errno.InvalidRouterType},
		{"register without token", "POST", fcm, `{}`, nil, 400, errno.None},
	} {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		a := apitiertest.Send(t, c.method, c.url, body, c.header...)
		apitiertest.WantError(t, a, c.code, c.errno)
		if c.code == 401 && a.Header.Get("WWW-Authenticate") != `Bearer realm="registration"` {
			t.Errorf("%s: WWW-Authenticate %q", c.name, a.Header.Get("WWW-Authenticate"))
		}
	}
	after, err := store.GetUser(ctx, id)
	if err != nil || after.RouterType != before.RouterType || !maps.Equal(after.RouterData, before.RouterData) {
		t.Fatalf("record after refused calls %+v (%v), before %+v", after, err, before)
	}
	if got, err := store.Channels(ctx, id); err != nil || !slices.Equal(got, chans) {
		t.Fatalf("channels after refused calls %v (%v), before %v", got, err, chans)
	}
}
