// Package stacktest runs the whole service in one test process: a
// connection node and an endpoint node over one embedded store, on
// loopback, wired as a deployment wires them. The tests of the tools and
// of the docs use it to check what they say against running nodes.
//
// It must never be imported by non-test code.
package stacktest

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/storage/embedded"
	"github.com/google/uuid"
)

// Stack is one running deployment.
type Stack struct {
	Engine *engine.Server
	API    *apitier.Server
	Store  *embedded.Store
	// EndpointURL is the API tier's public URL (its real address): push
	// endpoints are minted under it and VAPID tokens name its origin.
	EndpointURL string
}

// Start runs both tiers until the test ends.
func Start(t testing.TB) *Stack {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { store.Close() })

	// The endpoint URL must name the API tier's port before either tier
	// is made (the engine mints endpoints with it, the API tier checks
	// VAPID audiences against it), so the port is picked first.
	addr := et.FreeAddr(t)
	url := "http://" + addr

	ecfg := et.Config()
	ecfg.EndpointURL = url
	node := et.Start(t, store, ecfg)

	acfg := apitier.DefaultConfig()
	acfg.Listen, acfg.EndpointURL, acfg.CryptoKey = addr, url, et.TestKey
	acfg.VersionFile, acfg.RequestLog = "", false
	acfg.ShutdownTimeout = 5 * time.Second
	api, err := apitier.New(acfg, store, log)
	if err != nil {
		t.Fatalf("apitier.New: %v", err)
	}
	if err := api.Start(); err != nil {
		t.Fatalf("apitier start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		api.Shutdown(ctx)
	})
	return &Stack{Engine: node, API: api, Store: store, EndpointURL: url}
}

// Subscriber is a user agent with one subscription: its websocket, the
// endpoint it was given, and the keys a push to it is encrypted for.
type Subscriber struct {
	*et.Client
	UAID, CHID, Endpoint string
	Private              *ecdh.PrivateKey // the p256dh key pair
	Auth                 []byte           // the auth secret (16 bytes)
}

// Subscribe connects a new user agent and registers one channel; a
// non-empty vapidKey (an application server's public key, base64url)
// makes a v2 endpoint bound to it.
func (s *Stack) Subscribe(t testing.TB, vapidKey string) *Subscriber {
	t.Helper()
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sub := &Subscriber{Client: et.Dial(t, s.Engine.Addr()), CHID: uuid.NewString(), Private: priv, Auth: make([]byte, 16)}
	rand.Read(sub.Auth)
	sub.UAID = sub.Hello("")
	r := sub.Register(sub.CHID, vapidKey)
	ep, _ := r["pushEndpoint"].(string)
	if r["status"] != 200.0 || ep == "" {
		t.Fatalf("register reply %v", r)
	}
	sub.Endpoint = ep
	return sub
}

// P256DH is the subscription's public key as a subscription's JSON gives it.
func (sub *Subscriber) P256DH() string {
	return base64.RawURLEncoding.EncodeToString(sub.Private.PublicKey().Bytes())
}

// AuthSecret is the auth secret as a subscription's JSON gives it.
func (sub *Subscriber) AuthSecret() string { return base64.RawURLEncoding.EncodeToString(sub.Auth) }

// SubscriptionJSON is what PushSubscription.toJSON() gives an application.
func (sub *Subscriber) SubscriptionJSON() string {
	b, _ := json.Marshal(map[string]any{
		"endpoint": sub.Endpoint,
		"keys":     map[string]string{"p256dh": sub.P256DH(), "auth": sub.AuthSecret()},
	})
	return string(b)
}

// Receive reads the next notification, decrypts it (aes128gcm or aesgcm,
// as its headers say), acks it and returns the plaintext.
func (sub *Subscriber) Receive(t testing.TB) string {
	t.Helper()
	m := sub.Read()
	if m["messageType"] != "notification" || m["channelID"] != sub.CHID {
		t.Fatalf("expected a notification for %s, got %v", sub.CHID, m)
	}
	version, _ := m["version"].(string)
	sub.Ack(sub.CHID, version)
	data, _ := m["data"].(string)
	if data == "" {
		return ""
	}
	body, err := base64.RawURLEncoding.DecodeString(data)
	if err != nil {
		t.Fatalf("notification data is not base64url: %v", err)
	}
	hdrs, _ := m["headers"].(map[string]any)
	var plain []byte
	switch enc, _ := hdrs["encoding"].(string); enc {
	case "aes128gcm":
		plain, err = pushcrypto.DecryptAES128GCM(body, sub.Private, sub.Auth)
	case "aesgcm":
		encryption, _ := hdrs["encryption"].(string)
		cryptoKey, _ := hdrs["crypto_key"].(string)
		salt, dh, rs, perr := pushcrypto.ParseAESGCMHeaders(encryption, cryptoKey)
		if perr != nil {
			t.Fatalf("aesgcm headers %v: %v", hdrs, perr)
		}
		plain, err = pushcrypto.DecryptAESGCM(body, salt, dh, sub.Private, sub.Auth, pushcrypto.RecordSize(rs))
	default:
		t.Fatalf("notification encoding %q", enc)
	}
	if err != nil {
		t.Fatalf("decrypt: %v", err)
	}
	return string(plain)
}

// Metrics returns the /metrics text of the engine (its node API) and of
// the API tier.
func (s *Stack) Metrics(t testing.TB) (engineText, apiText string) {
	t.Helper()
	return get(t, "http://"+s.Engine.RouterAddr()+"/metrics"), get(t, s.EndpointURL+"/metrics")
}

func get(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}
