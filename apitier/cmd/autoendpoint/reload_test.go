package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
)

// binaryAndFake builds autoendpoint into a new directory and starts a
// fake Swrve for it (closed when the test ends); it skips under -short.
func binaryAndFake(t *testing.T) (dir, bin string, fake *swrvefake.Fake) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir = t.TempDir()
	bin = filepath.Join(dir, "autoendpoint")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	fake, err := swrvefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	return dir, bin, fake
}

// TestSIGHUPReloadsKeys: SIGHUP makes autoendpoint re-read the Swrve
// keys file (-swrve-keys-poll 0: only the signal does). A new mapping
// takes effect: the next push is sent with its push_key. A bad file is
// logged and counted in autosender_keys_reloads_total{result="error"},
// and the mapping in use stays. Every wait is on /metrics or on the
// fake's log.
func TestSIGHUPReloadsKeys(t *testing.T) {
	dir, bin, fake := binaryAndFake(t)
	keys := filepath.Join(dir, "keys.yaml")
	write := func(content string) {
		if err := os.WriteFile(keys+".new", []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(keys+".new", keys); err != nil {
			t.Fatal(err)
		}
	}
	mapping := func(key string) string {
		return "swrve:\n  messagePrototypePushKeys:\n    World:\n      IOS: " + key + "\n"
	}
	write(mapping("k1"))
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0", "-data-dir", filepath.Join(dir, "data"),
		"-crypto-key", "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=", "-node-secret", "reload-test-secret", "-push-api-keys", "k",
		"-sender-node", "reload-node", "-swrve-url", fake.URL(), "-swrve-keys-file", keys, "-swrve-keys-poll", "0s",
		"-sender-scheduled-start-delay", "0s", "-sender-pending-start-delay", "0s", "-request-log=false")
	p, err := proc.Start(context.Background(), cmd, proc.Config{StartMsg: "autoendpoint started"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(30 * time.Second)
	base := "http://" + p.Field("listen")

	// push sends prototype World to user and returns the push_key the
	// fake got it with: the mapping in use.
	push := func(user string) string {
		t.Helper()
		before := fake.Count()
		req, _ := http.NewRequest("POST", base+"/push", bytes.NewReader([]byte(`{"platform":"IOS","messagePrototypeKey":"World","pushKey":"`+user+`","message":"m"}`)))
		req.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /push: %d", resp.StatusCode)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := fake.WaitCount(ctx, before+1); err != nil {
			t.Fatal(err)
		}
		got := fake.Log()[before]
		if got.User != user {
			t.Fatalf("the fake got %s, want %s", got.User, user)
		}
		return got.PushKey
	}
	reloads, hangUp := reloadCounter(t, p, "autosender_keys_reloads_total")

	if k := push("u1"); k != "k1" {
		t.Fatalf("push_key %q, want k1", k)
	}
	write(mapping("key-two"))
	hangUp("ok", 1)
	if k := push("u2"); k != "key-two" {
		t.Fatalf("after SIGHUP: push_key %q, want key-two", k)
	}
	write("swrve:\n  messagePrototypePushKeys: [not, a, mapping\n")
	hangUp("error", 1)
	if k := push("u3"); k != "key-two" {
		t.Fatalf("after SIGHUP with a bad file: push_key %q, want the previous key-two", k)
	}
	if out := string(p.Output()); !strings.Contains(out, "swrve keys not reloaded") || !strings.Contains(out, "SIGHUP") {
		t.Errorf("the bad file's reload is not logged:\n%s", p.Tail())
	}
	if got := reloads("ok"); got != 1 {
		t.Errorf("reloads{ok} = %v, want 1", got)
	}
}

// TestSIGHUPReloadsClients: SIGHUP makes autoendpoint re-read
// push-clients-file (-push-clients-poll 0: only the signal does). A new
// client's key opens the push API, a removed one's no longer does; a bad
// file is logged and counted in
// autoendpoint_push_clients_reloads_total{result="error"}, and the
// clients in use stay. Every wait is on /metrics.
func TestSIGHUPReloadsClients(t *testing.T) {
	dir, bin, fake := binaryAndFake(t)
	path := filepath.Join(dir, "clients.yaml")
	write := func(content string) {
		t.Helper()
		et.Must(t, os.WriteFile(path+".new", []byte(content), 0o600), "write")
		et.Must(t, os.Rename(path+".new", path), "rename")
	}
	entry := func(name string) string {
		return clients.Entry(clients.Client{Name: name, KeyHash: clients.Hash(name + "-key"), Scopes: []clients.Scope{clients.Read}})
	}
	write("clients:\n" + entry("first"))
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0", "-data-dir", filepath.Join(dir, "data"),
		"-crypto-key", "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=", "-node-secret", "reload-test-secret",
		"-push-clients-file", path, "-push-clients-poll", "0s",
		// A provider, or the push API answers 503 (no sender) to every key.
		"-log-provider-file", filepath.Join(dir, "pushes.log"),
		"-sender-node", "reload-node", "-swrve-url", fake.URL(), "-request-log=false")
	p, err := proc.Start(context.Background(), cmd, proc.Config{StartMsg: "autoendpoint started"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(30 * time.Second)
	opens := func(key string) bool {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+p.Field("listen")+"/push?state=SENT", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		et.Must(t, err, "GET /push")
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	_, hangUp := reloadCounter(t, p, "autoendpoint_push_clients_reloads_total")
	if !opens("first-key") || opens("second-key") {
		t.Fatal("the clients at start")
	}
	write("clients:\n" + entry("second"))
	if !opens("first-key") || opens("second-key") {
		t.Fatal("the file was read again without SIGHUP (poll 0)")
	}
	hangUp("ok", 1)
	if opens("first-key") || !opens("second-key") {
		t.Fatal("after SIGHUP: the new file's clients are not the ones in use")
	}
	write("clients:\n  second: {scopes: [read]}\n")
	hangUp("error", 1)
	if !opens("second-key") {
		t.Fatal("a bad file dropped the clients in use")
	}
	// Rewritten in place and read before its first client is written: 0
	// bytes is refused as any bad file, and the clients in use stay.
	et.Must(t, os.WriteFile(path, nil, 0o600), "truncate")
	hangUp("error", 2)
	if !opens("second-key") {
		t.Fatal("an empty file dropped the clients in use")
	}
	if out := string(p.Output()); !strings.Contains(out, "push API clients not reloaded") || !strings.Contains(out, "names no client") {
		t.Errorf("the bad and the empty file's reloads are not logged:\n%s", p.Tail())
	}
	p.Stop(30 * time.Second)

	// Starting with the empty file fails, saying why.
	p, err = proc.Start(context.Background(), exec.Command(bin, cmd.Args[1:]...), proc.Config{StartMsg: "autoendpoint started"})
	if err == nil {
		p.Stop(30 * time.Second)
		t.Fatal("autoendpoint started with an empty push-clients-file")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "names no client") {
		t.Errorf("the start with an empty push-clients-file: %v, want a message naming the file and why", err)
	}
}

// reloadCounter returns the value of the counter family{result} on the
// process's /metrics, and hangUp, which sends SIGHUP and waits until
// family{result} is want.
func reloadCounter(t *testing.T, p *proc.Proc, family string) (reloads func(result string) float64, hangUp func(result string, want float64)) {
	reloads = func(result string) float64 {
		t.Helper()
		m, err := promtext.Scrape(context.Background(), nil, "http://"+p.Field("metrics")+"/metrics")
		et.Must(t, err, "scrape /metrics")
		return m[family+`{result="`+result+`"}`]
	}
	hangUp = func(result string, want float64) {
		t.Helper()
		et.Must(t, p.Signal(syscall.SIGHUP), "SIGHUP")
		et.Eventually(t, et.Patience, "SIGHUP counts a reload "+result, func() bool { return reloads(result) == want })
	}
	return reloads, hangUp
}
