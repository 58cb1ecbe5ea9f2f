package sender_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/fcm"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/sender/swrve"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// bridgeRig is a sender with Swrve and FCM (a fake FCM on loopback).
type bridgeRig struct {
	s     *sender.Sender
	fcm   *fcmfake.Fake
	store storage.Store
}

func newBridgeRig(t *testing.T) *bridgeRig {
	t.Helper()
	return newBridgeRigWith(t, func(p provider.Provider) provider.Provider { return p })
}

// newBridgeRigWith is newBridgeRig with the FCM client wrapped.
func newBridgeRigWith(t *testing.T, wrap func(provider.Provider) provider.Provider) *bridgeRig {
	t.Helper()
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	fake, err := fcmfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	acct, err := fake.NewAccount("project")
	if err != nil {
		t.Fatal(err)
	}
	fc := fcm.DefaultConfig()
	apps, _ := json.Marshal(map[string]any{"android": map[string]string{"project_id": "project", "credentials": string(acct.JSON())}})
	fc.Apps, fc.URL, fc.Timeout = string(apps), fake.URL(), 2*time.Second
	fcmClient, err := fcm.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	swrveClient, err := swrve.New(swrveConfig("http://127.0.0.1:9/push"), swrve.NewKeys(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := runSender(t, store, testConfig("bridged"), swrveClient, wrap(fcmClient))
	<-s.Ready()
	return &bridgeRig{s: s, fcm: fake, store: store}
}

// tokenPanic is a bridge whose Send panics quoting the device token, as
// a provider client's bug may: what no provider hides itself.
type tokenPanic struct{ provider.Provider }

func (p tokenPanic) Send(ctx context.Context, n *provider.Notification) provider.Result {
	panic("no app for token " + n.Token)
}

// A bridged push's attempt never records its device token, whatever the
// provider returns (here a panic's text: the attempt's cause).
func TestBridgedAttemptHidesToken(t *testing.T) {
	r := newBridgeRigWith(t, func(p provider.Provider) provider.Provider { return tokenPanic{p} })
	req := bridgedRequest(60)
	req.PushKey = "device-token-" + strings.Repeat("z9", 20)
	p, err := r.s.Accept(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := waitState(t, r.s, p.ID, storage.PushFailed)
	a := got.LastAttempt()
	if !strings.Contains(a.Cause, "panicked: no app for token "+provider.RedactedToken) {
		t.Fatalf("attempt %+v, want the panic as its cause", a)
	}
	if strings.Contains(a.Cause+a.ProviderMessage+a.ProviderReason, req.PushKey) {
		t.Errorf("the attempt holds the device token: %+v", a)
	}
}

func bridgedRequest(ttl int64) sender.Request {
	return sender.Request{Provider: "fcm", Platform: "ANDROID", PushKey: "device-token",
		Bridge: &storage.PushBridge{UAID: uuid.New(), CHID: uuid.New(), AppID: "android", TTL: ttl, Urgency: "low", Topic: "t1",
			Data: map[string]string{"chid": "c"}}}
}

func metricOf(s *sender.Sender, series string) string {
	var b bytes.Buffer
	s.WriteMetrics(&b)
	for line := range strings.Lines(b.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			return v
		}
	}
	return ""
}

// Bridged requests go only to bridges, and bridges take only them.
func TestBridgedRequestRules(t *testing.T) {
	r := newBridgeRig(t)
	ok := bridgedRequest(60)
	for name, req := range map[string]sender.Request{
		"bridged to swrve":  func() sender.Request { q := ok; q.Provider = "swrve"; return q }(),
		"swrve push to fcm": {Provider: "fcm", Platform: "ANDROID", PrototypeKey: "Hello", PushKey: "u", Message: "hi"},
		"with a message":    func() sender.Request { q := ok; q.Message = "hi"; return q }(),
		"no token":          func() sender.Request { q := ok; q.PushKey = ""; return q }(),
		"bad platform":      func() sender.Request { q := ok; q.Platform = "WEB"; return q }(),
		"no app id":         func() sender.Request { q := ok; b := *q.Bridge; b.AppID = ""; q.Bridge = &b; return q }(),
		"negative TTL":      func() sender.Request { q := ok; b := *q.Bridge; b.TTL = -1; q.Bridge = &b; return q }(),
		"with a cron":       func() sender.Request { q := ok; q.CronExpression = "* * * * * ?"; return q }(),
	} {
		_, err := r.s.Accept(context.Background(), req)
		var fe *sender.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a field error", name, err)
		}
	}
	if _, err := r.s.Accept(context.Background(), ok); err != nil {
		t.Fatalf("a good bridged request: %v", err)
	}
}

// The provider gets what is left of the TTL, the priority of the
// Urgency and the Topic as collapse key.
func TestBridgedNotification(t *testing.T) {
	r := newBridgeRig(t)
	p, err := r.s.Accept(context.Background(), bridgedRequest(3600))
	if err != nil {
		t.Fatal(err)
	}
	if got := waitState(t, r.s, p.ID, ""); got.State != storage.PushSent {
		t.Fatalf("state %s", got.State)
	}
	body := string(r.fcm.Log()[0].Body)
	if !strings.Contains(body, `"priority":"NORMAL"`) || !strings.Contains(body, `"collapse_key":"t1"`) ||
		!(strings.Contains(body, `"ttl":"3600s"`) || strings.Contains(body, `"ttl":"3599s"`)) {
		t.Fatalf("FCM got %s", body)
	}
}

// A bridged push whose TTL passed while it waited is FAILED without a
// call, its cause in the attempt log, and counted.
func TestBridgedExpiry(t *testing.T) {
	r := newBridgeRig(t)
	req := bridgedRequest(60)
	created := time.Now().Add(-2 * time.Minute).UnixMilli()
	p := storage.Push{ID: uuid.Must(uuid.NewV7()), Provider: "fcm", Platform: req.Platform, PushKey: req.PushKey,
		State: storage.PushPending, At: time.Now().UnixMilli(), Created: created, Updated: created, Version: 1, Bridge: req.Bridge}
	if err := r.store.SavePush(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	got := waitState(t, r.s, p.ID, "")
	if got.State != storage.PushFailed || len(got.Attempts) != 1 || !strings.Contains(got.Attempts[0].Cause, "TTL passed") {
		t.Fatalf("push %s, attempts %+v", got.State, got.Attempts)
	}
	if r.fcm.Sends() != 0 {
		t.Fatalf("an expired push was sent")
	}
	if v := metricOf(r.s, `autosender_expired_total{provider="fcm"}`); v != "1" {
		t.Fatalf("expired counted %q, want 1", v)
	}
	// A TTL still running (the bridges' minimum of 60 s counts) is sent.
	p.ID, p.Created, p.At = uuid.Must(uuid.NewV7()), time.Now().Add(-30*time.Second).UnixMilli(), time.Now().UnixMilli()
	p.Bridge = &storage.PushBridge{UAID: req.Bridge.UAID, CHID: req.Bridge.CHID, AppID: "android", TTL: 0, Data: req.Bridge.Data}
	if err := r.store.SavePush(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got := waitState(t, r.s, p.ID, ""); got.State != storage.PushSent {
		t.Fatalf("TTL 0 push 30 s old: %s %+v", got.State, got.Attempts)
	}
}

// Withdraw finishes a push that has not reached the provider (FAILED, its
// cause in the attempt log, counted) and leaves alone one that has, or
// one whose call is in flight; a request's ID names its push.
func TestWithdraw(t *testing.T) {
	r := newBridgeRig(t)
	ctx := context.Background()
	const cause = "withdrawn by the test"

	// Between retries: the first call got 429 with a long Retry-After.
	throttled := fcmfake.Error(429, "RESOURCE_EXHAUSTED", "quota", "QUOTA_EXCEEDED")
	throttled.Header = map[string][]string{"Retry-After": {"3600"}}
	r.fcm.Queue(throttled)
	req := bridgedRequest(3600)
	req.ID = uuid.NewSHA1(uuid.NameSpaceURL, []byte("a bridged push"))
	p, err := r.s.Accept(ctx, req)
	if err != nil || p.ID != req.ID {
		t.Fatalf("accept: id %s (%v), want the request's %s", p.ID, err, req.ID)
	}
	waitState(t, r.s, p.ID, storage.PushRetry)
	if ok, err := r.s.Withdraw(ctx, p.ID, cause); !ok || err != nil {
		t.Fatalf("withdraw between retries: %v %v", ok, err)
	}
	got, _ := r.s.Get(ctx, p.ID)
	if last := got.LastAttempt(); got.State != storage.PushFailed || len(got.Attempts) != 2 || last.Cause != cause || last.Status != storage.AttemptError {
		t.Fatalf("withdrawn push %s, attempts %+v", got.State, got.Attempts)
	}
	if ok, err := r.s.Withdraw(ctx, p.ID, cause); ok || err != nil {
		t.Fatalf("withdrawing a FAILED push: %v %v", ok, err)
	}

	// Waiting: PENDING until long after the test.
	later := time.Now().Add(time.Hour).UnixMilli()
	now := time.Now().UnixMilli()
	pending := storage.Push{ID: uuid.Must(uuid.NewV7()), Provider: "fcm", Platform: req.Platform, PushKey: req.PushKey,
		State: storage.PushPending, At: later, Created: now, Updated: now, Version: 1, Bridge: req.Bridge}
	// Being sent by another node: its attempt is IN_PROCESS.
	inCall := pending
	inCall.ID, inCall.State, inCall.Owner = uuid.Must(uuid.NewV7()), storage.PushInMemory, "other-node"
	inCall.Attempts = []storage.Attempt{{N: 1, Status: storage.AttemptInProcess, Node: "other-node", Started: now}}
	for _, q := range []storage.Push{pending, inCall} {
		if err := r.store.SavePush(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := r.s.Withdraw(ctx, pending.ID, cause); !ok || err != nil {
		t.Fatalf("withdraw a pending push: %v %v", ok, err)
	}
	if got, _ := r.s.Get(ctx, pending.ID); got.State != storage.PushFailed || got.LastAttempt().Cause != cause {
		t.Fatalf("withdrawn pending push %s %+v", got.State, got.Attempts)
	}
	if ok, err := r.s.Withdraw(ctx, inCall.ID, cause); ok || err != nil {
		t.Fatalf("withdrawing a push in a provider call: %v %v", ok, err)
	}
	if got, _ := r.s.Get(ctx, inCall.ID); got.Version != 1 || got.State != storage.PushInMemory {
		t.Fatalf("a push in a call changed: %s v%d", got.State, got.Version)
	}
	if ok, err := r.s.Withdraw(ctx, uuid.New(), cause); ok || err != nil {
		t.Fatalf("withdrawing no push: %v %v", ok, err)
	}
	if v := metricOf(r.s, `autosender_withdrawn_total{provider="fcm"}`); v != "2" {
		t.Fatalf("withdrawn counted %q, want 2", v)
	}
	if n := r.fcm.Sends(); n != 1 {
		t.Fatalf("FCM got %d calls, want the one answered 429", n)
	}
}
