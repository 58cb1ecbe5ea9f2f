package e2e

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	webpushgo "github.com/SherClockHolmes/webpush-go"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// subscribe connects a user agent and registers a channel the way
// Firefox does for a page that passes an applicationServerKey: the key
// base64url WITH padding.
func subscribe(t *testing.T, st *stacktest.Stack, appServerKey string) *stacktest.Subscriber {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(appServerKey)
	if err != nil {
		t.Fatal(err)
	}
	sub := st.Subscribe(t, base64.URLEncoding.EncodeToString(raw))
	if !strings.Contains(sub.Endpoint, "/wpush/v2/") {
		t.Fatalf("a subscription with a key must get a v2 endpoint, got %s", sub.Endpoint)
	}
	return sub
}

// receive reads the next notification, acks it and returns it decrypted
// (nil data for a push without payload).
func receive(t *testing.T, sub *stacktest.Subscriber) ([]byte, bool) {
	t.Helper()
	n := sub.Notification(t)
	sub.Ack(sub.CHID, n.Version)
	return n.Data, n.Data != nil
}

// TestWebPushNPM: the real web-push package (VAPID + aes128gcm, and the
// legacy aesgcm) sends through the API tier; the Go user agent decrypts.
func TestWebPushNPM(t *testing.T) {
	dir := e2etest.WebPushNode(t)
	st := stacktest.Start(t)
	var keys e2etest.VAPIDKeys
	e2etest.NodeJSON(t, dir, "keys.js", nil, &keys)

	ua := subscribe(t, st, keys.Public)
	send := func(payload any, encoding, topic string) e2etest.SendResult {
		var res e2etest.SendResult
		e2etest.NodeJSON(t, dir, "send.js", map[string]any{
			"endpoint": ua.Endpoint, "p256dh": ua.P256DH(), "auth": ua.AuthSecret(), "payload": payload,
			"ttl": 60, "topic": topic, "vapidPublic": keys.Public, "vapidPrivate": keys.Private,
			"subject": "mailto:ops@example.com", "encoding": encoding,
		}, &res)
		return res
	}

	for _, enc := range []string{"aes128gcm", "aesgcm"} {
		msg := "hello from web-push over " + enc + " ✓"
		res := send(msg, enc, "")
		if res.Status != http.StatusCreated || !strings.Contains(res.Headers["location"], "/m/") || res.Headers["ttl"] != "60" {
			t.Fatalf("%s: response %+v", enc, res)
		}
		plain, ok := receive(t, ua)
		if !ok || string(plain) != msg {
			t.Fatalf("%s: decrypted %q, want %q", enc, plain, msg)
		}
	}
	if res := send(nil, "aes128gcm", ""); res.Status != http.StatusCreated {
		t.Fatalf("push without payload: %+v", res)
	}
	if _, ok := receive(t, ua); ok {
		t.Fatal("a push without payload arrived with data")
	}

	// A push signed by another application server is refused for a v2
	// endpoint bound to this one's key.
	var other e2etest.VAPIDKeys
	e2etest.NodeJSON(t, dir, "keys.js", nil, &other)
	var res e2etest.SendResult
	e2etest.NodeJSON(t, dir, "send.js", map[string]any{"endpoint": ua.Endpoint, "p256dh": ua.P256DH(), "auth": ua.AuthSecret(),
		"payload": "x", "ttl": 60, "vapidPublic": other.Public, "vapidPrivate": other.Private, "subject": "mailto:a@example.com"}, &res)
	if res.Status != http.StatusUnauthorized || !strings.Contains(res.Body, `"errno":109`) {
		t.Fatalf("push with the wrong VAPID key: %+v", res)
	}
}

// TestWebPushGo: github.com/SherClockHolmes/webpush-go sends through the
// API tier (it signs with sub "mailto:" + subscriber); the Go user agent
// decrypts.
func TestWebPushGo(t *testing.T) {
	st := stacktest.Start(t)
	priv, pub, err := webpushgo.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	ua := subscribe(t, st, pub)
	msg := []byte("hello from webpush-go")
	resp, err := webpushgo.SendNotification(msg, &webpushgo.Subscription{
		Endpoint: ua.Endpoint, Keys: webpushgo.Keys{P256dh: ua.P256DH(), Auth: ua.AuthSecret()},
	}, &webpushgo.Options{Subscriber: "ops@example.com", VAPIDPublicKey: pub, VAPIDPrivateKey: priv, TTL: 120, Topic: "greeting"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("TTL") != "120" {
		t.Fatalf("webpush-go response %d %v %s", resp.StatusCode, resp.Header, body)
	}
	plain, ok := receive(t, ua)
	if !ok || !bytes.Equal(plain, msg) {
		t.Fatalf("decrypted %q", plain)
	}
}
