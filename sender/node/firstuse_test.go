package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/logprovider"
	"github.com/autopush-go/autopush/sender/node"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// build starts a sender node of cfg (its jobs at once) over a fresh
// embedded store, stopped when the test ends; its log lines are
// returned.
func build(t *testing.T, cfg node.Config) (*node.Sender, *apitiertest.SyncBuffer) {
	t.Helper()
	logs := &apitiertest.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg.SenderConfig.Node, cfg.ScheduledStart, cfg.PendingStart = "node-test", 0, 0
	s, err := node.Build(cfg, store, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return s, logs
}

const emptyMapping = "swrve-keys-file maps no message prototype"

var hello = sender.Request{Platform: "IOS", PrototypeKey: "Hello", PushKey: "user-1", Message: "Hello!"}

// firstUseConfig sends to no Swrve: nothing is mapped, or the log
// provider takes the pushes.
func firstUseConfig() node.Config {
	cfg := node.DefaultConfig()
	cfg.SwrveConfig.URL = "http://127.0.0.1:9/push"
	return cfg
}

// With Swrve the provider and its mapping empty (swrve-keys-file set,
// mapping nothing), the start warns that every push will be refused and
// how to fix it, and a push is refused (a field error naming
// messagePrototypeKey, the push API's 400). With a mapping, no warning.
func TestEmptyMappingWarns(t *testing.T) {
	empty := firstUseConfig()
	empty.KeysFile = filepath.Join(t.TempDir(), "keys.yaml")
	writeKeys(t, empty.KeysFile, "swrve:\n  messagePrototypePushKeys: {}\n")
	s, logs := build(t, empty)
	if out := logs.String(); !strings.Contains(out, emptyMapping) || !strings.Contains(out, `"level":"WARN"`) ||
		!strings.Contains(out, "log-provider-file") {
		t.Errorf("no warning of the empty mapping, saying how to fix it:\n%s", out)
	}
	var fe *sender.FieldError
	if _, err := s.Accept(context.Background(), hello); !errors.As(err, &fe) || fe.Field != "messagePrototypeKey" {
		t.Errorf("a push with no mapping: %v, want a field error naming messagePrototypeKey", err)
	}

	cfg := firstUseConfig()
	cfg.KeysFile = filepath.Join(t.TempDir(), "keys.yaml")
	writeKeys(t, cfg.KeysFile, keysFor("k1"))
	_, logs = build(t, cfg)
	if strings.Contains(logs.String(), emptyMapping) {
		t.Errorf("a mapping, and still the warning:\n%s", logs.String())
	}
}

// With log-provider-file set, POST /push's pushes (no provider named) go
// to the log provider, which records each as a JSON line and reports it
// SENT; the start says so, and the empty Swrve mapping is no concern.
func TestLogProviderTakesThePushAPI(t *testing.T) {
	cfg := firstUseConfig()
	cfg.LogConfig.File = filepath.Join(t.TempDir(), "data", "pushes.log")
	s, logs := build(t, cfg)
	<-s.Ready()
	if out := logs.String(); strings.Contains(out, emptyMapping) || !strings.Contains(out, "the log provider") {
		t.Errorf("start log:\n%s", out)
	}
	p, err := s.Accept(context.Background(), hello)
	if err != nil {
		t.Fatal(err)
	}
	if p.Provider != logprovider.Name {
		t.Fatalf("the push went to %q, want the log provider", p.Provider)
	}
	et.Eventually(t, et.Patience, "the push to be SENT", func() bool {
		got, err := s.Get(context.Background(), p.ID)
		return err == nil && got.State == storage.PushSent
	})
	b, err := os.ReadFile(cfg.LogConfig.File)
	et.Must(t, err, "read the log provider's file")
	var line logprovider.Line
	if err := json.Unmarshal(b, &line); err != nil || line.ID != p.ID.String() || line.PushKey != "user-1" ||
		line.MessagePrototypeKey != "Hello" || line.Message != "Hello!" || line.Platform != "IOS" {
		t.Fatalf("the file holds %q (%v), want the push's one line", b, err)
	}
}

// A node that configures no provider (the default: a WebPush-only
// deployment) builds no sender: BuildConfigured returns nil, checks the
// settings all the same, and says so in one info line, with no warning.
// One provider of any kind (here the log provider; swrve-keys-file, the
// bridges' apps) builds it.
func TestNoProviderNoSender(t *testing.T) {
	logs := &apitiertest.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: log})
	et.Must(t, err, "open the store")
	t.Cleanup(func() { store.Close() })
	cfg := node.DefaultConfig()
	if got := cfg.Configured(); len(got) != 0 {
		t.Fatalf("the defaults configure %v, want no provider", got)
	}
	s, err := node.BuildConfigured(cfg, store, log)
	if err != nil || s != nil {
		t.Fatalf("BuildConfigured without a provider: %v, %v; want no sender, no error", s, err)
	}
	out := logs.String()
	if !strings.Contains(out, node.NoProviderMsg) || strings.Contains(out, `"level":"WARN"`) || strings.Contains(out, emptyMapping) {
		t.Errorf("start log without a provider:\n%s", out)
	}

	bad := node.DefaultConfig()
	bad.SenderConfig.QueueCapacity = 0
	if _, err := node.BuildConfigured(bad, store, log); err == nil {
		t.Error("a sender setting that cannot work passed without a provider")
	}

	for name, set := range map[string]func(*node.Config){
		"swrve": func(c *node.Config) { c.KeysFile = "/nonexistent/keys.yaml" },
		"fcm":   func(c *node.Config) { c.FCMConfig.Apps = `{"app": {"project_id": "p", "credentials": "/nonexistent"}}` },
		"apns":  func(c *node.Config) { c.APNsConfig.Apps = "not json" },
		"log":   func(c *node.Config) { c.LogConfig.File = "/nonexistent/pushes.log" },
	} {
		c := node.DefaultConfig()
		set(&c)
		if got := c.Configured(); len(got) != 1 || got[0] != name {
			t.Errorf("%s set: Configured() = %v", name, got)
		}
	}
	withLog := firstUseConfig()
	withLog.LogConfig.File = filepath.Join(t.TempDir(), "pushes.log")
	s, err = node.BuildConfigured(withLog, store, log)
	if err != nil || s == nil {
		t.Fatalf("BuildConfigured with the log provider: %v, %v; want a sender", s, err)
	}
	s.Close()
}
