package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/proc"

	et "github.com/autopush-go/autopush/engine/enginetest"
)

// pushsend is tools/cmd/pushsend's binary.
func pushsend(t *testing.T) string { return build(t, "../../../tools/cmd/pushsend") }

// receiptsServer starts the server as make run does (free loopback
// ports, a fresh directory) with receipts and webhooks on, webhooks to
// loopback http allowed, and a quick fate sweep; it returns the directory
// and the websocket's address.
func receiptsServer(t *testing.T) (dir, ws string) {
	t.Helper()
	dir = t.TempDir()
	addrs, _ := makeRun(t, dir, "-receipts", "-receipt-webhooks", "-receipt-webhook-insecure",
		"-fate-sweep-interval", "200ms", "-receipt-webhook-interval", "200ms")
	ws = addrs["127.0.0.1:8080"]
	return dir, ws
}

// listenUA runs pushsend listen as a user agent with its own state and
// subscription files, and returns once it subscribed. It runs until the
// test ends, or until stop.
func listenUA(t *testing.T, dir, ws, name string) (subFile string, stop func()) {
	t.Helper()
	subFile = filepath.Join(dir, name+".sub.json")
	cmd := exec.Command(pushsend(t), "listen", "-ws", "ws://"+ws+"/", "-vapid-key", "@"+filepath.Join(dir, "vapid.json"),
		"-state", filepath.Join(dir, name+".state.json"), "-sub-file", subFile)
	p, err := proc.Start(context.Background(), cmd, proc.Config{})
	et.Must(t, err, "pushsend listen")
	t.Cleanup(p.Kill)
	et.Eventually(t, et.Patience, name+"'s subscription", func() bool {
		_, err := os.Stat(subFile)
		return err == nil
	})
	return subFile, func() {
		p.Signal(syscall.SIGINT)
		select {
		case <-p.Exited():
		case <-time.After(time.Minute):
			t.Fatalf("pushsend listen %s still running a minute after SIGINT", name)
		}
	}
}

// TestReceiptExamples runs the receipt examples an application developer
// copies, in Node (tools/webpush-node/receipts.js) and in Python
// (tools/examples/pywebpush/receipts.py), against the server started as
// make run starts it with receipts on: each reads, by long poll and by
// webhook (its signature checked), a delivered receipt for a push to a
// user agent that acks (pushsend listen) and an expired one for a TTL 0
// push to a user agent that is away.
func TestReceiptExamples(t *testing.T) {
	needFile(t, "npm web-push", "tools/webpush-node/node_modules/web-push", "make node-deps")
	needFile(t, "pywebpush", "tools/examples/pywebpush/.venv/bin/python", "make pywebpush")
	dir, ws := receiptsServer(t)
	keys, err := exec.Command(pushsend(t), "keys").Output()
	et.Must(t, err, "pushsend keys")
	et.Must(t, os.WriteFile(filepath.Join(dir, "vapid.json"), keys, 0o600), "vapid.json")
	present, _ := listenUA(t, dir, ws, "present")
	away, stop := listenUA(t, dir, ws, "away")
	stop()

	repo, err := filepath.Abs(root)
	et.Must(t, err, "the repository's root")
	ca := filepath.Join(dir, "data", "tls", "ca.pem")
	langs := map[string][]string{
		"node":   {"node", filepath.Join(repo, "tools/webpush-node/receipts.js")},
		"python": {filepath.Join(repo, "tools/examples/pywebpush/.venv/bin/python"), filepath.Join(repo, "tools/examples/pywebpush/receipts.py")},
	}
	for lang, run := range langs {
		for _, mode := range []string{"poll", "webhook"} {
			for _, c := range []struct{ sub, ttl, state string }{{present, "60", "delivered"}, {away, "0", "expired"}} {
				args := append([]string(nil), run[1:]...)
				args = append(args, mode)
				if mode == "webhook" {
					_, port, _ := strings.Cut(et.FreeAddr(t), ":")
					args = append(args, port)
				}
				args = append(args, filepath.Join(dir, "vapid.json"), c.sub, lang+" "+mode+" "+c.state, c.ttl)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				cmd := exec.CommandContext(ctx, run[0], args...)
				cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+ca, "REQUESTS_CA_BUNDLE="+ca)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				cancel()
				if err != nil {
					t.Fatalf("%s %s (%s): %v\n%s%s", lang, mode, c.state, err, out, stderr.String())
				}
				var r struct {
					State     string
					Delivered bool
					Location  string
				}
				if err := json.Unmarshal(out, &r); err != nil || r.State != c.state || r.Delivered != (c.state == "delivered") ||
					!strings.Contains(r.Location, "/m/") {
					t.Fatalf("%s %s: receipt %s (%v), want %s", lang, mode, out, err, c.state)
				}
			}
		}
	}
}
