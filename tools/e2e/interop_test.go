package e2e

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	webpushgo "github.com/SherClockHolmes/webpush-go"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
	"github.com/google/uuid"
)

// subscribe registers a channel the way Firefox does for a page that
// passes an applicationServerKey: the key base64url WITH padding.
func subscribe(t *testing.T, c *et.Client, appServerKey string) (chid, endpoint string) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(appServerKey)
	if err != nil {
		t.Fatal(err)
	}
	chid = uuid.NewString()
	r := c.Register(chid, base64.URLEncoding.EncodeToString(raw))
	if r["status"] != 200.0 {
		t.Fatalf("register: %v", r)
	}
	endpoint = r["pushEndpoint"].(string)
	if !strings.Contains(endpoint, "/wpush/v2/") {
		t.Fatalf("a subscription with a key must get a v2 endpoint, got %s", endpoint)
	}
	return chid, endpoint
}

// receive reads the next notification, acks it and returns it decrypted
// (nil data for a push without payload).
func (a *agent) receive(t *testing.T, c *et.Client, chid string) ([]byte, bool) {
	t.Helper()
	r := c.Read()
	if r["messageType"] != "notification" || r["channelID"] != chid {
		t.Fatalf("expected a notification for %s, got %v", chid, r)
	}
	c.Ack(chid, r["version"].(string))
	data, ok := r["data"].(string)
	if !ok {
		return nil, false
	}
	body, err := base64.RawURLEncoding.DecodeString(data)
	if err != nil {
		t.Fatalf("data is not unpadded base64url: %v", err)
	}
	headers, _ := r["headers"].(map[string]any)
	var plain []byte
	switch headers["encoding"] {
	case "aes128gcm":
		plain, err = pushcrypto.DecryptAES128GCM(body, a.priv, a.auth)
	case "aesgcm":
		enc, _ := headers["encryption"].(string)
		ck, _ := headers["crypto_key"].(string)
		salt, dh, rs, perr := pushcrypto.ParseAESGCMHeaders(enc, ck)
		if perr != nil {
			t.Fatalf("aesgcm headers %v: %v", headers, perr)
		}
		plain, err = pushcrypto.DecryptAESGCM(body, salt, dh, a.priv, a.auth, pushcrypto.RecordSize(rs))
	default:
		t.Fatalf("notification headers %v", headers)
	}
	if err != nil {
		t.Fatalf("decrypt (%v): %v", headers["encoding"], err)
	}
	return plain, true
}

// TestWebPushNPM: the real web-push package (VAPID + aes128gcm, and the
// legacy aesgcm) sends through the API tier; the Go user agent decrypts.
func TestWebPushNPM(t *testing.T) {
	dir := e2etest.WebPushNode(t)
	svc := startService(t)
	var keys e2etest.VAPIDKeys
	e2etest.NodeJSON(t, dir, "keys.js", nil, &keys)

	ua := newAgent(t)
	c := et.Dial(t, svc.node.Addr())
	c.Hello("")
	chid, endpoint := subscribe(t, c, keys.Public)
	send := func(payload any, encoding, topic string) e2etest.SendResult {
		var res e2etest.SendResult
		e2etest.NodeJSON(t, dir, "send.js", map[string]any{
			"endpoint": endpoint, "p256dh": ua.p256dh(), "auth": ua.authKey(), "payload": payload,
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
		plain, ok := ua.receive(t, c, chid)
		if !ok || string(plain) != msg {
			t.Fatalf("%s: decrypted %q, want %q", enc, plain, msg)
		}
	}
	if res := send(nil, "aes128gcm", ""); res.Status != http.StatusCreated {
		t.Fatalf("push without payload: %+v", res)
	}
	if _, ok := ua.receive(t, c, chid); ok {
		t.Fatal("a push without payload arrived with data")
	}

	// A push signed by another application server is refused for a v2
	// endpoint bound to this one's key.
	var other e2etest.VAPIDKeys
	e2etest.NodeJSON(t, dir, "keys.js", nil, &other)
	var res e2etest.SendResult
	e2etest.NodeJSON(t, dir, "send.js", map[string]any{"endpoint": endpoint, "p256dh": ua.p256dh(), "auth": ua.authKey(),
		"payload": "x", "ttl": 60, "vapidPublic": other.Public, "vapidPrivate": other.Private, "subject": "mailto:a@example.com"}, &res)
	if res.Status != http.StatusUnauthorized || !strings.Contains(res.Body, `"errno":109`) {
		t.Fatalf("push with the wrong VAPID key: %+v", res)
	}
}

// TestWebPushGo: github.com/SherClockHolmes/webpush-go sends through the
// API tier (it signs with sub "mailto:" + subscriber); the Go user agent
// decrypts.
func TestWebPushGo(t *testing.T) {
	svc := startService(t)
	priv, pub, err := webpushgo.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	ua := newAgent(t)
	c := et.Dial(t, svc.node.Addr())
	c.Hello("")
	chid, endpoint := subscribe(t, c, pub)
	msg := []byte("hello from webpush-go")
	resp, err := webpushgo.SendNotification(msg, &webpushgo.Subscription{
		Endpoint: endpoint, Keys: webpushgo.Keys{P256dh: ua.p256dh(), Auth: ua.authKey()},
	}, &webpushgo.Options{Subscriber: "ops@example.com", VAPIDPublicKey: pub, VAPIDPrivateKey: priv, TTL: 120, Topic: "greeting"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("TTL") != "120" {
		t.Fatalf("webpush-go response %d %v %s", resp.StatusCode, resp.Header, body)
	}
	plain, ok := ua.receive(t, c, chid)
	if !ok || !bytes.Equal(plain, msg) {
		t.Fatalf("decrypted %q", plain)
	}
}
