package node

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/apns"
	"github.com/autopush-go/autopush/sender/bridge"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/sendertest/apnsfake"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/storage"
)

// config has one FCM app ("android") and one APNs app ("ios"), their
// credentials in files as an operator would give them.
func config(t *testing.T) ProvidersConfig {
	t.Helper()
	dir := t.TempDir()
	fcm, err := fcmfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fcm.Close() })
	acct, err := fcm.NewAccount("project")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := acct.WriteFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := apnsfake.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile, err := key.WriteFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultProvidersConfig()
	f, _ := json.Marshal(map[string]any{"android": map[string]string{"project_id": "project", "credentials": creds}})
	a, _ := json.Marshal(map[string]any{"ios": map[string]string{"key": keyFile, "key_id": key.ID, "team_id": key.TeamID}})
	c.FCMConfig.Apps, c.FCMConfig.URL, c.APNsConfig.Apps = string(f), fcm.URL(), string(a)
	return c
}

func TestBuildOnlyConfigured(t *testing.T) {
	s, err := BuildProviders(DefaultProvidersConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.FCM != nil || s.APNs != nil || len(s.List()) != 1 || s.List()[0].Name() != "swrve" {
		t.Fatalf("without apps: fcm %v apns %v list %d", s.FCM, s.APNs, len(s.List()))
	}
	if b := s.Bridges(nil); b.Known("fcm", "android") || b.Known("apns", "ios") || !b.Known("webpush", "any") {
		t.Fatal("bridges without apps know an app")
	}

	s, err = BuildProviders(config(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var names []string
	for _, p := range s.List() {
		names = append(names, p.Name())
		if l := p.Limits(); l.Bridge != (p.Name() != "swrve") {
			t.Errorf("%s: Limits.Bridge %v", p.Name(), l.Bridge)
		}
	}
	if strings.Join(names, ",") != "swrve,fcm,apns" {
		t.Fatalf("providers %v", names)
	}
	b := s.Bridges(nil)
	if !b.Known("fcm", "android") || !b.Known("gcm", "android") || !b.Known("apns", "ios") || b.Known("apns", "android") {
		t.Fatal("bridges do not know the configured apps")
	}
}

// A missing credentials file stops the start, naming the app.
func TestBuildBadCredentials(t *testing.T) {
	c := config(t)
	c.FCMConfig.Apps = `{"android": {"project_id": "p", "credentials": "/nonexistent/sa.json"}}`
	if _, err := BuildProviders(c); err == nil || !strings.Contains(err.Error(), "android") {
		t.Fatalf("Build: %v", err)
	}
}

// The API tier refuses (413) exactly the APNs data the provider would
// refuse, the push id in the payload counted.
func TestAPNsCheckMatchesProvider(t *testing.T) {
	c := config(t)
	c.APNsConfig.MaxData = 600
	s, err := BuildProviders(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.Bridges(nil)
	u := &storage.User{UAID: uuid.New(), RouterType: "apns", RouterData: map[string]string{"token": "tok", "rel_channel": "ios"}}
	chid := uuid.New()
	fits := 0
	for n := 1; n < 600; n++ {
		_, err := b.Request(u, &bridge.Notification{CHID: chid, TTL: 60, Body: strings.Repeat("A", n), Encoding: "aes128gcm"})
		if errors.Is(err, bridge.ErrTooLarge) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		fits = n
	}
	at := func(n int) int {
		data := bridge.Data(&bridge.Notification{CHID: chid, Body: strings.Repeat("A", n), Encoding: "aes128gcm"})
		return apns.PayloadSize(&provider.Notification{ID: uuid.New().String(), Data: data})
	}
	if fits == 0 || at(fits) != 600 {
		t.Fatalf("largest body accepted %d: its payload is %d bytes, want the limit 600", fits, at(fits))
	}
}

// Validate checks each configured provider's pace against the sender's
// queue, and an FCM app list that does not parse.
func TestValidate(t *testing.T) {
	sc := sender.DefaultConfig()
	c := config(t)
	if err := c.Validate(&sc); err != nil {
		t.Fatal(err)
	}
	c.FCMConfig.Apps = `{"android": `
	if err := c.Validate(&sc); err == nil {
		t.Fatal("fcm-apps that does not parse validated")
	}
	c = config(t)
	c.APNsConfig.Rate = 0
	if err := c.Validate(&sc); err == nil {
		t.Fatal("apns-rate 0 validated")
	}
}
