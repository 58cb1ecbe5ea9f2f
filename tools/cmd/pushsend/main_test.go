package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
)

func runT(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errs bytes.Buffer
	err := run(context.Background(), args, &out, &errs)
	return out.String(), errs.String(), err
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		if _, errs, err := runT(t, args...); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errs, "smoke") {
			t.Errorf("%v: %v %q", args, err, errs)
		}
	}
	for cmd, flagName := range map[string]string{"keys": "applicationServerKey", "send": "-vapid-private", "smoke": "-ws", "listen": "-state"} {
		for _, h := range []string{"-h", "--help"} {
			if _, errs, err := runT(t, cmd, h); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errs, flagName) {
				t.Errorf("%s %s: %v %q", cmd, h, err, errs)
			}
		}
	}
	if _, _, err := runT(t); !errors.Is(err, errUsage) {
		t.Errorf("no command: %v", err)
	}
	if _, _, err := runT(t, "frobnicate"); !errors.Is(err, errUsage) {
		t.Errorf("unknown command: %v", err)
	}
}

// keys returns a key pair made by the keys command.
func keys(t *testing.T) (public, private string) {
	t.Helper()
	out, _, err := runT(t, "keys")
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ PublicKey, PrivateKey string }
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatalf("keys output %q: %v", out, err)
	}
	return k.PublicKey, k.PrivateKey
}

func TestKeysMakeAWorkingPair(t *testing.T) {
	pub, priv := keys(t)
	s, err := pushcrypto.ParseVAPIDSigner(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Public != pub {
		t.Fatalf("private key's public half %s, printed %s", s.Public, pub)
	}
	if _, err := vapid.DecodeKey(pub); err != nil {
		t.Fatalf("public key: %v", err)
	}
}

// TestSendDelivers pushes through a real API tier and connection node to
// a websocket client, which decrypts what it gets.
func TestSendDelivers(t *testing.T) {
	st := stacktest.Start(t)
	pub, priv := keys(t)

	t.Run("v2 aes128gcm with VAPID", func(t *testing.T) {
		sub := st.Subscribe(t, pub)
		out, errs, err := runT(t, "send", "-sub", sub.SubscriptionJSON(), "-data", "hello operator",
			"-vapid-private", priv, "-subject", "mailto:ops@example.com", "-ttl", "120", "-urgency", "high")
		if err != nil {
			t.Fatalf("send: %v\n%s%s", err, out, errs)
		}
		if !strings.HasPrefix(out, "201 Created") || !strings.Contains(out, "Location: "+st.EndpointURL()+"/m/") ||
			!strings.Contains(out, "Ttl: 120") {
			t.Errorf("output %q", out)
		}
		if got := sub.Receive(t); got != "hello operator" {
			t.Fatalf("client decrypted %q", got)
		}
	})
	t.Run("v1 aesgcm without VAPID, from a file", func(t *testing.T) {
		sub := st.Subscribe(t, "")
		dir := t.TempDir()
		subFile, dataFile := filepath.Join(dir, "sub.json"), filepath.Join(dir, "msg")
		os.WriteFile(subFile, []byte(sub.SubscriptionJSON()), 0o600)
		os.WriteFile(dataFile, []byte("legacy"), 0o600)
		out, errs, err := runT(t, "send", "-sub", "@"+subFile, "-data-file", dataFile, "-encoding", "aesgcm", "-topic", "news", "-json")
		if err != nil {
			t.Fatalf("send: %v\n%s%s", err, out, errs)
		}
		var r struct {
			Status  int
			Headers map[string]string
		}
		if json.Unmarshal([]byte(out), &r) != nil || r.Status != 201 || r.Headers["Location"] == "" {
			t.Errorf("json output %q", out)
		}
		if got := sub.Receive(t); got != "legacy" {
			t.Fatalf("client decrypted %q", got)
		}
	})
	t.Run("no payload, keys as flags", func(t *testing.T) {
		sub := st.Subscribe(t, "")
		if out, errs, err := runT(t, "send", "-endpoint", sub.Endpoint); err != nil {
			t.Fatalf("send: %v\n%s%s", err, out, errs)
		}
		if got := sub.Receive(t); got != "" {
			t.Fatalf("client got %q", got)
		}
	})
}

// TestSendPrintsRefusals shows the service's error answers and exits 1.
func TestSendPrintsRefusals(t *testing.T) {
	st := stacktest.Start(t)
	pub, _ := keys(t)
	sub := st.Subscribe(t, pub)

	// A v2 endpoint pushed without VAPID: 401 errno 109.
	out, _, err := runT(t, "send", "-sub", sub.SubscriptionJSON(), "-data", "x")
	if err == nil || errors.Is(err, errUsage) || !strings.HasPrefix(out, "401 Unauthorized") || !strings.Contains(out, `"errno":109`) {
		t.Errorf("no VAPID on v2: %v %q", err, out)
	}
	// Signed with another key: 401 too.
	_, other := keys(t)
	out, _, err = runT(t, "send", "-sub", sub.SubscriptionJSON(), "-data", "x", "-vapid-private", other)
	if err == nil || !strings.Contains(out, `"errno":109`) {
		t.Errorf("wrong VAPID key: %v %q", err, out)
	}
	// A token that does not decrypt: 404 errno 102.
	out, _, err = runT(t, "send", "-endpoint", st.EndpointURL()+"/wpush/v1/gAAAAAnotatoken")
	if err == nil || !strings.HasPrefix(out, "404 Not Found") || !strings.Contains(out, `"errno":102`) {
		t.Errorf("bad token: %v %q", err, out)
	}
}

func TestSendRejectsBadInput(t *testing.T) {
	good := `{"endpoint":"http://127.0.0.1:1/wpush/v1/x","keys":{"p256dh":"BAAA","auth":"AAAA"}}`
	for name, args := range map[string][]string{
		"no subscription": {"send"},
		"not JSON":        {"send", "-sub", "{"},
		"bad p256dh":      {"send", "-sub", good, "-data", "x"},
		"bad encoding":    {"send", "-endpoint", "http://127.0.0.1:1/", "-encoding", "gzip"},
		"bad scheme":      {"send", "-endpoint", "ftp://example/"},
		"bad VAPID key":   {"send", "-endpoint", "http://127.0.0.1:1/", "-vapid-private", "nope"},
		"both data flags": {"send", "-endpoint", "http://127.0.0.1:1/", "-data", "a", "-data-file", "b"},
		"smoke no ws":     {"smoke"},
		"keys extra arg":  {"keys", "x"},
	} {
		if _, _, err := runT(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

// TestSmoke runs the end-to-end check against a real deployment.
func TestSmoke(t *testing.T) {
	st := stacktest.Start(t)
	for _, args := range [][]string{
		{"smoke", "-ws", "ws://" + st.WSAddr() + "/", "-subject", "mailto:ops@example.com"},
		{"smoke", "-ws", "ws://" + st.WSAddr() + "/", "-v1", "-encoding", "aesgcm", "-data", "v1 legacy"},
	} {
		out, errs, err := runT(t, args...)
		if err != nil || !strings.HasSuffix(out, "OK\n") || !strings.Contains(out, "received and decrypted") {
			t.Errorf("%v: %v\n%s%s", args, err, out, errs)
		}
	}
	// Nothing listening: a clear failure, not a hang.
	if _, _, err := runT(t, "smoke", "-ws", "ws://127.0.0.1:1/", "-timeout", "2s"); err == nil || errors.Is(err, errUsage) {
		t.Errorf("smoke against nothing: %v", err)
	}
}

// TestSendReceipt: send -receipt creates a receipt subscription, pushes
// with Push-Receipt and prints the receipt once the user agent acks (exit
// 0); a push that expires unread gets its "not delivered" receipt, exit 1;
// without a VAPID key it is a usage error.
func TestSendReceipt(t *testing.T) {
	st := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) {
		c.API.Receipts, c.API.FateSweepInterval = true, 100*time.Millisecond
	}})
	_, priv := keys(t)
	sub := st.Subscribe(t, "")
	acked := make(chan string, 1)
	go func() { acked <- sub.Receive(t) }()
	out, errs, err := runT(t, "send", "-sub", sub.SubscriptionJSON(), "-data", "with receipt", "-vapid-private", priv, "-receipt")
	if err != nil || !strings.Contains(out, "receipt: delivered at ") {
		t.Fatalf("send -receipt: %v\n%s%s", err, out, errs)
	}
	if got := <-acked; got != "with receipt" {
		t.Fatalf("client decrypted %q", got)
	}

	away := st.Left(t)
	out, _, err = runT(t, "send", "-sub", away.SubscriptionJSON(), "-data", "too late", "-vapid-private", priv, "-receipt", "-ttl", "1", "-json")
	if err == nil || !strings.Contains(err.Error(), "not delivered: expired") || !strings.Contains(out, `"state": "expired"`) {
		t.Fatalf("expired push: %v\n%s", err, out)
	}

	if _, _, err := runT(t, "send", "-endpoint", sub.Endpoint, "-receipt"); !errors.Is(err, errUsage) {
		t.Fatalf("-receipt without -vapid-private: %v", err)
	}
}

// TestSendReceiptBusy: when the node already has as many receipt reads
// waiting as it keeps (receipt-max-waiting, here 1), send -receipt's
// wait is answered 429; it reads again after Retry-After and gets its
// receipt once the slot is free.
func TestSendReceiptBusy(t *testing.T) {
	st := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) {
		c.API.Receipts, c.API.FateSweepInterval, c.API.ReceiptMaxWaiting = true, 100*time.Millisecond, 1
	}})
	_, priv := keys(t)
	// Another application server's read holds the one slot.
	other := stacktest.NewSigner(t)
	ans := apitiertest.Send(t, http.MethodPost, st.EndpointURL()+"/receipts", nil, "Authorization", st.Authorization(t, other))
	if ans.Status != http.StatusCreated {
		t.Fatalf("POST /receipts: %d %s", ans.Status, ans.Body)
	}
	otherSub := ans.Header.Get("Location")
	held := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, otherSub+"?wait=25", nil)
		req.Header.Set("Authorization", st.Authorization(t, other))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	series := func(name string) float64 {
		_, text := st.Metrics(t)
		for _, s := range stacktest.ParseMetrics(t, text) {
			if s.Series == name {
				return s.Value
			}
		}
		return 0
	}
	et.Eventually(t, et.Patience, "the other read to wait", func() bool {
		return series("autoendpoint_receipt_reads_waiting") == 1
	})

	away := st.Left(t)
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var out, errs bytes.Buffer
		err := run(context.Background(), []string{"send", "-sub", away.SubscriptionJSON(), "-data", "too late",
			"-vapid-private", priv, "-receipt", "-ttl", "1", "-json"}, &out, &errs)
		done <- result{out.String() + errs.String(), err}
	}()
	et.Eventually(t, et.Patience, "send -receipt's read to be answered 429", func() bool {
		return series(`autoendpoint_requests_total{route="receipts_read",code="429"}`) >= 1
	})
	// Free the slot: the other application server's receipt comes.
	on := st.Subscribe(t, "")
	if a := st.Push(t, on.Endpoint, on, "freed", other, "Push-Receipt", otherSub); a.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", a.Status, a.Body)
	}
	on.Receive(t)
	if code := <-held; code != http.StatusOK {
		t.Fatalf("the other read: %d", code)
	}
	select {
	case r := <-done:
		if r.err == nil || !strings.Contains(r.err.Error(), "not delivered: expired") || !strings.Contains(r.out, `"state": "expired"`) {
			t.Fatalf("send -receipt after a 429: %v\n%s", r.err, r.out)
		}
	case <-time.After(et.Patience):
		t.Fatal("send -receipt did not finish")
	}
}
