package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/stack"
	"github.com/google/uuid"
)

// startDev runs the dev server until the test ends.
func startDev(t *testing.T, dir string) *stack.Stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *stack.Stack, 1)
	done := make(chan error, 1)
	args := []string{"-data-dir", dir, "-ws", et.FreeAddr(t), "-node", et.FreeAddr(t), "-http", et.FreeAddr(t), "-log-level", "warn"}
	var out bytes.Buffer
	go func() { done <- run(ctx, args, &out, &out, ready) }()
	select {
	case r := <-ready:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("dev server stop: %v", err)
			}
		})
		return r
	case err := <-done:
		cancel()
		t.Fatalf("dev server: %v\n%s", err, out.String())
	}
	return nil
}

func TestDevServerPushRoundTripAndKeptKey(t *testing.T) {
	dir := t.TempDir()
	r := startDev(t, dir)
	key, err := os.ReadFile(filepath.Join(dir, "crypto_key"))
	if err != nil {
		t.Fatalf("dev crypto key not kept: %v", err)
	}

	c := et.Dial(t, r.WSAddr())
	c.Hello("")
	chid := uuid.NewString()
	reg := c.Register(chid, "")
	endpoint, _ := reg["pushEndpoint"].(string)
	if !strings.HasPrefix(endpoint, "http://"+r.HTTPAddr()+"/wpush/v1/") {
		t.Fatalf("endpoint %q does not point at the push API %s", endpoint, r.HTTPAddr())
	}
	req, _ := http.NewRequest(http.MethodPost, endpoint, nil)
	req.Header.Set("TTL", "60")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("push: %d", resp.StatusCode)
	}
	if n := c.Read(); n["messageType"] != "notification" || n["channelID"] != chid {
		t.Fatalf("notification %v", n)
	}

	// A second start on the same data directory keeps the key, so
	// endpoints handed out before stay valid.
	again, _ := devKey(filepath.Join(dir, "crypto_key"))
	if again != strings.TrimSpace(string(key)) {
		t.Fatal("dev crypto key changed on restart")
	}
}

func TestDevKeyRejectsGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crypto_key")
	os.WriteFile(path, []byte("not a key\n"), 0o600)
	if _, err := devKey(path); err == nil {
		t.Fatal("a corrupt key file was accepted")
	}
}
