package e2e

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// device is a phone registered through the bridge registration API with
// the WebPush keys Firefox for Android and iOS make for a subscription.
type device struct {
	endpoint, chid string
	fcm            bool // else APNs
	priv           *ecdh.PrivateKey
	auth           []byte
}

func registerPhone(t *testing.T, st *stacktest.Stack, typ, app, token, vapidPublic string) device {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"token": token, "key": vapidPublic})
	a := apitiertest.Send(t, http.MethodPost, st.EndpointURL()+"/v1/"+typ+"/"+app+"/registration", body, "Content-Type", "application/json")
	var r struct{ ChannelID, Endpoint string }
	if a.Status != http.StatusOK || json.Unmarshal(a.Body, &r) != nil || !strings.Contains(r.Endpoint, "/wpush/v2/") {
		t.Fatalf("register %s: %d %s (a registration with a key gets a v2 endpoint)", typ, a.Status, a.Body)
	}
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	return device{endpoint: r.Endpoint, chid: r.ChannelID, fcm: typ == "fcm", priv: k, auth: auth}
}

// decrypt reads a notification's data as Firefox for Android and iOS do:
// body (base64url), con, and for aesgcm enc and cryptokey; it reports
// whether the data carried a payload.
func (d device) decrypt(t *testing.T, data map[string]any) ([]byte, bool) {
	t.Helper()
	if data["chid"] != d.chid {
		t.Fatalf("chid %v, want %s", data["chid"], d.chid)
	}
	b64, ok := data["body"].(string)
	if !ok {
		return nil, false
	}
	body, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("body is not base64url: %v", err)
	}
	var plain []byte
	switch data["con"] {
	case "aes128gcm":
		plain, err = pushcrypto.DecryptAES128GCM(body, d.priv, d.auth)
	case "aesgcm":
		enc, _ := data["enc"].(string)
		ckey, _ := data["cryptokey"].(string)
		salt, dh, rs, perr := pushcrypto.ParseAESGCMHeaders(enc, ckey)
		if perr != nil {
			t.Fatalf("enc %q cryptokey %q: %v", enc, ckey, perr)
		}
		plain, err = pushcrypto.DecryptAESGCM(body, salt, dh, d.priv, d.auth, pushcrypto.RecordSize(rs))
	default:
		t.Fatalf("con %v", data["con"])
	}
	if err != nil {
		t.Fatalf("decrypt %v: %v", data["con"], err)
	}
	return plain, true
}

// TestWebPushNPMBridged: the real web-push package sends to endpoints of
// phones registered through the bridge registration API; the fake FCM and
// APNs receive data that decrypts (RFC 8291, and the legacy aesgcm) with
// the subscription's keys to what was sent.
func TestWebPushNPMBridged(t *testing.T) {
	dir := e2etest.WebPushNode(t)
	st := stacktest.StartWith(t, stacktest.Options{Bridges: true})
	var keys e2etest.VAPIDKeys
	e2etest.NodeJSON(t, dir, "keys.js", nil, &keys)
	var tok [32]byte
	rand.Read(tok[:])
	android := registerPhone(t, st, "fcm", stacktest.FCMApp, "fcm-npm-token-0001", keys.Public)
	ios := registerPhone(t, st, "apns", stacktest.APNsApp, hex.EncodeToString(tok[:]), keys.Public)

	// received is the data of the n-th message the phone's provider got.
	received := func(d device, n int) map[string]any {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if d.fcm {
			if err := st.FCM.WaitSends(ctx, n); err != nil {
				t.Fatal(err)
			}
			var m struct {
				Message struct {
					Android struct {
						Data map[string]any `json:"data"`
					} `json:"android"`
				} `json:"message"`
			}
			if err := json.Unmarshal(st.FCM.Log()[n-1].Body, &m); err != nil {
				t.Fatal(err)
			}
			return m.Message.Android.Data
		}
		if err := st.APNs.WaitCount(ctx, n); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(st.APNs.Log()[n-1].Body, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, d := range []device{android, ios} {
		n := 0
		for _, enc := range []string{"aes128gcm", "aesgcm", ""} {
			var payload any
			if enc != "" {
				payload = "hello phone, over " + enc + " ✓"
			}
			var res e2etest.SendResult
			e2etest.NodeJSON(t, dir, "send.js", map[string]any{
				"endpoint": d.endpoint, "p256dh": base64.RawURLEncoding.EncodeToString(d.priv.PublicKey().Bytes()),
				"auth": base64.RawURLEncoding.EncodeToString(d.auth), "payload": payload, "ttl": 120,
				"vapidPublic": keys.Public, "vapidPrivate": keys.Private, "subject": "mailto:ops@example.com",
				"encoding": map[bool]string{true: "aes128gcm", false: enc}[enc == ""],
			}, &res)
			if res.Status != http.StatusCreated || !strings.Contains(res.Headers["location"], "/m/") || res.Headers["ttl"] != "120" {
				t.Fatalf("%s: web-push got %+v", enc, res)
			}
			n++
			plain, ok := d.decrypt(t, received(d, n))
			if enc == "" {
				if ok {
					t.Fatalf("a push without payload arrived with data %q", plain)
				}
				continue
			}
			if !ok || string(plain) != payload {
				t.Fatalf("%s: decrypted %q, want %q", enc, plain, payload)
			}
		}
	}
}
