package docs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/apitier/receipts"
	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/nodeapi"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/sender/node"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/stack/stacktest"
)

var update = flag.Bool("update", false, "rewrite the generated sections of the docs")

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func loadOpenAPI(t *testing.T, file string) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not valid OpenAPI 3: %v", file, err)
	}
	return doc
}

// documented lists "METHOD /path/{param}" for every operation of doc.
func documented(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

var hertzParam = regexp.MustCompile(`:([A-Za-z_]+)`)

// TestOpenAPIListsEveryRoute validates both OpenAPI documents and checks
// that each lists exactly the routes its server registers.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	acfg := apitier.DefaultConfig()
	acfg.CryptoKey, acfg.NodeSecret = et.TestKey, et.TestSecret
	api, err := apitier.New(acfg, nil, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	var apiRoutes []string
	for _, r := range api.Routes() {
		apiRoutes = append(apiRoutes, r.Method+" "+hertzParam.ReplaceAllString(r.Path, "{$1}"))
	}
	slices.Sort(apiRoutes)
	if got := documented(loadOpenAPI(t, "openapi.yaml")); !slices.Equal(got, apiRoutes) {
		t.Errorf("openapi.yaml documents\n  %v\nthe API tier registers\n  %v", got, apiRoutes)
	}

	node, err := engine.New(et.Config(), nil, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	nodeRoutes := node.NodeAPIRoutes()
	slices.Sort(nodeRoutes)
	if got := documented(loadOpenAPI(t, "nodeapi.yaml")); !slices.Equal(got, nodeRoutes) {
		t.Errorf("nodeapi.yaml documents\n  %v\nthe node API registers\n  %v", got, nodeRoutes)
	}
}

// TestOpenAPIWebhookPattern: the webhook's pattern in openapi.yaml is
// the grammar the receipts routes check a webhook against, so that the
// schema takes exactly the webhooks the node takes (schemathesis checks
// both ways).
func TestOpenAPIWebhookPattern(t *testing.T) {
	doc := loadOpenAPI(t, "openapi.yaml")
	body := doc.Paths.Find("/receipts").Post.RequestBody.Value.Content.Get("application/json").Schema.Value
	got := body.Properties["webhook"].Value.Pattern
	if want := "^https:" + receipts.WebhookRest + "$"; got != want {
		t.Errorf("openapi.yaml's webhook pattern\n  %s\nreceipts.WebhookRest gives\n  %s", got, want)
	}
}

// validator checks real answers against an OpenAPI document.
type validator struct {
	t      *testing.T
	router routers.Router
}

func newValidator(t *testing.T, file, serverURL string) *validator {
	doc := loadOpenAPI(t, file)
	doc.Servers = openapi3.Servers{{URL: serverURL}}
	r, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &validator{t: t, router: r}
}

// check sends req and validates the answer: a documented status, and a
// body and headers as documented for it. It returns the status.
func (v *validator) check(what string, req *http.Request, wantStatus int) {
	v.t.Helper()
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		v.t.Errorf("%s: %s %s is not in the document: %v", what, req.Method, req.URL.Path, err)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		v.t.Fatalf("%s: %v", what, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != wantStatus {
		v.t.Errorf("%s: status %d, want %d: %s", what, resp.StatusCode, wantStatus, body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		v.t.Errorf("%s: the answer (%d %s) does not match the document: %v", what, resp.StatusCode, body, err)
	}
}

func request(t *testing.T, method, url string, body []byte, hdr ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

// TestOpenAPIMatchesAnswers sends requests to running nodes and checks
// each answer against the documents.
func TestOpenAPIMatchesAnswers(t *testing.T) {
	const broadcastToken = "docs-test-broadcast-token"
	const bridgeKey = "docs-test-bridge-auth-key"
	st := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) {
		c.API.BroadcastTokens = []string{broadcastToken}
		c.API.BridgeAuthKeys = []string{bridgeKey}
		c.API.ReferenceMilestones = true // its 404 when off: TestReferenceReliableReport
	}})
	api := newValidator(t, "openapi.yaml", st.EndpointURL())
	signer := stacktest.NewSigner(t)
	sub := st.Subscribe(t, signer.Public)
	body, err := pushcrypto.EncryptAES128GCM([]byte("hi"), sub.Private.PublicKey().Bytes(), sub.Auth)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := signer.Token(st.EndpointURL(), timeIn(3600))
	auth := signer.Authorization(tok)
	ep := sub.Endpoint

	api.check("push", request(t, "POST", ep, body, "TTL", "60", "Content-Encoding", "aes128gcm", "Authorization", auth, "Urgency", "high"), 201)
	sub.Receive(t)
	api.check("push without VAPID to v2", request(t, "POST", ep, body, "TTL", "60", "Content-Encoding", "aes128gcm"), 401)
	api.check("push without TTL", request(t, "POST", ep, body, "Content-Encoding", "aes128gcm", "Authorization", auth), 400)
	api.check("push without Content-Encoding", request(t, "POST", ep, body, "TTL", "1", "Authorization", auth), 400)
	api.check("bad Topic", request(t, "POST", ep, nil, "TTL", "1", "Topic", "no spaces", "Authorization", auth), 400)
	api.check("too large", request(t, "POST", ep, make([]byte, apitier.DefaultMaxDataBytes+1), "TTL", "1", "Content-Encoding", "aes128gcm", "Authorization", auth), 413)
	api.check("bad token", request(t, "POST", st.EndpointURL()+"/wpush/v1/gAAAAAnotatoken", nil, "TTL", "1"), 404)
	api.check("unknown version", request(t, "POST", st.EndpointURL()+"/wpush/v9/gAAAAAnotatoken", nil, "TTL", "1"), 404)
	api.check("versionless bad token", request(t, "POST", st.EndpointURL()+"/wpush/gAAAAAnotatoken", nil, "TTL", "1"), 404)

	gone := st.Subscribe(t, "")
	gone.Send(map[string]any{"messageType": "unregister", "channelID": gone.CHID})
	gone.Read()
	api.check("unsubscribed channel", request(t, "POST", gone.Endpoint, nil, "TTL", "1"), 410)

	left := st.Subscribe(t, "")
	left.Close()
	r := st.Push(t, left.Endpoint, left, "stored", nil, "TTL", "600")
	if r.Status != 201 {
		t.Fatalf("push to a client that left: %d %s", r.Status, r.Body)
	}
	api.check("delete a stored message", request(t, "DELETE", r.Header.Get("Location"), nil), 204)
	api.check("delete a bad id", request(t, "DELETE", st.EndpointURL()+"/m/nope", nil), 404)

	for _, p := range []string{"/__heartbeat__", "/__lbheartbeat__", "/__version__", "/health", "/status", "/__milestones__"} {
		api.check("GET "+p, request(t, "GET", st.EndpointURL()+p, nil), 200)
	}
	// /metrics is not a public route (metrics-listen serves it).
	if resp, err := http.DefaultClient.Do(request(t, "GET", st.EndpointURL()+"/metrics", nil)); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics on the public port: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
	publish := st.EndpointURL() + "/v1/broadcasts/remote-settings/monitor_changes"
	bearer := "Bearer " + broadcastToken
	api.check("publish a broadcast", request(t, "PUT", publish, []byte(`"1"`), "Authorization", bearer), 201)
	api.check("publish a new version", request(t, "PUT", publish, []byte(`"2"`), "Authorization", bearer), 200)
	api.check("publish a bad version", request(t, "PUT", publish, []byte("two words"), "Authorization", bearer), 400)
	api.check("publish without a token", request(t, "PUT", publish, []byte(`"3"`)), 401)
	api.check("list broadcasts", request(t, "GET", st.EndpointURL()+"/v1/broadcasts", nil, "Authorization", bearer), 200)
	api.check("list broadcasts with a wrong token", request(t, "GET", st.EndpointURL()+"/v1/broadcasts", nil, "Authorization", "Bearer nope"), 401)

	// The bridge registration API (webpush type: no bridge configured).
	regURL := st.EndpointURL() + "/v1/webpush/app/registration"
	jsonCT := []string{"Content-Type", "application/json"}
	api.check("register", request(t, "POST", regURL, []byte(`{"token":"t"}`), jsonCT...), 200)
	resp, err := http.DefaultClient.Do(request(t, "POST", regURL, []byte(`{"token":"t"}`), jsonCT...))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct{ UAID, ChannelID, Secret string }
	if err := decodeJSON(resp, &reg); err != nil {
		t.Fatal(err)
	}
	regAuth := []string{"Authorization", "Bearer " + reg.Secret}
	uaidURL := regURL + "/" + reg.UAID
	api.check("register, unknown type", request(t, "POST", st.EndpointURL()+"/v1/adm/app/registration", []byte(`{"token":"t"}`), jsonCT...), 400)
	api.check("register, unknown app", request(t, "POST", st.EndpointURL()+"/v1/fcm/app/registration", []byte(`{"token":"fcm-token-0123"}`), jsonCT...), 400)
	api.check("register, too large", request(t, "POST", regURL, make([]byte, 5000), jsonCT...), 413)
	api.check("list channels", request(t, "GET", uaidURL, nil, regAuth...), 200)
	api.check("list channels/", request(t, "GET", uaidURL+"/", nil, regAuth...), 200)
	api.check("list channels without the secret", request(t, "GET", uaidURL, nil), 401)
	api.check("list channels of nobody", request(t, "GET", regURL+"/nope", nil, regAuth...), 410)
	api.check("update token", request(t, "PUT", uaidURL, []byte(`{"token":"t2"}`), append(regAuth, jsonCT...)...), 200)
	api.check("update token, bad JSON", request(t, "PUT", uaidURL, []byte(`{`), append(regAuth, jsonCT...)...), 400)
	api.check("subscribe", request(t, "POST", uaidURL+"/subscription", []byte(`{}`), append(regAuth, jsonCT...)...), 200)
	api.check("unsubscribe", request(t, "DELETE", uaidURL+"/subscription/"+reg.ChannelID, nil, regAuth...), 200)
	api.check("unsubscribe again", request(t, "DELETE", uaidURL+"/subscription/"+reg.ChannelID, nil, regAuth...), 410)
	api.check("unregister", request(t, "DELETE", uaidURL, nil, regAuth...), 200)

	node := newValidator(t, "nodeapi.yaml", "http://"+st.NodeAddr())
	base := "http://" + st.NodeAddr()
	for _, p := range []string{"/__heartbeat__", "/__lbheartbeat__", "/__version__", "/health", "/metrics"} {
		node.check("node GET "+p, request(t, "GET", base+p, nil), 200)
	}
	n := et.Notification(sub.CHID, "docs-test-version-0123456789abcdef", "")
	nodeAuth := []string{"Authorization", "Bearer " + et.TestSecret}
	node.check("node push", request(t, "PUT", base+"/push/"+sub.UAID, nodeapi.AppendNotification(nil, n), nodeAuth...), 200)
	sub.Receive(t)
	sub.Barrier() // the node has handled the ack: nothing in flight, a check runs now (200)
	node.check("node push, not here", request(t, "PUT", base+"/push/"+strings.Repeat("ab", 16), nodeapi.AppendNotification(nil, n), nodeAuth...), 404)
	node.check("node push, bad uaid", request(t, "PUT", base+"/push/nope", nodeapi.AppendNotification(nil, n), nodeAuth...), 400)
	node.check("node push, no secret", request(t, "PUT", base+"/push/"+sub.UAID, nodeapi.AppendNotification(nil, n)), 401)
	node.check("node push, too large", request(t, "PUT", base+"/push/"+sub.UAID, make([]byte, 1<<20), nodeAuth...), 413)
	node.check("node notif", request(t, "PUT", base+"/notif/"+sub.UAID, nil, nodeAuth...), 200)
	node.check("node evict, not older", request(t, "DELETE", base+"/notif/"+sub.UAID+"/1", nil, nodeAuth...), 404)
}

// TestGenerated checks the generated sections of errors.md and
// configuration.md against the code (-update rewrites them).
func TestGenerated(t *testing.T) {
	table := errnoTable(t)
	generated(t, "errors.md", "errnos", table)
	// errors.md's prose names the errnos never sent: 101, 202, 901-903.
	var unsent []string
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \|.*\| no \|$`).FindAllStringSubmatch(table, -1) {
		unsent = append(unsent, m[1])
	}
	if strings.Join(unsent, ",") != "101,202,901,902,903" {
		t.Errorf("the errnos never sent are now %v: update the prose of errors.md", unsent)
	}
	generated(t, "configuration.md", "autoconnect", settingsTable(settings.Describe(ptr(engine.DefaultConfig()), "AUTOCONNECT")))
	generated(t, "configuration.md", "autoendpoint", settingsTable(settings.Describe(&autoendpointConfig{apitier.DefaultConfig(), node.DefaultConfig()}, "AUTOEND")))
	generated(t, "configuration.md", "autosender", settingsTable(settings.Describe(ptr(node.DefaultAutosenderConfig()), "AUTOSENDER")))
	generated(t, "configuration.md", "autopush", settingsTable(settings.Describe(ptr(single.DefaultConfig()).Settings(), single.Prefix)))
}

func ptr[T any](v T) *T { return &v }

// autoendpointConfig is autoendpoint's settings as its main
// (apitier/cmd/autoendpoint) composes them: the HTTP tier's, then the
// outbound sender's.
type autoendpointConfig struct {
	endpointSettings
	senderSettings
}

type (
	endpointSettings = apitier.Config
	senderSettings   = node.Config
)

// decodeJSON reads resp's body as JSON into v and closes it.
func decodeJSON(resp *http.Response, v any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func timeIn(seconds int) time.Time { return time.Now().Add(time.Duration(seconds) * time.Second) }

// generated compares (or, with -update, replaces) the text between
// "<!-- BEGIN GENERATED name -->" and "<!-- END GENERATED name -->".
func generated(t *testing.T, file, name, want string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	begin := "<!-- BEGIN GENERATED " + name + " (go test ./docs -run TestGenerated -update) -->\n"
	end := "<!-- END GENERATED " + name + " -->"
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no generated section %q", file, name)
	}
	got := string(b[i+len(begin) : j])
	if got == want {
		return
	}
	if *update {
		out := append(append(append([]byte{}, b[:i+len(begin)]...), want...), b[j:]...)
		if err := os.WriteFile(file, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: section %s is out of date with the code; run go test ./docs -run TestGenerated -update\n--- have\n%s--- want\n%s", file, name, got, want)
}

// settingsTable renders settings; for a group's (the single-node
// server's) with a column of the tiers each sets.
func settingsTable(list []settings.Setting) string {
	group := len(list) > 0 && list[0].Parts != nil
	var b strings.Builder
	if group {
		b.WriteString("| flag | environment variable | type | default | sets | what |\n| --- | --- | --- | --- | --- | --- |\n")
	} else {
		b.WriteString("| flag | environment variable | type | default | what |\n| --- | --- | --- | --- | --- |\n")
	}
	for _, s := range list {
		def := "`" + s.Default + "`"
		if s.Default == "" {
			def = "(empty)"
		}
		sets := ""
		switch {
		case len(s.Parts) > 1:
			sets = "both tiers | "
		case group:
			sets = s.Parts[0] + " | "
		}
		fmt.Fprintf(&b, "| `-%s` | `%s` | %s | %s | %s%s |\n", s.Name, s.Env, strings.ReplaceAll(s.Type, "|", `\|`), def, sets, strings.ReplaceAll(s.Help, "|", `\|`))
	}
	return b.String()
}

// errnoTable renders errno.Table(), with whether this service sends
// each: an errno is sent when the API tier's code names it, or when an
// error type it answers with (internal/token, internal/vapid) does.
func errnoTable(t *testing.T) string {
	t.Helper()
	names := errnoNames(t)
	sent := map[errno.Code]bool{}
	use := regexp.MustCompile(`\berrno\.([A-Z][A-Za-z]*)\b`)
	for _, dir := range httpTier(t) {
		for _, f := range sources(t, dir) {
			for _, m := range use.FindAllStringSubmatch(f, -1) {
				sent[names[m[1]]] = true
			}
		}
	}
	// The error types the API tier answers with (token.EndpointError,
	// vapid.Error) build their HTTPError from an errno in their package.
	own := regexp.MustCompile(`\berrno\.([A-Za-z]+)\.HTTPError\(`)
	for _, dir := range []string{"../internal/token", "../internal/vapid"} {
		for _, f := range sources(t, dir) {
			for _, m := range own.FindAllStringSubmatch(f, -1) {
				sent[names[m[1]]] = true
			}
		}
	}
	var b strings.Builder
	b.WriteString("| errno | HTTP status | meaning | usual message | sent by autopush-go |\n| ---: | ---: | --- | --- | --- |\n")
	for _, in := range errno.Table() {
		yes := "no"
		if sent[in.Errno] {
			yes = "yes"
		}
		fmt.Fprintf(&b, "| %d | %d %s | %s | %s | %s |\n", in.Errno, in.Status, http.StatusText(in.Status), in.Meaning, in.Message, yes)
	}
	return b.String()
}

// httpTier lists the API tier's packages that answer HTTP: its root and
// the APIs in packages of their own (apitier/pushapi, ...), not the
// sender's wing, the test helpers or the binaries.
func httpTier(t *testing.T) []string {
	t.Helper()
	dirs := []string{"../apitier"}
	subs, err := filepath.Glob("../apitier/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range subs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && !slices.Contains([]string{"cmd", "sender", "apitiertest"}, filepath.Base(d)) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// errnoNames maps the errno.Code constants' names to their values, read
// from errno.go.
func errnoNames(t *testing.T) map[string]errno.Code {
	t.Helper()
	b, err := os.ReadFile("../internal/errno/errno.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]errno.Code{}
	for _, m := range regexp.MustCompile(`(?m)^\s*([A-Z][A-Za-z]*)\s+Code = (\d+)$`).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = errno.Code(n)
	}
	if len(out) != len(errno.Table())+1 { // + errno.None
		t.Fatalf("read %d errno constants from errno.go, the table has %d", len(out), len(errno.Table()))
	}
	return out
}

// sources returns the non-test Go files of dir.
func sources(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}
