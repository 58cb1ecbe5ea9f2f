package stacktest

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/sender/sendertest/apnsfake"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// Stack is one running deployment and the store under it.
type Stack struct {
	*stack.Stack
	// Store is the embedded store both tiers use (through Options.Through
	// when set).
	Store *embedded.Store
	// tiers is the store the tiers use (Options.Through's, else Store):
	// what the checks (Stored, NodeID) read.
	tiers storage.Store
	// Swrve is the fake push provider the outbound sender sends to.
	Swrve *swrvefake.Fake
	// FCM and APNs are the bridges' fake providers (Options.Bridges).
	FCM  *fcmfake.Fake
	APNs *apnsfake.Fake
}

// Options change what StartWith runs. The zero value is Start's.
type Options struct {
	// Config changes the stack's settings (stack.Config.Engine and API
	// hold each tier's) before it starts.
	Config func(*stack.Config)
	// NoSync opens the store without fsync, for benchmarks of the tiers'
	// own cost.
	NoSync bool
	// Through returns the store the tiers use given the test's store: a
	// wrapper that orders or counts calls.
	Through func(storage.Store) storage.Store
	// Bridges configures the mobile bridges: the registration API open to
	// BridgeAuthKey, FCM app FCMApp sending to a fake FCM (Stack.FCM) and
	// APNs app APNsApp sending to a fake APNs (Stack.APNs) with a
	// provider-token key.
	Bridges bool
	// Log receives both tiers' logs (nil: discarded).
	Log *slog.Logger
}

// The bridges' settings in a stack started with Options.Bridges.
const (
	BridgeAuthKey = "stacktest-bridge-auth-key"
	FCMApp        = "fcm-app"
	FCMProject    = "stacktest-project"
	APNsApp       = "firefox"
	APNsTopic     = "org.mozilla.ios.Firefox"
)

// startBridges starts the fake FCM and APNs and points cfg at them.
func startBridges(t testing.TB, cfg *stack.Config) (*fcmfake.Fake, *apnsfake.Fake) {
	t.Helper()
	dir := t.TempDir()
	fcm, err := fcmfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fcm.Close() })
	acct, err := fcm.NewAccount(FCMProject)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := acct.WriteFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	apns, err := apnsfake.Start(apnsfake.Options{Topic: APNsTopic})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { apns.Close() })
	key, err := apnsfake.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	apns.AddKey(key)
	keyFile, err := key.WriteFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := apns.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	fcmApps, _ := json.Marshal(map[string]any{FCMApp: map[string]string{"project_id": FCMProject, "credentials": creds}})
	apnsApps, _ := json.Marshal(map[string]any{APNsApp: map[string]string{"topic": APNsTopic, "endpoint": apns.URL(),
		"key": keyFile, "key_id": key.ID, "team_id": key.TeamID}})
	cfg.API.BridgeAuthKeys = []string{BridgeAuthKey}
	cfg.Sender.FCMConfig.Apps, cfg.Sender.FCMConfig.URL, cfg.Sender.FCMConfig.Timeout = string(fcmApps), fcm.URL(), 5*time.Second
	cfg.Sender.APNsConfig.Apps, cfg.Sender.APNsConfig.CAFile, cfg.Sender.APNsConfig.Timeout = string(apnsApps), ca, 5*time.Second
	return fcm, apns
}

// Config is the stack's config in tests: the websocket and node API
// listeners on free loopback ports, the HTTP API on a free port picked
// first (the endpoint URL names it), the test CRYPTO_KEY and node secret
// (enginetest.TestKey, TestSecret), quick timeouts,
// no version file, no request log.
func Config(t testing.TB) stack.Config {
	t.Helper()
	cfg := stack.DefaultConfig()
	cfg.WSListen, cfg.NodeListen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0", et.FreeAddr(t)
	cfg.CryptoKey, cfg.NodeSecret = et.TestKey, et.TestSecret
	cfg.Engine.DrainWindow = 200 * time.Millisecond
	cfg.Engine.StorageTimeout = 10 * time.Second
	cfg.Engine.VersionFile = ""
	cfg.API.VersionFile, cfg.API.RequestLog = "", false
	cfg.API.ShutdownTimeout = 5 * time.Second
	cfg.API.MetricsListen = "127.0.0.1:0"
	// The outbound sender: its API open to PushAPIKey (the admin key-1)
	// and to TeamA and TeamB (push-clients-file), its jobs quick,
	// and its provider on loopback (StartWith points it at a fake Swrve;
	// nothing listens on port 1).
	cfg.API.PushAPIKeys = []string{PushAPIKey}
	cfg.API.PushClientsFile = WriteClients(t, TeamA, TeamB)
	cfg.Sender.SwrveConfig.URL = "http://127.0.0.1:1/push"
	cfg.Sender.SwrveConfig.Timeout = 5 * time.Second
	cfg.Sender.SenderConfig.Node = "stacktest"
	cfg.Sender.SenderConfig.ScheduledStart, cfg.Sender.SenderConfig.PendingStart = 0, 0
	cfg.Sender.SenderConfig.ScheduledInterval, cfg.Sender.SenderConfig.PendingInterval = 100*time.Millisecond, 100*time.Millisecond
	cfg.Sender.SenderConfig.ScheduledPortion, cfg.Sender.SenderConfig.PendingPortion = 20, 20
	return cfg
}

// PushAPIKey opens the outbound sender's API of a test stack
// (Authorization: Bearer PushAPIKey): push-api-keys' admin client key-1.
const PushAPIKey = "stacktest-push-api-key"

// PushClient is a client of a test stack's push API with its key.
type PushClient struct {
	clients.Client
	Key string
}

// The clients of a test stack's push-clients-file: two teams that may
// send and read their own pushes, TeamA with quotas far above what a test
// posts (so that its quota metrics are served), TeamB without.
var (
	TeamA = PushClient{clients.Client{Name: "team-a", KeyHash: clients.Hash("stacktest-team-a-key"),
		Scopes: []clients.Scope{clients.Send, clients.Read}, Rate: 1000, Outstanding: 10000}, "stacktest-team-a-key"}
	TeamB = PushClient{clients.Client{Name: "team-b", KeyHash: clients.Hash("stacktest-team-b-key"),
		Scopes: []clients.Scope{clients.Send, clients.Read}}, "stacktest-team-b-key"}
)

// WriteClients writes a push-clients-file of cs in a new directory and
// returns its path.
func WriteClients(t testing.TB, cs ...PushClient) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "push-clients.yaml")
	ReplaceClients(t, path, cs...)
	return path
}

// ReplaceClients replaces the push-clients-file at path with one of cs,
// by renaming a new file over it as a deployment tool does (a poll never
// reads half a file).
func ReplaceClients(t testing.TB, path string, cs ...PushClient) {
	t.Helper()
	text := "clients:\n"
	for _, c := range cs {
		text += clients.Entry(c.Client)
	}
	if len(cs) == 0 {
		text = "clients: {}\n" // "clients:" alone is refused (clients.ErrNoClients)
	}
	if err := os.WriteFile(path+".new", []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// PushPrototype is the message prototype a test stack's Swrve keys map
// (on IOS and ANDROID); any other but RefusedPrototype is refused at
// POST /push (400 naming messagePrototypeKey).
const PushPrototype = "Hello"

// RefusedPrototype is mapped to a campaign key the fake Swrve does not
// know: a push of it is accepted, and FAILED when Swrve answers 403.
const RefusedPrototype = "Revoked"

// Start runs both tiers until the test ends.
func Start(t testing.TB) *Stack { return StartWith(t, Options{}) }

// StartWith runs both tiers as o says until the test ends, then drains
// them.
func StartWith(t testing.TB, o Options) *Stack {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if o.Log != nil {
		log = o.Log
	}
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir(), NoSync: o.NoSync, Logger: log})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	var through storage.Store = store
	if o.Through != nil {
		through = o.Through(store)
	}
	cfg := Config(t)
	fake, err := swrvefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	keys := filepath.Join(t.TempDir(), "swrve-keys.yaml")
	if err := os.WriteFile(keys, []byte("swrve:\n  messagePrototypePushKeys:\n    '"+PushPrototype+"': {IOS: k-ios, ANDROID: k-android}\n"+
		"    '"+RefusedPrototype+"': {IOS: k-revoked, ANDROID: k-revoked}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fake.SetKeys("k-ios", "k-android")
	cfg.Sender.SwrveConfig.URL, cfg.Sender.SwrveConfig.KeysFile = fake.URL(), keys
	var fcm *fcmfake.Fake
	var apns *apnsfake.Fake
	if o.Bridges {
		fcm, apns = startBridges(t, &cfg)
	}
	if o.Config != nil {
		o.Config(&cfg)
	}
	picked := cfg.HTTPListen
	var st *stack.Stack
	for attempt := 1; ; attempt++ {
		if st, err = stack.New(cfg, through, log); err != nil {
			t.Fatalf("stack.New: %v", err)
		}
		err = st.Start()
		if err == nil {
			break
		}
		if p := st.Pushes(); p != nil {
			p.Close()
		}
		// The HTTP port was free when Config picked it, then released: an
		// outgoing connection may have taken it since (the kernel draws
		// both from its ephemeral range). Another free port, unless the
		// test chose its own.
		if !errors.Is(err, syscall.EADDRINUSE) || cfg.HTTPListen != picked || attempt == 3 {
			t.Fatalf("stack start: %v", err)
		}
		t.Logf("stack start: %v; another port", err)
		cfg.HTTPListen = et.FreeAddr(t)
		picked = cfg.HTTPListen
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Shutdown(ctx); err != nil {
			t.Errorf("stack shutdown: %v", err)
		}
	})
	return &Stack{Stack: st, Store: store, tiers: through, Swrve: fake, FCM: fcm, APNs: apns}
}

// NodeID is the node_id of uaid's router record ("" when none is named).
func (s *Stack) NodeID(t testing.TB, uaid string) string {
	t.Helper()
	return s.user(t, uaid).NodeID
}

// NodeConnectedAt is the connected_at of uaid's router record.
func (s *Stack) NodeConnectedAt(t testing.TB, uaid string) int64 {
	t.Helper()
	return s.user(t, uaid).ConnectedAt
}

func (s *Stack) user(t testing.TB, uaid string) storage.User {
	t.Helper()
	u, err := s.tiers.GetUser(context.Background(), uuid.MustParse(uaid))
	if err != nil {
		t.Fatalf("get user %s: %v", uaid, err)
	}
	return u
}

// Stored returns every message stored for uaid.
func (s *Stack) Stored(t testing.TB, uaid string) []storage.Message {
	t.Helper()
	return apitiertest.Stored(t, s.tiers, uuid.MustParse(uaid))
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
	sub := &Subscriber{Client: et.Dial(t, s.WSAddr()), CHID: uuid.NewString(), Private: priv, Auth: make([]byte, 16)}
	rand.Read(sub.Auth)
	sub.UAID = sub.Hello("")
	r := sub.Register(sub.CHID, vapidKey)
	ep, _ := r["pushEndpoint"].(string)
	if r["status"] != 200.0 || !strings.HasPrefix(ep, s.EndpointURL()+"/wpush/") {
		t.Fatalf("register reply %v (endpoints under %s)", r, s.EndpointURL())
	}
	sub.Endpoint = ep
	return sub
}

// Left is a user agent that subscribed and left: once it returns, the
// node has cleared the router record's node_id, so a push to it is stored
// by the endpoint under the id the endpoint answers. (Before that, a push
// is written to the closing socket and stored by the node as it closes,
// under a new sort key.)
func (s *Stack) Left(t testing.TB) *Subscriber {
	t.Helper()
	sub := s.Subscribe(t, "")
	sub.Close()
	et.Eventually(t, 5*time.Second, "node_id cleared by the node", func() bool { return s.NodeID(t, sub.UAID) == "" })
	return sub
}

// Reconnect opens a new connection for sub's user agent (hello with its
// uaid) and returns it with the same subscription; sub's own connection is
// left as it is.
func (s *Stack) Reconnect(t testing.TB, sub *Subscriber) *Subscriber {
	t.Helper()
	again := *sub
	again.Client = et.Dial(t, s.WSAddr())
	if uaid := again.Hello(sub.UAID); uaid != sub.UAID {
		t.Fatalf("hello: uaid %s, want %s", uaid, sub.UAID)
	}
	return &again
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

// Notification is a notification as the user agent got it.
type Notification struct {
	Version  string
	Encoding string // aes128gcm or aesgcm; "" without data
	Data     []byte // decrypted; nil when it carried no data
	// ReliabilityID is its reliability_id (a tracked push's fate id);
	// nil when it had none.
	ReliabilityID *string
}

// Notification reads the next message, which must be a notification for
// the subscription, and decrypts it (aes128gcm or aesgcm, as its headers
// say). It does not ack.
func (sub *Subscriber) Notification(t testing.TB) Notification {
	t.Helper()
	m := sub.Read()
	if m["messageType"] != "notification" || m["channelID"] != sub.CHID {
		t.Fatalf("expected a notification for %s, got %v", sub.CHID, m)
	}
	n := Notification{}
	n.Version, _ = m["version"].(string)
	if id, ok := m["reliability_id"]; ok {
		s, _ := id.(string)
		n.ReliabilityID = &s
	}
	data, ok := m["data"].(string)
	if !ok {
		return n
	}
	body, err := base64.RawURLEncoding.DecodeString(data)
	if err != nil {
		t.Fatalf("notification data is not base64url: %v", err)
	}
	hdrs, _ := m["headers"].(map[string]any)
	n.Encoding, _ = hdrs["encoding"].(string)
	switch n.Encoding {
	case "aes128gcm":
		n.Data, err = pushcrypto.DecryptAES128GCM(body, sub.Private, sub.Auth)
	case "aesgcm":
		encryption, _ := hdrs["encryption"].(string)
		cryptoKey, _ := hdrs["crypto_key"].(string)
		salt, dh, rs, perr := pushcrypto.ParseAESGCMHeaders(encryption, cryptoKey)
		if perr != nil {
			t.Fatalf("aesgcm headers %v: %v", hdrs, perr)
		}
		n.Data, err = pushcrypto.DecryptAESGCM(body, salt, dh, sub.Private, sub.Auth, pushcrypto.RecordSize(rs))
	default:
		t.Fatalf("notification encoding %q", n.Encoding)
	}
	if err != nil {
		t.Fatalf("decrypt (%s): %v", n.Encoding, err)
	}
	if n.Data == nil {
		n.Data = []byte{}
	}
	return n
}

// Receive reads the next notification, decrypts it, acks it and returns
// the plaintext.
func (sub *Subscriber) Receive(t testing.TB) string {
	t.Helper()
	n := sub.Notification(t)
	sub.Ack(sub.CHID, n.Version)
	return string(n.Data)
}

// Metrics returns the /metrics text of the engine (its node API) and of
// the API tier.
func (s *Stack) Metrics(t testing.TB) (engineText, apiText string) {
	t.Helper()
	return get(t, "http://"+s.NodeAddr()+"/metrics"), get(t, "http://"+s.MetricsAddr()+"/metrics")
}

func get(t testing.TB, url string) string {
	t.Helper()
	a := apitiertest.Send(t, http.MethodGet, url, nil)
	if a.Status != http.StatusOK {
		t.Fatalf("GET %s: %d", url, a.Status)
	}
	return string(a.Body)
}
