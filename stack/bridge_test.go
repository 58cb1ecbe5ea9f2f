package stack_test

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/sender/sendertest/apnsfake"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/scylla"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
)

// bridged is a device registered through the registration API.
type bridged struct {
	UAID, ChannelID, Endpoint, Secret string
	token                             string
}

// bridgeStack runs a stack with the bridges; change adjusts its config.
func bridgeStack(t *testing.T, change func(*stack.Config)) *stacktest.Stack {
	t.Helper()
	return stacktest.StartWith(t, stacktest.Options{Bridges: true, Config: func(c *stack.Config) {
		// Retries come after a second (the least the sender allows) unless
		// a Retry-After says otherwise.
		c.Sender.SenderConfig.RetryDelay = time.Second
		if change != nil {
			change(c)
		}
	}})
}

func registerDevice(t *testing.T, st *stacktest.Stack, typ, app, token string) bridged {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"token": token})
	a := apitiertest.Send(t, http.MethodPost, st.EndpointURL()+"/v1/"+typ+"/"+app+"/registration", body,
		"Content-Type", "application/json")
	var d bridged
	if a.Status != http.StatusOK || json.Unmarshal(a.Body, &d) != nil || d.Endpoint == "" {
		t.Fatalf("register %s/%s: %d %s", typ, app, a.Status, a.Body)
	}
	d.token = token
	return d
}

// apnsToken is a device token as APNs issues them: 64 hex digits.
func apnsToken(t *testing.T) string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// forBackends runs f on a store of each backend: the embedded one, and
// ScyllaDB (CQL_HOSTS; cqltest says how to get one when it is unset).
// through is stacktest.Options.Through.
func forBackends(t *testing.T, f func(t *testing.T, through func(storage.Store) storage.Store)) {
	t.Run("embedded", func(t *testing.T) { f(t, nil) })
	t.Run("scylla", func(t *testing.T) {
		cfg := cqltest.Keyspace(t, "bridge")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sc, err := scylla.New(ctx, cfg)
		if err != nil {
			t.Fatalf("scylla.New: %v", err)
		}
		t.Cleanup(func() { sc.Close() })
		f(t, func(storage.Store) storage.Store { return sc })
	})
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pushesOf lists the sender's pushes for uaid, in every state. A push
// that changes state during the listing can show up twice: its newest
// version counts.
func pushesOf(t *testing.T, st *stacktest.Stack, uaid string) []storage.Push {
	t.Helper()
	byID := map[uuid.UUID]storage.Push{}
	for _, state := range storage.PushStates {
		cursor := ""
		for {
			page, next, err := st.Pushes().List(context.Background(), state, cursor, 100)
			if err != nil {
				t.Fatalf("list %s: %v", state, err)
			}
			for _, p := range page {
				if old, seen := byID[p.ID]; p.Bridge != nil && p.Bridge.UAID.String() == uaid && (!seen || p.Version > old.Version) {
					byID[p.ID] = p
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return slices.Collect(maps.Values(byID))
}

// finalPush waits until uaid's only push is in a final state.
func finalPush(t *testing.T, st *stacktest.Stack, uaid string) storage.Push {
	t.Helper()
	var p storage.Push
	waitFor(t, "the bridged push to finish", func() bool {
		ps := pushesOf(t, st, uaid)
		if len(ps) > 1 {
			t.Fatalf("%d pushes for one POST", len(ps))
		}
		if len(ps) == 1 && (ps[0].State == storage.PushSent || ps[0].State == storage.PushFailed || ps[0].State == storage.PushGivenUp) {
			p = ps[0]
			return true
		}
		return false
	})
	return p
}

// metric is the value of one series of the API tier's /metrics (0 when
// not served).
func metric(t *testing.T, st *stacktest.Stack, series string) float64 {
	t.Helper()
	_, text := st.Metrics(t)
	return seriesValue(t, text, series)
}

// engineMetric is metric for the engine's series (its node API's /metrics).
func engineMetric(t *testing.T, st *stacktest.Stack, series string) float64 {
	t.Helper()
	text, _ := st.Metrics(t)
	return seriesValue(t, text, series)
}

// seriesValue is series' value in a /metrics text; 0 when absent.
func seriesValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, s := range stacktest.ParseMetrics(t, text) {
		if s.Series == series {
			return s.Value
		}
	}
	return 0
}

// ua is a device's WebPush keys, as Firefox for Android and iOS make them.
type ua struct {
	priv *ecdh.PrivateKey
	auth []byte
}

func newUA(t *testing.T) ua {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	return ua{k, auth}
}

// A push of each kind reaches FCM and APNs with exactly the bytes Firefox
// for Android and iOS read: the data keys chid, body (the payload as the
// application server sent it, base64url), con, and for aesgcm enc and
// cryptokey; Urgency and Topic become the provider's priority and
// collapse key (no Urgency: no FCM priority, as autopush-rs sends none,
// and APNs 10; no Topic: the push id is the APNs collapse id); TTL the
// FCM ttl and the APNs expiration.
func TestE2EBridgeWire(t *testing.T) {
	st := bridgeStack(t, nil)
	fcmDev := registerDevice(t, st, "fcm", stacktest.FCMApp, "fcm-wire-token-0001")
	apnsDev := registerDevice(t, st, "apns", stacktest.APNsApp, apnsToken(t))
	u := newUA(t)
	plain := []byte("Hello from the application server")

	aes128, err := pushcrypto.EncryptAES128GCM(plain, u.priv.PublicKey().Bytes(), u.auth)
	if err != nil {
		t.Fatal(err)
	}
	aesgcm, salt, dh, err := pushcrypto.EncryptAESGCM(plain, u.priv.PublicKey().Bytes(), u.auth)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	enc, ckey := "salt="+b64(salt), "dh="+b64(dh)

	cases := []struct {
		name    string
		body    []byte
		headers []string
		// data is the data object both providers carry besides chid,
		// its keys in order.
		data                  string
		urgency, topic        string
		fcmPrio, apnsPriority string
	}{
		{"aes128gcm", aes128, []string{"Content-Encoding", "aes128gcm"},
			`"body":"` + b64(aes128) + `",`, "", "", "", "10"},
		{"aesgcm", aesgcm, []string{"Content-Encoding", "aesgcm", "Encryption", enc, "Crypto-Key", ckey},
			`"body":"` + b64(aesgcm) + `",`, "low", "news", "NORMAL", "5"},
		{"empty", nil, nil, "", "very-low", "", "NORMAL", "5"},
		{"urgent", nil, nil, "", "high", "", "HIGH", "10"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := append([]string{"TTL", "30"}, c.headers...)
			if c.urgency != "" {
				hdr = append(hdr, "Urgency", c.urgency)
			}
			if c.topic != "" {
				hdr = append(hdr, "Topic", c.topic)
			}
			// data keys in JSON's (sorted) order.
			data := func(chid string) string {
				d := c.data + `"chid":"` + chid + `"`
				switch c.name {
				case "aes128gcm":
					d += `,"con":"aes128gcm"`
				case "aesgcm":
					d += `,"con":"aesgcm","cryptokey":"` + ckey + `","enc":"` + enc + `"`
				}
				return d
			}

			sent := time.Now()
			apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, fcmDev.Endpoint, c.body, hdr...), st.EndpointURL(), "30")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := st.FCM.WaitSends(ctx, i+1); err != nil {
				t.Fatalf("FCM: %v", err)
			}
			got := st.FCM.Log()[i]
			collapse := ""
			if c.topic != "" {
				collapse = `"collapse_key":"` + c.topic + `",`
			}
			// TTL 30 is raised to FCM's minimum, 60 s.
			prio := ""
			if c.fcmPrio != "" {
				prio = `"priority":"` + c.fcmPrio + `",`
			}
			want := `{"message":{"android":{` + collapse + `"data":{` + data(fcmDev.ChannelID) + `},` + prio +
				`"ttl":"60s"},"token":"` + fcmDev.token + `"}}`
			if string(got.Body) != want {
				t.Errorf("FCM got\n%s\nwant\n%s", got.Body, want)
			}
			if got.Path != "/v1/projects/"+stacktest.FCMProject+"/messages:send" || !strings.HasPrefix(got.Header.Get("Authorization"), "Bearer ") {
				t.Errorf("FCM request %s with %q", got.Path, got.Header.Get("Authorization"))
			}

			apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, apnsDev.Endpoint, c.body, hdr...), st.EndpointURL(), "30")
			if err := st.APNs.WaitCount(ctx, i+1); err != nil {
				t.Fatalf("APNs: %v", err)
			}
			a := st.APNs.Log()[i]
			id := a.Header.Get("apns-id")
			if _, err := uuid.Parse(id); err != nil {
				t.Fatalf("apns-id %q: %v", id, err)
			}
			wantAPNs := `{"aps":{"alert":{"loc-key":"SentTab.NoTabArrivingNotification.body","title-loc-key":"SentTab.NoTabArrivingNotification.title"},"mutable-content":1},` +
				data(apnsDev.ChannelID) + `,"ver":"` + id + `"}`
			if string(a.Body) != wantAPNs {
				t.Errorf("APNs got\n%s\nwant\n%s", a.Body, wantAPNs)
			}
			if a.Proto != "HTTP/2.0" || a.Token != apnsDev.token || a.JWT == "" || a.Status != http.StatusOK {
				t.Errorf("APNs request %s token %s jwt %q status %d", a.Proto, a.Token, a.JWT, a.Status)
			}
			collapseID := c.topic
			if collapseID == "" {
				collapseID = id
			}
			for k, v := range map[string]string{"apns-topic": stacktest.APNsTopic, "apns-push-type": "alert",
				"apns-priority": c.apnsPriority, "apns-collapse-id": collapseID} {
				if got := a.Header.Get(k); got != v {
					t.Errorf("APNs %s %q, want %q", k, got, v)
				}
			}
			// apns-expiration: when the TTL runs out (at least the
			// bridges' minimum of 60 s), in seconds since the epoch.
			exp, err := strconv.ParseInt(a.Header.Get("apns-expiration"), 10, 64)
			if lo, hi := sent.Unix()+59, time.Now().Unix()+61; err != nil || exp < lo || exp > hi {
				t.Errorf("apns-expiration %q, want in [%d, %d]", a.Header.Get("apns-expiration"), lo, hi)
			}
		})
	}
	if n := metric(t, st, `autosender_sent_total{provider="fcm"}`); n != float64(len(cases)) {
		t.Errorf("autosender_sent_total fcm %v, want %d", n, len(cases))
	}
	if n := metric(t, st, `autosender_sent_total{provider="apns"}`); n != float64(len(cases)) {
		t.Errorf("autosender_sent_total apns %v, want %d", n, len(cases))
	}
}

// The "aps" an iOS device registers with shapes the alert APNs gets, as
// autopush-rs derives it: its alert fields replace the default's, other
// keys are ignored, and the aps text itself is not sent. An aps whose
// alert fields have the wrong type is refused at registration.
func TestE2EBridgeAPS(t *testing.T) {
	st := bridgeStack(t, nil)
	token := apnsToken(t)
	body, _ := json.Marshal(map[string]string{"token": token, "aps": `{"title":"New tab","loc_args":["Fenix"],"badge":2}`})
	a := apitiertest.Send(t, http.MethodPost, st.EndpointURL()+"/v1/apns/"+stacktest.APNsApp+"/registration", body,
		"Content-Type", "application/json")
	var d bridged
	if a.Status != http.StatusOK || json.Unmarshal(a.Body, &d) != nil {
		t.Fatalf("register: %d %s", a.Status, a.Body)
	}
	apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, d.Endpoint, nil, "TTL", "60"), st.EndpointURL(), "60")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.APNs.WaitCount(ctx, 1); err != nil {
		t.Fatal(err)
	}
	got := st.APNs.Log()[0]
	want := `{"aps":{"alert":{"loc-args":["Fenix"],"loc-key":"SentTab.NoTabArrivingNotification.body","title":"New tab",` +
		`"title-loc-key":"SentTab.NoTabArrivingNotification.title"},"mutable-content":1},"chid":"` + d.ChannelID +
		`","ver":"` + got.Header.Get("apns-id") + `"}`
	if string(got.Body) != want || got.Token != token {
		t.Errorf("APNs got\n%s\nwant\n%s", got.Body, want)
	}
	body, _ = json.Marshal(map[string]string{"token": apnsToken(t), "aps": `{"title":["New tab"]}`})
	a = apitiertest.Send(t, http.MethodPost, st.EndpointURL()+"/v1/apns/"+stacktest.APNsApp+"/registration", body,
		"Content-Type", "application/json")
	if a.Status != http.StatusBadRequest || !strings.Contains(string(a.Body), "APS") {
		t.Errorf("an aps whose title is not a string: %d %s", a.Status, a.Body)
	}
}

// FCM's transient answers are retried as the sender retries any
// provider's: 429 after its Retry-After, 5xx, a refused access token
// (fetched again; counted as an auth failure), no answer in time; each
// shows in the attempt log and the metrics, and the push is then sent.
func TestE2EBridgeFCMRetries(t *testing.T) {
	st := bridgeStack(t, func(c *stack.Config) { c.Sender.FCMConfig.Timeout = time.Second })
	dev := registerDevice(t, st, "fcm", stacktest.FCMApp, "fcm-retry-token-0001")
	retryAfter := http.Header{"Retry-After": {"1"}}
	throttled := fcmfake.Error(429, "RESOURCE_EXHAUSTED", "quota", "QUOTA_EXCEEDED")
	throttled.Header = retryAfter
	cases := []struct {
		name   string
		answer fcmfake.Answer
		code   int
		verdict,
		message string
	}{
		{"429 Retry-After", throttled, 429, "retry", ""},
		{"503", fcmfake.Error(503, "UNAVAILABLE", "busy", ""), 503, "retry", ""},
		{"401", fcmfake.Unauthenticated(), 401, "retry", ""},
		{"timeout", fcmfake.Answer{Status: 200, Body: []byte(`{"name":"late"}`), Delay: 3 * time.Second}, 0, "retry", "timeout"},
	}
	// The first push fetches the access token; the push API shows it SENT
	// with its attempt log.
	apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, dev.Endpoint, nil, "TTL", "600"), st.EndpointURL(), "600")
	p := finalPush(t, st, dev.UAID)
	a := apitiertest.Send(t, http.MethodGet, st.EndpointURL()+"/push/"+p.ID.String(), nil, "Authorization", "Bearer "+stacktest.PushAPIKey)
	if a.Status != http.StatusOK || !strings.Contains(string(a.Body), `"SENT"`) || !strings.Contains(string(a.Body), `"fcm"`) {
		t.Errorf("GET /push/%s: %d %s", p.ID, a.Status, a.Body)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			retries := metric(t, st, `autosender_attempts_total{provider="fcm",verdict="retry"}`)
			auth := metric(t, st, `autosender_auth_failures_total{provider="fcm"}`)
			tokens := st.FCM.TokenRequests()
			st.FCM.Queue(c.answer)
			// A fresh device per case: its pushes are its own.
			d := registerDevice(t, st, "fcm", stacktest.FCMApp, "fcm-"+strings.ReplaceAll(c.name, " ", "-")+"-0001")
			apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, d.Endpoint, nil, "TTL", "600"), st.EndpointURL(), "600")
			p := finalPush(t, st, d.UAID)
			if p.State != storage.PushSent || len(p.Attempts) != 2 {
				t.Fatalf("push %s with %d attempts %+v, want SENT after 2", p.State, len(p.Attempts), p.Attempts)
			}
			first, second := p.Attempts[0], p.Attempts[1]
			if first.Status != storage.AttemptError || first.ProviderCode != c.code || second.Status != storage.AttemptOK {
				t.Errorf("attempts %+v", p.Attempts)
			}
			if c.message != "" && !strings.Contains(first.ProviderMessage+first.Cause, c.message) {
				t.Errorf("first attempt %+v, want %q in its message", first, c.message)
			}
			if c.name == "429 Retry-After" && second.Started-first.Started < 1000 {
				t.Errorf("retried after %d ms, Retry-After asked 1 s", second.Started-first.Started)
			}
			if got := metric(t, st, `autosender_attempts_total{provider="fcm",verdict="retry"}`); got != retries+1 {
				t.Errorf("retry verdicts %v → %v", retries, got)
			}
			wantAuth, wantTokens := auth, tokens
			if c.code == 401 {
				wantAuth, wantTokens = auth+1, tokens+1
			}
			if got := metric(t, st, `autosender_auth_failures_total{provider="fcm"}`); got != wantAuth {
				t.Errorf("auth failures %v, want %v", got, wantAuth)
			}
			if got := st.FCM.TokenRequests(); got != wantTokens {
				t.Errorf("token requests %d, want %d", got, wantTokens)
			}
		})
	}
}

// A device-gone verdict (FCM 404 UNREGISTERED, APNs 410 Unregistered)
// fails the push and drops the registration: the application server's
// next push is answered 410 errno 106 with Cache-Control max-age=86400,
// on both storage backends. (APNs 400 BadDeviceToken is not one:
// TestE2EBridgeBadDeviceToken.)
func TestE2EBridgeDeviceGone(t *testing.T) {
	forBackends(t, func(t *testing.T, through func(storage.Store) storage.Store) {
		{
			st := stacktest.StartWith(t, stacktest.Options{Bridges: true, Through: through})
			for _, c := range []struct {
				name, typ, app, token string
				gone                  func(token string)
			}{
				{"fcm", "fcm", stacktest.FCMApp, "fcm-gone-token-0001", func(string) { st.FCM.Queue(fcmfake.Unregistered()) }},
				{"gcm", "gcm", stacktest.FCMApp, "gcm-gone-token-0001", func(tok string) { st.FCM.SetGone(tok) }},
				{"apns 410", "apns", stacktest.APNsApp, apnsToken(t), func(tok string) { st.APNs.Gone(tok) }},
			} {
				t.Run(c.name, func(t *testing.T) {
					dropped := metric(t, st, `autoendpoint_bridge_device_gone_total{result="dropped"}`)
					d := registerDevice(t, st, c.typ, c.app, c.token)
					c.gone(c.token)
					apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, d.Endpoint, []byte("x"),
						"TTL", "60", "Content-Encoding", "aes128gcm"), st.EndpointURL(), "60")
					p := finalPush(t, st, d.UAID)
					if p.State != storage.PushFailed || len(p.Attempts) != 1 {
						t.Fatalf("push %s after %d attempts, want FAILED after 1", p.State, len(p.Attempts))
					}
					waitFor(t, "the registration to be dropped", func() bool {
						return metric(t, st, `autoendpoint_bridge_device_gone_total{result="dropped"}`) == dropped+1
					})
					a := apitiertest.Send(t, http.MethodPost, d.Endpoint, nil, "TTL", "60")
					apitiertest.WantError(t, a, http.StatusGone, errno.InvalidSubscription)
					if cc := a.Header.Get("Cache-Control"); cc != "max-age=86400" {
						t.Errorf("Cache-Control %q", cc)
					}
					// The device's own calls see it gone too.
					apitiertest.WantError(t, apitiertest.Send(t, http.MethodGet,
						st.EndpointURL()+"/v1/"+c.typ+"/"+c.app+"/registration/"+d.UAID+"/", nil,
						"Authorization", "Bearer "+d.Secret), http.StatusGone, errno.ExpiredEndpoint)
				})
			}
		}
	})
}

// APNs 400 BadDeviceToken (here: tokens its other environment issued, as
// from development builds of an app configured for production) fails the
// push and never drops the registration: the device's next push is
// accepted again, its registration API still answers. A burst of them
// for one app (apns-bad-token-burst distinct tokens within the window)
// raises autoendpoint_bridge_environment_mixup for the app and logs one
// error naming it and the likely mix-up. A 410 still drops. Over HTTP/2
// and TLS to the fake APNs, on both storage backends.
func TestE2EBridgeBadDeviceToken(t *testing.T) {
	forBackends(t, func(t *testing.T, through func(storage.Store) storage.Store) {
		var logs apitiertest.SyncBuffer
		st := stacktest.StartWith(t, stacktest.Options{Bridges: true, Through: through,
			Log:    slog.New(slog.NewJSONHandler(&logs, nil)),
			Config: func(c *stack.Config) { c.Sender.APNsConfig.BadTokenBurst = 3 }})
		mixup := `autoendpoint_bridge_environment_mixup{app_id="` + stacktest.APNsApp + `"}`
		badTokens := `autoendpoint_bridge_bad_device_token_total{app_id="` + stacktest.APNsApp + `"}`
		const reported = "likely a sandbox/production mix-up"
		var devs []bridged
		for i := range 3 {
			d := registerDevice(t, st, "apns", stacktest.APNsApp, apnsToken(t))
			st.APNs.OtherEnvironment(d.token)
			devs = append(devs, d)
			apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, d.Endpoint, nil, "TTL", "60"), st.EndpointURL(), "60")
			p := finalPush(t, st, d.UAID)
			if a := p.LastAttempt(); p.State != storage.PushFailed || len(p.Attempts) != 1 || a.ProviderCode != 400 || a.ProviderReason != "BadDeviceToken" {
				t.Fatalf("push %d: %s, attempts %+v", i, p.State, p.Attempts)
			}
			if got := metric(t, st, badTokens); got != float64(i+1) {
				t.Fatalf("%s = %v after %d BadDeviceToken", badTokens, got, i+1)
			}
			if i < 2 && (metric(t, st, mixup) != 0 || strings.Contains(logs.String(), reported)) {
				t.Fatalf("mix-up reported after %d distinct tokens (the rule is 3)", i+1)
			}
		}
		if metric(t, st, mixup) != 1 {
			t.Errorf("%s = %v after 3 distinct tokens refused, want 1", mixup, metric(t, st, mixup))
		}
		if line := logs.String(); strings.Count(line, reported) != 1 || !strings.Contains(line, `"app_id":"`+stacktest.APNsApp+`"`) ||
			!strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("the mix-up's log line is missing or repeated:\n%s", line)
		}
		if got := metric(t, st, `autoendpoint_bridge_device_gone_total{result="dropped"}`); got != 0 {
			t.Errorf("%v registrations dropped for BadDeviceToken", got)
		}
		for _, d := range devs {
			// Still registered: the push is accepted (and fails again at
			// APNs), the device's own API still knows it.
			apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, d.Endpoint, nil, "TTL", "60"), st.EndpointURL(), "60")
			a := apitiertest.Send(t, http.MethodGet, st.EndpointURL()+"/v1/apns/"+stacktest.APNsApp+"/registration/"+d.UAID+"/", nil,
				"Authorization", "Bearer "+d.Secret)
			if a.Status != http.StatusOK {
				t.Errorf("registration %s after BadDeviceToken: %d %s", d.UAID, a.Status, a.Body)
			}
		}

		gone := registerDevice(t, st, "apns", stacktest.APNsApp, apnsToken(t))
		st.APNs.Gone(gone.token)
		apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, gone.Endpoint, nil, "TTL", "60"), st.EndpointURL(), "60")
		waitFor(t, "the 410 registration to be dropped", func() bool {
			return metric(t, st, `autoendpoint_bridge_device_gone_total{result="dropped"}`) == 1
		})
		apitiertest.WantError(t, apitiertest.Send(t, http.MethodPost, gone.Endpoint, nil, "TTL", "60"), http.StatusGone, errno.InvalidSubscription)
	})
}

// A device that registered a new token while a push to its old one was
// in flight keeps its registration when the old token turns out gone,
// and the next push goes to the new token.
func TestE2EBridgeGoneAfterNewToken(t *testing.T) {
	st := bridgeStack(t, nil)
	d := registerDevice(t, st, "apns", stacktest.APNsApp, apnsToken(t))
	kept := metric(t, st, `autoendpoint_bridge_device_gone_total{result="kept"}`)
	st.APNs.Gone(d.token)
	release := st.APNs.Hold()
	defer release()
	apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, d.Endpoint, nil, "TTL", "60"), st.EndpointURL(), "60")
	waitFor(t, "the send to reach APNs", func() bool { return st.APNs.InFlight() == 1 })
	newToken := apnsToken(t)
	body, _ := json.Marshal(map[string]string{"token": newToken})
	a := apitiertest.Send(t, http.MethodPut, st.EndpointURL()+"/v1/apns/"+stacktest.APNsApp+"/registration/"+d.UAID, body,
		"Authorization", "Bearer "+d.Secret)
	if a.Status != http.StatusOK {
		t.Fatalf("update token: %d %s", a.Status, a.Body)
	}
	release()
	if p := finalPush(t, st, d.UAID); p.State != storage.PushFailed {
		t.Fatalf("push to the gone token: %s", p.State)
	}
	waitFor(t, "the verdict to be handled", func() bool {
		return metric(t, st, `autoendpoint_bridge_device_gone_total{result="kept"}`) == kept+1
	})
	apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, d.Endpoint, nil, "TTL", "60"), st.EndpointURL(), "60")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.APNs.WaitCount(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := st.APNs.Log()[1]; got.Token != newToken || got.Status != http.StatusOK {
		t.Errorf("second push to %s answered %d, want the new token %s", got.Token, got.Status, newToken)
	}
}

// APNs's transient answers: 429 with Retry-After and 503 are retried, an
// expired provider token (403) is an auth failure after which a fresh JWT
// is signed, and the push is sent.
func TestE2EBridgeAPNsRetries(t *testing.T) {
	st := bridgeStack(t, func(c *stack.Config) { c.Sender.APNsConfig.Timeout = time.Second })
	for _, c := range []struct {
		name  string
		fault apnsfake.Fault
		auth  float64
	}{
		{"429", apnsfake.Fault{Status: 429, Reason: "TooManyRequests", RetryAfter: "1"}, 0},
		{"503", apnsfake.Fault{Status: 503, Reason: "ServiceUnavailable"}, 0},
		{"403", apnsfake.Fault{Status: 403, Reason: "ExpiredProviderToken"}, 1},
		{"timeout", apnsfake.Fault{Delay: 3 * time.Second}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			auth := metric(t, st, `autosender_auth_failures_total{provider="apns"}`)
			st.APNs.Queue(c.fault)
			d := registerDevice(t, st, "apns", stacktest.APNsApp, apnsToken(t))
			apitiertest.WantCreated(t, apitiertest.Send(t, http.MethodPost, d.Endpoint, nil, "TTL", "600"), st.EndpointURL(), "600")
			p := finalPush(t, st, d.UAID)
			if p.State != storage.PushSent || len(p.Attempts) != 2 || p.Attempts[0].Status != storage.AttemptError ||
				p.Attempts[0].ProviderCode != c.fault.Status {
				t.Fatalf("push %s, attempts %+v", p.State, p.Attempts)
			}
			if c.fault.Reason != "" && p.Attempts[0].ProviderReason != c.fault.Reason {
				t.Errorf("first attempt's reason %q, want %q", p.Attempts[0].ProviderReason, c.fault.Reason)
			}
			if got := metric(t, st, `autosender_auth_failures_total{provider="apns"}`); got != auth+c.auth {
				t.Errorf("auth failures %v, want %v", got, auth+c.auth)
			}
		})
	}
}

// A push the bridges cannot take is refused before anything is queued:
// data over the provider's limit (413 errno 104), a registration whose
// app id is no longer configured (502 errno 900).
func TestE2EBridgeRefused(t *testing.T) {
	st := bridgeStack(t, func(c *stack.Config) { c.Sender.FCMConfig.MaxData = 1000 })
	d := registerDevice(t, st, "fcm", stacktest.FCMApp, "fcm-refused-token-0001")
	tooLarge := apitiertest.Send(t, http.MethodPost, d.Endpoint, make([]byte, 1000), "TTL", "60", "Content-Encoding", "aes128gcm")
	apitiertest.WantError(t, tooLarge, http.StatusRequestEntityTooLarge, errno.PayloadTooLarge)
	// The message names neither this node's packages nor its settings.
	if b := string(tooLarge.Body); strings.Contains(b, "bridge:") || strings.Contains(b, "fcm") {
		t.Errorf("413 %s names internals", b)
	}
	// A record for an app this node does not serve (the operator removed
	// it from fcm-apps).
	u, err := st.Store.GetUser(context.Background(), uuid.MustParse(d.UAID))
	if err != nil {
		t.Fatal(err)
	}
	u.RouterData = map[string]string{"token": d.token, "app_id": "removed-app"}
	u.ConnectedAt++
	if err := st.Store.Connect(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	apitiertest.WantError(t, apitiertest.Send(t, http.MethodPost, d.Endpoint, nil, "TTL", "60"), http.StatusBadGateway, errno.BridgeConfig)
	if n := metric(t, st, "autoendpoint_bridge_misconfigured_total"); n != 1 {
		t.Errorf("misconfigured %v, want 1", n)
	}
	if ps := pushesOf(t, st, d.UAID); len(ps) != 0 || st.FCM.Sends() != 0 {
		t.Errorf("refused pushes queued %d, sent %d", len(ps), st.FCM.Sends())
	}
}

// An application server's DELETE of a bridged push's Location withdraws
// it while it waits in the sender (here between retries): FAILED unsent,
// the cause in its attempt log. A push FCM has already taken stays SENT.
func TestE2EBridgeWithdraw(t *testing.T) {
	forBackends(t, func(t *testing.T, through func(storage.Store) storage.Store) {
		st := stacktest.StartWith(t, stacktest.Options{Bridges: true, Through: through})
		throttled := fcmfake.Error(429, "RESOURCE_EXHAUSTED", "quota", "QUOTA_EXCEEDED")
		throttled.Header = http.Header{"Retry-After": {"3600"}}
		st.FCM.Queue(throttled)
		d := registerDevice(t, st, "fcm", stacktest.FCMApp, "fcm-withdraw-token-01")
		a := apitiertest.Send(t, http.MethodPost, d.Endpoint, nil, "TTL", "600")
		apitiertest.WantCreated(t, a, st.EndpointURL(), "600")
		waitFor(t, "the push to wait for its retry", func() bool {
			ps := pushesOf(t, st, d.UAID)
			return len(ps) == 1 && ps[0].State == storage.PushRetry
		})
		del := apitiertest.Send(t, http.MethodDelete, a.Header.Get("Location"), nil)
		if del.Status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", del.Status, del.Body)
		}
		p := finalPush(t, st, d.UAID)
		if last := p.LastAttempt(); p.State != storage.PushFailed || len(p.Attempts) != 2 || !strings.Contains(last.Cause, "withdrawn") {
			t.Fatalf("withdrawn push %s, attempts %+v", p.State, p.Attempts)
		}
		if got := metric(t, st, `autoendpoint_message_deletes_total{result="withdrawn"}`); got != 1 {
			t.Errorf("deletes{withdrawn} = %v, want 1", got)
		}
		if got := metric(t, st, `autosender_withdrawn_total{provider="fcm"}`); got != 1 {
			t.Errorf("autosender_withdrawn_total = %v, want 1", got)
		}

		sent := registerDevice(t, st, "fcm", stacktest.FCMApp, "fcm-withdraw-token-02")
		a = apitiertest.Send(t, http.MethodPost, sent.Endpoint, nil, "TTL", "600")
		apitiertest.WantCreated(t, a, st.EndpointURL(), "600")
		if p := finalPush(t, st, sent.UAID); p.State != storage.PushSent {
			t.Fatalf("second push %s %+v", p.State, p.Attempts)
		}
		if del := apitiertest.Send(t, http.MethodDelete, a.Header.Get("Location"), nil); del.Status != http.StatusNoContent {
			t.Fatalf("DELETE of a sent push: %d %s", del.Status, del.Body)
		}
		if p := pushesOf(t, st, sent.UAID); len(p) != 1 || p[0].State != storage.PushSent {
			t.Fatalf("a sent push after DELETE: %+v", p)
		}
		if got := metric(t, st, `autoendpoint_message_deletes_total{result="withdrawn"}`); got != 1 {
			t.Errorf("deletes{withdrawn} = %v after deleting a sent push, want 1", got)
		}
		if n := st.FCM.Sends(); n != 2 {
			t.Errorf("FCM got %d sends, want 2 (the 429 and the second push)", n)
		}
	})
}
