package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/node"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
)

// senderNode is a sender node over an embedded store, sending to a fake Swrve
// with the prototype keys in a file.
type senderNode struct {
	*node.Sender
	fake *swrvefake.Fake
	keys string
	logs *apitiertest.SyncBuffer
}

func startNode(t *testing.T, keys string, poll time.Duration) *senderNode {
	t.Helper()
	fake, err := swrvefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	path := filepath.Join(t.TempDir(), "keys.yaml")
	writeKeys(t, path, keys)
	cfg := node.DefaultConfig()
	cfg.SwrveConfig.URL, cfg.KeysFile, cfg.KeysPoll = fake.URL(), path, poll
	s, logs := build(t, cfg)
	return &senderNode{Sender: s, fake: fake, keys: path, logs: logs}
}

// writeKeys replaces the keys file by renaming a new one over it, as a
// deployment tool does: a poll never reads half a file.
func writeKeys(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func keysFor(pushKey string) string {
	return "swrve:\n  messagePrototypePushKeys:\n    World:\n      IOS: " + pushKey + "\n"
}

// reloads is the node's autosender_keys_reloads_total{result}.
func (n *senderNode) reloads(t *testing.T, result string) float64 {
	t.Helper()
	var b strings.Builder
	n.WriteMetrics(&b)
	series, err := promtext.ParseAll(strings.NewReader(b.String()))
	et.Must(t, err, "parse the metrics")
	for _, s := range series {
		if s.Name == "autosender_keys_reloads_total" && s.Labels["result"] == result {
			return s.Value
		}
	}
	return 0
}

// waitReloads waits until the node counted want reloads with result.
func (n *senderNode) waitReloads(t *testing.T, result string, want float64) {
	t.Helper()
	et.Eventually(t, et.Patience, "a reload "+result, func() bool { return n.reloads(t, result) >= want })
	if got := n.reloads(t, result); got != want {
		t.Fatalf("reloads{result=%q} = %v, want %v; log:\n%s", result, got, want, n.logs.String())
	}
}

// sendsWith pushes prototype World to user and waits until the fake gets
// it: the push_key it was sent with is the mapping in use.
func (n *senderNode) sendsWith(t *testing.T, user string) string {
	t.Helper()
	before := n.fake.Count()
	if _, err := n.Accept(context.Background(), sender.Request{Platform: "IOS", PrototypeKey: "World", PushKey: user, Message: "m"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.fake.WaitCount(ctx, before+1); err != nil {
		t.Fatal(err)
	}
	got := n.fake.Log()[before]
	if got.User != user {
		t.Fatalf("the fake got %s, want %s", got.User, user)
	}
	return got.PushKey
}

// A change of the keys file takes effect at the next poll
// (swrve-keys-poll), counted as a reload ok; a bad file is counted as an
// error, logged, and the mapping in use stays; fixing the file takes
// effect again. Every wait is on the reload metric.
func TestKeysFileReloadsOnChange(t *testing.T) {
	n := startNode(t, keysFor("k1"), 10*time.Millisecond)
	if k := n.sendsWith(t, "u1"); k != "k1" {
		t.Fatalf("push_key %q, want k1", k)
	}
	writeKeys(t, n.keys, keysFor("key-two"))
	n.waitReloads(t, "ok", 1)
	if k := n.sendsWith(t, "u2"); k != "key-two" {
		t.Fatalf("after the change: push_key %q, want key-two", k)
	}
	writeKeys(t, n.keys, "swrve:\n  messagePrototypePushKeys: [not, a, mapping\n")
	n.waitReloads(t, "error", 1)
	if k := n.sendsWith(t, "u3"); k != "key-two" {
		t.Fatalf("after a bad file: push_key %q, want the previous mapping's key-two", k)
	}
	if !strings.Contains(n.logs.String(), "swrve keys not reloaded") || !strings.Contains(n.logs.String(), "content in use stays") {
		t.Errorf("the bad file is not logged:\n%s", n.logs.String())
	}
	writeKeys(t, n.keys, keysFor("key-number-three"))
	n.waitReloads(t, "ok", 2)
	if k := n.sendsWith(t, "u4"); k != "key-number-three" {
		t.Fatalf("after the fix: push_key %q, want key-number-three", k)
	}
	// The bad file was read once, not at every poll since.
	if got := n.reloads(t, "error"); got != 1 {
		t.Errorf("reloads{error} = %v, want 1", got)
	}
}

// Reload (what SIGHUP calls) takes a new file at once, without a poll,
// and keeps the mapping in use when the file is bad.
func TestKeysReload(t *testing.T) {
	n := startNode(t, keysFor("k1"), 0)
	writeKeys(t, n.keys, keysFor("key-two"))
	n.Reload()
	if got := n.reloads(t, "ok"); got != 1 {
		t.Fatalf("reloads{ok} = %v after Reload", got)
	}
	if k := n.sendsWith(t, "u1"); k != "key-two" {
		t.Fatalf("after Reload: push_key %q, want key-two", k)
	}
	writeKeys(t, n.keys, "swrve:\n  messagePrototypePushKeys:\n    World: {IOS: \"\"}\n")
	n.Reload()
	if got := n.reloads(t, "error"); got != 1 {
		t.Fatalf("reloads{error} = %v after Reload of a bad file", got)
	}
	if k := n.sendsWith(t, "u2"); k != "key-two" {
		t.Fatalf("after a bad file: push_key %q, want key-two", k)
	}
}
