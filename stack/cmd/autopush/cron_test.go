package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/token"
)

// TestCronExpressionsCannotCrash posts go-quartz's crasher ("a fifth
// Monday in February 2027", which sent v0.15.2 into endless recursion:
// 700 MB, then a stack overflow that took the whole server down) and its
// family to the real binary: each impossible one is a 400 naming
// cronExpression and the cron field at fault, each possible one a 201;
// the process stays up, answers its heartbeat, and its RSS stays flat.
func TestCronExpressionsCannotCrash(t *testing.T) {
	binary(t)
	dir := t.TempDir()
	vals := minimal(t, dir)
	vals["crypto-key"], vals["push-api-keys"] = token.GenerateKey(), "cron-key"
	vals["swrve-url"] = "http://127.0.0.1:9/push" // nothing is due: no push is sent
	vals["swrve-keys-file"] = filepath.Join(dir, "keys.yaml")
	et.Must(t, os.WriteFile(vals["swrve-keys-file"], []byte("messagePrototypePushKeys: {Hello: {IOS: k-ios}}\n"), 0o600), "write the keys")
	p := start(t, fromFlags, vals)
	api := "http://" + vals["endpoint-listen"]

	post := func(expr string) (int, map[string]any) {
		body := fmt.Sprintf(`{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"k","message":"m","cronExpression":%q}`, expr)
		req, _ := http.NewRequest(http.MethodPost, api+"/push", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer cron-key")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %q: %v (server output: %s)", expr, err, p.Tail())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return resp.StatusCode, m
	}
	rss := func() int {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
		et.Must(t, err, "read the server's /proc status")
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.Atoi(f[1])
				return kb
			}
		}
		t.Fatal("no VmRSS")
		return 0
	}

	post("0 0 9 ? * MON") // warm up the route before the baseline
	before := rss()
	impossible := map[string]string{
		"0 0 0 ? 2 MON#5 2027":      "day-of-week",
		"0 0 0 ? 4 SUN#5 2027":      "day-of-week",
		"0 0 0 ? 2 TUE#5 2029-2031": "day-of-week",
		"0 0 0 31 2 ?":              "day-of-month",
		"0 0 0 30 2 ?":              "day-of-month",
		"0 0 0 30W 2 ?":             "day-of-month",
		"0 0 0 L-31 * ?":            "day-of-month",
		"0 0 0 L-29 2 ? 2027":       "day-of-month",
		"0 0 0 1 1 ? 2000":          "years",
		"0 0 0 ? * MON#6":           "day-of-week",
		"0 0 0 ? * * 2200":          "year",
	}
	possible := []string{"0 0 0 ? 2 MON#5", "0 0 0 L-30 * ?", "0 0 0 29 2 ?", "0 0 12 31W * ?", "59 59 23 L 12 ? 2126"}
	for round := range 20 {
		for expr, field := range impossible {
			code, m := post(expr)
			msg, _ := m["message"].(string)
			if code != http.StatusBadRequest || !strings.Contains(msg, "cronExpression") || !strings.Contains(msg, field) {
				t.Fatalf("round %d, %q: %d %v; want 400 naming cronExpression and %s", round, expr, code, m, field)
			}
		}
		for _, expr := range possible {
			if code, m := post(expr); code != http.StatusCreated {
				t.Fatalf("round %d, %q: %d %v; want 201", round, expr, code, m)
			}
		}
	}
	select {
	case <-p.Exited():
		t.Fatalf("the server exited: %s", p.Tail())
	default:
	}
	if code, body := get(t, api+"/__heartbeat__", ""); code != http.StatusOK {
		t.Fatalf("heartbeat after the expressions: %d %s", code, body)
	}
	// 320 requests: the allocator's own growth is a few MB; go-quartz grew
	// hundreds on the first.
	if after := rss(); after-before > 32<<10 {
		t.Fatalf("RSS grew from %d kB to %d kB", before, after)
	} else {
		t.Logf("RSS %d kB before, %d kB after %d requests", before, after, 20*(len(impossible)+len(possible)))
	}
}
