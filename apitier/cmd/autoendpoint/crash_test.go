package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/sender/swrvefake"
	"github.com/autopush-go/autopush/internal/proc"
)

// TestCrashMidStream SIGKILLs autoendpoint (embedded store, sender
// workers on) while hundreds of pushes are queued and in flight, starts it
// again on the same data, and checks: every accepted push reaches SENT,
// GIVEN_UP or FAILED, and the fake provider received none twice except
// pushes whose attempt was in flight at the kill (INTERRUPTED in their
// log), which Swrve (no dedup key) gets again under the default policy.
func TestCrashMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "autoendpoint")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	fake, err := swrvefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	fake.SetFaults(func(swrvefake.Received) swrvefake.Fault { return swrvefake.Fault{Delay: 300 * time.Millisecond} })
	keys := filepath.Join(dir, "keys.yaml")
	os.WriteFile(keys, []byte("swrve:\n  messagePrototypePushKeys:\n    Hello:\n      IOS: k-ios\n"), 0o644)
	start := func() (*proc.Proc, string) {
		cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-metrics-listen", "127.0.0.1:0", "-data-dir", filepath.Join(dir, "data"),
			"-crypto-key", "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=", "-node-secret", "crash-test-secret", "-push-api-keys", "k",
			"-sender-node", "crash-node", "-swrve-url", fake.URL(), "-swrve-keys-file", keys,
			"-swrve-rate", "400", "-swrve-average-latency", "250ms", "-swrve-timeout", "5s",
			"-sender-scheduled-start-delay", "0s", "-sender-pending-start-delay", "0s", "-request-log=false")
		p, err := proc.Start(context.Background(), cmd, proc.Config{StartMsg: "autoendpoint started"})
		if err != nil {
			t.Fatal(err)
		}
		return p, "http://" + p.Field("listen")
	}
	p, base := start()
	const total = 600
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range total {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			body := fmt.Sprintf(`{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"u%04d","message":"m"}`, i)
			req, _ := http.NewRequest("POST", base+"/push", bytes.NewReader([]byte(body)))
			req.Header.Set("Authorization", "Bearer k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // the node died mid-request: not accepted
			}
			resp.Body.Close()
			if resp.StatusCode == 201 {
				mu.Lock()
				ids = append(ids, resp.Header.Get("Location"))
				mu.Unlock()
			}
		}()
		if i == total/2 {
			// Mid-stream: some sent, some in flight, many queued.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := fake.WaitCount(ctx, 100); err != nil {
				t.Fatal(err)
			}
			cancel()
			p.Signal(syscall.SIGKILL)
			<-p.Exited()
		}
	}
	wg.Wait()
	p, base = start()
	defer p.Stop(30 * time.Second)
	if len(ids) < total/3 {
		t.Fatalf("only %d pushes accepted", len(ids))
	}
	interrupted := map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	for _, loc := range ids {
		for {
			req, _ := http.NewRequest("GET", base+loc, nil)
			req.Header.Set("Authorization", "Bearer k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				PushKey  string `json:"pushKey"`
				State    string `json:"state"`
				Attempts []struct {
					Status string `json:"status"`
				} `json:"attempts"`
			}
			json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			if v.State == "SENT" || v.State == "GIVEN_UP" || v.State == "FAILED" {
				for _, a := range v.Attempts {
					if a.Status == "INTERRUPTED" {
						interrupted[v.PushKey] = true
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still %s after the restart", loc, v.State)
			}
			time.Sleep(50 * time.Millisecond) // polling the node's answer
		}
	}
	seen := map[string]int{}
	for _, r := range fake.Log() {
		seen[r.User]++
	}
	twice := 0
	for user, n := range seen {
		if n > 1 {
			twice++
			if !interrupted[user] {
				t.Errorf("%s was received %d times without an interrupted attempt", user, n)
			}
		}
	}
	t.Logf("%d accepted, %d received by the fake, %d interrupted in flight and resent", len(ids), len(seen), twice)
}
