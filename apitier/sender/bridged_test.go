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

	"github.com/autopush-go/autopush/apitier/sender"
	"github.com/autopush-go/autopush/apitier/sender/fcm"
	"github.com/autopush-go/autopush/apitier/sender/fcmfake"
	"github.com/autopush-go/autopush/apitier/sender/swrve"
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
	s := runSender(t, store, testConfig("bridged"), swrveClient, fcmClient)
	<-s.Ready()
	return &bridgeRig{s: s, fcm: fake, store: store}
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
