package docs_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/sender/node"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
	"github.com/autopush-go/autopush/storage/embedded"
)

// startPushAPI runs an API node with the sender over an embedded store,
// sending to a fake Swrve that answers 200 to "ok" users and 400 to others.
func startPushAPI(t *testing.T) (base string, s *node.Sender) {
	t.Helper()
	fake, err := swrvefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	fake.SetFaults(func(r swrvefake.Received) swrvefake.Fault {
		if r.User == "ok" {
			return swrvefake.Fault{}
		}
		return swrvefake.Fault{Status: 400, Message: "No such user"}
	})
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	os.WriteFile(keys, []byte("swrve:\n  messagePrototypePushKeys:\n    Hello:\n      IOS: k-ios\n      ANDROID: k-android\n"), 0o644)
	cfg := apitier.DefaultConfig()
	cfg.CryptoKey, cfg.NodeSecret, cfg.Listen, cfg.PushAPIKeys = et.TestKey, et.TestSecret, "127.0.0.1:0", []string{"secret-key"}
	cfg.MetricsListen = "127.0.0.1:0" // never the default 127.0.0.1:8084, which anything may hold
	// Two clients beside the admin key: one that may send once (its rate
	// is a push per 1,000 s) and read, one that may only read.
	cfg.PushClientsFile = filepath.Join(t.TempDir(), "clients.yaml")
	os.WriteFile(cfg.PushClientsFile, []byte("clients:\n"+
		clients.Entry(clients.Client{Name: "once", KeyHash: clients.Hash("once-key"), Scopes: []clients.Scope{clients.Send, clients.Read}, Rate: 0.001})+
		clients.Entry(clients.Client{Name: "reader", KeyHash: clients.Hash("reader-key"), Scopes: []clients.Scope{clients.Read}})), 0o600)
	scfg := node.DefaultConfig()
	scfg.Node, scfg.SwrveConfig.URL, scfg.KeysFile = "docs", fake.URL(), keys
	scfg.ScheduledStart, scfg.PendingStart = 0, 0
	srv, err := apitier.New(cfg, store, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	s, err = node.Build(scfg, store, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	srv.SetPushService(s)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		s.Stop(ctx)
		s.Close()
	})
	return "http://" + srv.Addr(), s
}

// TestPushAPIMatchesAnswers checks the push API's real answers against
// openapi.yaml.
func TestPushAPIMatchesAnswers(t *testing.T) {
	base, _ := startPushAPI(t)
	api := newValidator(t, "openapi.yaml", base)
	auth := []string{"Authorization", "Bearer secret-key", "Content-Type", "application/json"}
	body := []byte(`{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"ok","message":"Hello client!","cronExpression":null}`)
	api.check("accept", request(t, "POST", base+"/push", body, auth...), 201)
	api.check("no key", request(t, "POST", base+"/push", body), 401)
	api.check("wrong key", request(t, "POST", base+"/push", body, "Authorization", "Bearer nope"), 401)
	api.check("bad platform", request(t, "POST", base+"/push", []byte(`{"platform":"WEB","messagePrototypeKey":"Hello","pushKey":"ok","message":"m"}`), auth...), 400)
	api.check("bad cron", request(t, "POST", base+"/push", []byte(`{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"ok","message":"m","cronExpression":"soon"}`), auth...), 400)
	api.check("not JSON", request(t, "POST", base+"/push", []byte(`{`), auth...), 400)
	api.check("unmapped prototype", request(t, "POST", base+"/push", []byte(`{"platform":"ANDROID","messagePrototypeKey":"Goodbye","pushKey":"ok","message":"m"}`), auth...), 400)

	req := request(t, "POST", base+"/push", body, auth...)
	resp, err := httpDo(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("accept: %v %v", err, resp)
	}
	loc := resp.Header.Get("Location")
	if !regexp.MustCompile(`^/push/[0-9a-f-]{36}$`).MatchString(loc) {
		t.Fatalf("Location %q", loc)
	}
	api.check("get", request(t, "GET", base+loc, nil, auth...), 200)
	api.check("get missing", request(t, "GET", base+"/push/01a20a3e-dfa0-7a09-899d-c75caba96873", nil, auth...), 404)
	api.check("get bad id", request(t, "GET", base+"/push/nope", nil, auth...), 404)
	api.check("list", request(t, "GET", base+"/push?state=SENT&limit=5", nil, auth...), 200)
	api.check("list bad state", request(t, "GET", base+"/push?state=LOST", nil, auth...), 400)
	api.check("list no key", request(t, "GET", base+"/push?state=SENT", nil), 401)

	// Clients, quotas, search, cancel, Idempotency-Key.
	once := []string{"Authorization", "Bearer once-key", "Content-Type", "application/json"}
	reader := []string{"Authorization", "Bearer reader-key"}
	later := []byte(`{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"ok","message":"m","cronExpression":"0 0 9 1 1 ? 2099"}`)
	api.check("accept with a key", request(t, "POST", base+"/push", later, append(auth, "Idempotency-Key", "order-1")...), 201)
	api.check("repeat", request(t, "POST", base+"/push", later, append(auth, "Idempotency-Key", "order-1")...), 201)
	api.check("accept within the rate", request(t, "POST", base+"/push", later, once...), 201)
	api.check("over the rate", request(t, "POST", base+"/push", later, once...), 429)
	api.check("bad key", request(t, "POST", base+"/push", later, append(once, "Idempotency-Key", "a b")...), 400)
	api.check("no send scope", request(t, "POST", base+"/push", later, append(reader, "Content-Type", "application/json")...), 403)
	api.check("search", request(t, "GET", base+"/push?pushKey=ok&limit=2", nil, once...), 200)
	api.check("search as admin, revealed", request(t, "GET", base+"/push?pushKey=ok&reveal=pushKey", nil, auth...), 200)
	api.check("reveal, not an admin", request(t, "GET", base+"/push?pushKey=ok&reveal=pushKey", nil, once...), 403)
	// A cursor is for the client and the listing it was given for.
	next := nextCursor(t, request(t, "GET", base+"/push?pushKey=ok&limit=1", nil, auth...))
	api.check("next page", request(t, "GET", base+"/push?pushKey=ok&limit=1&cursor="+next, nil, auth...), 200)
	api.check("another client's cursor", request(t, "GET", base+"/push?pushKey=ok&limit=1&cursor="+next, nil, once...), 400)
	api.check("another listing's cursor", request(t, "GET", base+"/push?state=SENT&cursor="+next, nil, auth...), 400)
	api.check("a cut cursor", request(t, "GET", base+"/push?pushKey=ok&cursor="+next[:len(next)-2], nil, auth...), 400)
	api.check("reveal what", request(t, "GET", base+loc+"?reveal=message", nil, auth...), 400)
	api.check("state and pushKey", request(t, "GET", base+"/push?pushKey=ok&state=SENT", nil, once...), 400)
	api.check("another's push", request(t, "GET", base+loc, nil, once...), 404)
	api.check("cancel another's", request(t, "DELETE", base+loc, nil, once...), 404)
	api.check("cancel, read scope", request(t, "DELETE", base+loc, nil, reader...), 403)
	api.check("cancel no key", request(t, "DELETE", base+loc, nil), 401)
	resp, err = httpDo(request(t, "POST", base+"/push", later, auth...))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("accept: %v %v", err, resp)
	}
	scheduled := resp.Header.Get("Location")
	api.check("cancel", request(t, "DELETE", base+scheduled, nil, auth...), 204)
	api.check("cancel a final push", request(t, "DELETE", base+scheduled, nil, auth...), 409)
	api.check("cancel a missing push", request(t, "DELETE", base+"/push/01a20a3e-dfa0-7a09-899d-c75caba96873", nil, auth...), 404)
}

// nextCursor is the "next" of a listing's answer, which must have one.
func nextCursor(t *testing.T, req *http.Request) string {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct{ Next *string }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || page.Next == nil {
		t.Fatalf("%s: %d, no next (%v)", req.URL, resp.StatusCode, err)
	}
	return *page.Next
}

// autosenderRow is a row of metrics.md's sender table.
var autosenderRow = regexp.MustCompile("(?m)^\\| `(autosender_[a-z_]+)` \\| (counter|gauge|histogram) \\| ([^|]*)\\|")

// TestSenderMetricsDoc checks metrics.md's sender table against the
// sender's /metrics after pushes that were sent and that failed.
func TestSenderMetricsDoc(t *testing.T) {
	base, s := startPushAPI(t)
	auth := []string{"Authorization", "Bearer secret-key"}
	for _, user := range []string{"ok", "bad"} {
		resp, err := httpDo(request(t, "POST", base+"/push", []byte(`{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"`+user+`","message":"m"}`), auth...))
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("accept: %v %v", err, resp)
		}
	}
	var b strings.Builder
	s.WriteMetrics(&b)
	series, err := promtext.ParseAll(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]family{}
	for name, f := range servedMetrics(renamed(series)) {
		served["autosender_"+strings.TrimPrefix(name, "autoendpoint_")] = f
	}
	doc, err := os.ReadFile("metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]family{}
	for _, m := range autosenderRow.FindAllStringSubmatch(string(doc), -1) {
		f := family{kind: m[2]}
		for l := range strings.SplitSeq(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				f.labels = append(f.labels, l)
			}
		}
		slices.Sort(f.labels)
		documented[m[1]] = f
	}
	for name, f := range served {
		d, ok := documented[name]
		if !ok || d.kind != f.kind || !slices.Equal(d.labels, f.labels) {
			t.Errorf("%s served as %s %v; metrics.md says %v (%s %v)", name, f.kind, f.labels, ok, d.kind, d.labels)
		}
	}
	for name := range documented {
		if _, ok := served[name]; !ok {
			t.Errorf("metrics.md lists %s, which the sender does not serve", name)
		}
	}
}

// renamed gives the sender's series the prefix servedMetrics groups.
func renamed(series []promtext.Sample) []promtext.Sample {
	out := make([]promtext.Sample, 0, len(series))
	for _, s := range series {
		if rest, ok := strings.CutPrefix(s.Name, "autosender_"); ok {
			s.Name = "autoendpoint_" + rest
			out = append(out, s)
		}
	}
	return out
}

func httpDo(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// TestClientsFileExample: the clients file sender.md shows is one the
// server loads, with the scopes and quotas its comments say.
func TestClientsFileExample(t *testing.T) {
	doc, err := os.ReadFile("sender.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "\n## Clients\n")
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("sender.md's Clients section has no yaml block")
	}
	cs, err := clients.Parse([]byte(m[1]))
	if err != nil {
		t.Fatalf("sender.md's clients file: %v", err)
	}
	if len(cs) != 2 || cs[0].Name != "marketing" || cs[0].Rate != 50 || cs[0].Outstanding != 10000 ||
		!cs[0].Can(clients.Send) || cs[0].Can(clients.Admin) || !cs[1].Can(clients.Admin) {
		t.Fatalf("sender.md's clients: %+v", cs)
	}
}
