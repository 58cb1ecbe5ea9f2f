package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
)

// TestSenderInTheServer: the single-node server runs the outbound
// sender's workers. A push accepted on POST /push reaches the (fake)
// provider and is SENT; the one /metrics serves the sender's series;
// SIGHUP reloads the prototype keys, as autoendpoint's does.
func TestSenderInTheServer(t *testing.T) {
	binary(t)
	fake, err := swrvefake.Start()
	et.Must(t, err, "start the fake Swrve")
	t.Cleanup(func() { fake.Close() })
	dir := t.TempDir()
	keys := filepath.Join(dir, "swrve-keys.yaml")
	et.Must(t, os.WriteFile(keys, []byte("swrve:\n  messagePrototypePushKeys:\n    Hello: {IOS: k-ios, ANDROID: k-android}\n"), 0o600), "write the keys")
	vals := minimal(t, dir)
	vals["crypto-key"] = token.GenerateKey()
	vals["node-secret"] = "sender-test-secret"
	vals["push-api-keys"] = "app-key"
	vals["swrve-url"] = fake.URL()
	vals["swrve-keys-file"] = keys
	vals["sender-node"] = "single"
	vals["sender-scheduled-start-delay"], vals["sender-pending-start-delay"] = "0s", "0s"
	p := start(t, fromFlags, vals)
	base := vals["endpoint-url"]

	req, _ := http.NewRequest(http.MethodPost, base+"/push",
		strings.NewReader(`{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"device-1","message":"hi","cronExpression":null}`))
	req.Header.Set("Authorization", "Bearer app-key")
	resp, err := http.DefaultClient.Do(req)
	et.Must(t, err, "POST /push")
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(loc, "/push/") {
		t.Fatalf("POST /push: %d, Location %q", resp.StatusCode, loc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	et.Must(t, fake.WaitCount(ctx, 1), "the provider receives the push")
	if r := fake.Log()[0]; r.User != "device-1" || r.PushKey != "k-ios" || r.Message != "hi" {
		t.Errorf("the provider received %+v", r)
	}
	et.Eventually(t, et.Patience, "the push is SENT", func() bool {
		code, body := get(t, base+loc, "app-key")
		return code == 200 && strings.Contains(body, `"state":"SENT"`)
	})

	metrics := func() map[string]float64 {
		m, err := promtext.Scrape(ctx, nil, "http://"+vals["metrics-listen"]+"/metrics")
		et.Must(t, err, "scrape /metrics")
		return m
	}
	const reloads = `autosender_keys_reloads_total{result="ok"}`
	m := metrics()
	if m[`autosender_sent_total{provider="swrve"}`] != 1 {
		t.Errorf("/metrics: autosender_sent_total %v, want 1 (the sender's series with both tiers')", m[`autosender_sent_total{provider="swrve"}`])
	}
	if _, ok := m["autoconnect_hellos_total"]; !ok {
		t.Errorf("/metrics lacks the connection node's series")
	}
	before := m[reloads]
	p.Signal(syscall.SIGHUP)
	et.Eventually(t, et.Patience, "SIGHUP reloads the prototype keys", func() bool { return metrics()[reloads] == before+1 })
}
