package main

import (
	"bufio"
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/devcert"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/sender/sendertest/apnsfake"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// built holds the binaries the tests build, each once for every test of
// the package: package path to *builtBinary.
var built sync.Map

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// build builds the main package pkg (a path from this directory) once
// and returns the binary's path.
func build(t *testing.T, pkg string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs binaries (not with -short)")
	}
	v, _ := built.LoadOrStore(pkg, &builtBinary{})
	b := v.(*builtBinary)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "autopush-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(filepath.Clean(pkg)))
		if pkg == "." {
			b.path = filepath.Join(dir, "autopush")
		}
		if out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// binary is the server's binary.
func binary(t *testing.T) string { return build(t, ".") }

// source is how a run passes its settings.
type source string

const (
	fromFlags source = "flags"
	fromEnv   source = "env"
	fromFile  source = "file"
)

// start runs the binary with vals passed through src (and extraEnv),
// waits for its ready line, and stops it (SIGKILL) when the test ends.
func start(t *testing.T, src source, vals map[string]string, extraEnv ...string) *proc.Proc {
	t.Helper()
	if _, ok := vals["metrics-listen"]; !ok {
		// Never the default 127.0.0.1:8084: another test's server, or
		// anything else on the machine, may hold it.
		vals = maps.Clone(vals)
		vals["metrics-listen"] = "127.0.0.1:0"
	}
	var args []string
	env := append(childEnv(), extraEnv...)
	kinds := kindsOf()
	switch src {
	case fromFlags:
		for k, v := range vals {
			args = append(args, "-"+k+"="+v)
		}
	case fromEnv:
		for k, v := range vals {
			env = append(env, settingEnv(k)+"="+v)
		}
	case fromFile:
		// Native JSON types where the setting has one, as people write.
		m := map[string]any{}
		for k, v := range vals {
			m[k] = v
			switch kinds[k] {
			case "int":
				m[k], _ = strconv.Atoi(v)
			case "bool":
				m[k] = v == "true"
			case "list":
				m[k] = strings.Split(v, ",")
			}
		}
		b, _ := json.Marshal(m)
		file := filepath.Join(t.TempDir(), "autopush.json")
		et.Must(t, os.WriteFile(file, b, 0o600), "write the config file")
		args = append(args, "-config", file)
	}
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	return e2etest.Start(t, cmd, single.ReadyMsg)
}

// childEnv is a server's environment: ours without any AUTOPUSH__ or
// GOGC.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, single.Prefix+"__") && !strings.HasPrefix(kv, "GOGC=") {
			env = append(env, kv)
		}
	}
	return env
}

// settingEnv is a setting's variable, as Describe names it.
func settingEnv(name string) string {
	return single.Prefix + "__" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// kindsOf guesses each setting's kind from its default, for the JSON file
// and the probe values: int, bool, duration, list (a comma in it or
// cql-hosts), or string.
func kindsOf() map[string]string {
	cfg := single.DefaultConfig()
	out := map[string]string{}
	for _, s := range settings.Describe(cfg.Settings(), single.Prefix) {
		out[s.Name] = kindOf(s)
	}
	return out
}

func kindOf(s settings.Setting) string {
	if _, err := strconv.Atoi(s.Default); err == nil {
		return "int"
	}
	if s.Default == "true" || s.Default == "false" {
		return "bool"
	}
	if d, err := time.ParseDuration(s.Default); err == nil && d.String() == s.Default {
		return "duration"
	}
	if _, err := strconv.ParseFloat(s.Default, 64); err == nil {
		return "float"
	}
	if strings.Contains(s.Default, ",") || s.Name == "cql-hosts" {
		return "list"
	}
	return "string"
}

// describeDefault is a setting's default ("" when there is none).
func describeDefault(name string) string {
	cfg := single.DefaultConfig()
	for _, s := range settings.Describe(cfg.Settings(), single.Prefix) {
		if s.Name == name {
			return s.Default
		}
	}
	return ""
}

// probe returns a value for a setting of kind from its default that
// differs from it and that the server accepts: three quarters of a
// duration (1s for 0), one less of an int above 1 (else one more), the
// other boolean. Strings and lists have no generic value: the caller
// names them.
func probe(kind, def string) (string, bool) {
	switch kind {
	case "duration":
		d, _ := time.ParseDuration(def)
		if d == 0 {
			return "1s", true
		}
		// Longer, not shorter: the run's timeouts (storage, node API, hello)
		// then hold on a loaded CI machine with a slow CQL server.
		return (d * 3 / 2).Round(time.Millisecond).String(), true
	case "int":
		n, _ := strconv.Atoi(def)
		if n > 1 {
			return strconv.Itoa(n - 1), true
		}
		return strconv.Itoa(n + 1), true
	case "float":
		x, _ := strconv.ParseFloat(def, 64)
		if x == 0 {
			return "1", true
		}
		return strconv.FormatFloat(x*3/4, 'f', -1, 64), true
	case "bool":
		return strconv.FormatBool(def != "true"), true
	}
	return "", false
}

// probeRun is one start of the server with every setting given a value that
// is not its default, through one source.
type probeRun struct {
	dir     string
	vals    map[string]string
	version string // the version file's version
	scylla  bool
}

// The probe run's broadcasts: the fake Megaphone's (megaphone-api-url,
// which answers only megaphone-api-token) and the tokens of the publish
// route (broadcast-tokens, broadcast-reader-tokens).
const (
	probeClientKey      = "probe-client-key" // push-clients-file's client
	probeMegaphoneToken = "probe-megaphone-token"
	probeMegaphoneID    = "probe/megaphone"
	probeMegaphoneVer   = "v7"
	probePublisher      = "probe-publisher-2-token"
	probeReader         = "probe-reader-token-1"
)

// fakeMegaphone serves Megaphone's GET /v1/broadcasts on 127.0.0.1 to
// the bearer token probeMegaphoneToken; others get 401.
func fakeMegaphone(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+probeMegaphoneToken {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"code":200,"broadcasts":{%q:%q}}`, probeMegaphoneID, probeMegaphoneVer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/broadcasts"
}

// newRun chooses a value for every setting the server has (Describe, so
// a new setting of either tier is covered without a change here; a new
// string setting makes this fail until it is given a value).
func newRun(t *testing.T, src source, scylla string) *probeRun {
	t.Helper()
	r := &probeRun{dir: t.TempDir(), vals: map[string]string{}, version: "probe-" + string(src)}
	versionFile := filepath.Join(r.dir, "version.json")
	et.Must(t, os.WriteFile(versionFile, fmt.Appendf(nil, `{"version":%q}`, r.version), 0o600), "version file")
	swrveKeys := filepath.Join(r.dir, "swrve-keys.yaml")
	et.Must(t, os.WriteFile(swrveKeys, []byte("swrve:\n  messagePrototypePushKeys:\n    Probe:\n      IOS: k-ios\n"), 0o600), "keys file")
	fcmApps, apnsApps, apnsCA := probeBridges(t, r.dir)
	pushClients := filepath.Join(r.dir, "push-clients.yaml")
	et.Must(t, os.WriteFile(pushClients, []byte("clients:\n"+clients.Entry(clients.Client{Name: "probe-client",
		KeyHash: clients.Hash(probeClientKey), Scopes: []clients.Scope{clients.Read}})), 0o600), "push clients file")
	ws, node, api := et.FreeAddr(t), et.FreeAddr(t), et.FreeAddr(t)
	devDir := filepath.Join(r.dir, "tls")
	secret := make([]byte, 16)
	rand.Read(secret)
	strs := map[string]string{
		"connect-listen":                ws,
		"router-listen":                 node,
		"endpoint-listen":               api,
		"metrics-listen":                et.FreeAddr(t),
		"endpoint-url":                  "http://" + api,
		"node-url":                      "http://" + node,
		"node-secret":                   hex.EncodeToString(secret),
		"crypto-key":                    token.GenerateKey(),
		"storage":                       "embedded",
		"data-dir":                      filepath.Join(r.dir, "store"),
		"cql-hosts":                     "127.0.0.2:9042,127.0.0.3:9042",
		"cql-keyspace":                  "probe_" + string(src),
		"cql-consistency":               "ONE",
		"cql-consistency-read":          "QUORUM",
		"cql-consistency-router-write":  "LOCAL_ONE",
		"cql-consistency-message-write": "ALL",
		"log-level":                     "debug",
		"version-file":                  versionFile,

		// Settings the outbound sender and broadcasts add to the tiers
		// (unused until they are there).
		"push-api-keys":           "probe-key-1,probe-key-2",
		"push-clients-file":       pushClients,
		"bridge-auth-keys":        "probe-bridge-auth-key-1,probe-bridge-auth-key-2",
		"sender-node":             "probe-node",
		"sender-time-zone":        "Europe/Paris",
		"swrve-url":               "http://127.0.0.1:9/swrve",
		"swrve-keys-file":         swrveKeys,
		"log-provider-file":       filepath.Join(r.dir, "pushes.log"),
		"fcm-apps":                fcmApps,
		"fcm-url":                 "http://127.0.0.1:9/fcm",
		"apns-apps":               apnsApps,
		"apns-ca-file":            apnsCA,
		"broadcast-tokens":        "probe-publisher-1-token," + probePublisher,
		"broadcast-reader-tokens": probeReader,
		"admin-tokens":            "probe-admin-token-1,probe-admin-token-2",
		"megaphone-api-url":       fakeMegaphone(t),
		"megaphone-api-token":     probeMegaphoneToken,
		// Small, so that check can pass it.
		"msg-limit": "3",
		// Two fresh VAPID public keys whose pushes are tracked.
		"tracking-keys": probeVAPIDKey(t) + "," + probeVAPIDKey(t),
		// Not the source the check's requests come from (127.0.0.1).
		"per-source-exempt": "127.0.0.250/32,10.9.0.0/16",
		// https beside http, with the development certificate made in
		// the directory (tls-cert-file and tls-key-file name its files,
		// as the directory gives them).
		"vapid-former-aud": "http://old.example.com,https://older.example.com:8443",
		"tls-listen":       et.FreeAddr(t),
		"tls-dev-cert-dir": devDir,
		"tls-cert-file":    devcert.In(devDir).Cert,
		"tls-key-file":     devcert.In(devDir).Key,
	}
	if def := describeDefault("sender-interrupted"); def == "resend" {
		strs["sender-interrupted"] = "fail"
	} else {
		strs["sender-interrupted"] = "resend"
	}
	if scylla != "" {
		// The backend too: the run stores in the CQL server's keyspace.
		hosts, ks, _ := strings.Cut(scylla, "/")
		strs["storage"], strs["cql-hosts"], strs["cql-keyspace"] = "scylla", hosts, ks
		r.scylla = true
	}
	cfg := single.DefaultConfig()
	for _, s := range settings.Describe(cfg.Settings(), single.Prefix) {
		if s.Name == "crypto-key-file" || s.Name == "push-api-key-file" {
			continue // instead of crypto-key, beside push-api-keys: TestCryptoKeyFile
		}
		v, ok := strs[s.Name]
		if !ok {
			v, ok = probe(kindOf(s), s.Default)
		}
		if !ok {
			t.Fatalf("setting %s (default %q) has no probe value: give it one in newRun", s.Name, s.Default)
		}
		if v == s.Default && !(s.Name == "storage" && scylla == "") {
			t.Fatalf("probe value of %s is its default %q", s.Name, v)
		}
		r.vals[s.Name] = v
	}
	return r
}

// probeVAPIDKey is a fresh VAPID public key, base64url.
func probeVAPIDKey(t *testing.T) string {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	et.Must(t, err, "VAPID key")
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes())
}

// probeBridges makes the bridges' probe settings: an FCM app with a
// service-account file and an APNs app with a .p8 key file and an extra
// CA, all on loopback addresses nothing listens on (the run sends no
// bridged push; the server reads the credentials at its start).
func probeBridges(t *testing.T, dir string) (fcmApps, apnsApps, caFile string) {
	t.Helper()
	acct, err := fcmfake.NewServiceAccount("probe-project", "http://127.0.0.1:9/token")
	et.Must(t, err, "service account")
	creds, err := acct.WriteFile(dir)
	et.Must(t, err, "service account file")
	key, err := apnsfake.NewKey()
	et.Must(t, err, "APNs key")
	keyFile, err := key.WriteFile(dir)
	et.Must(t, err, "APNs key file")
	fake, err := apnsfake.Start(apnsfake.Options{})
	et.Must(t, err, "fake APNs")
	caFile, err = fake.WriteCA(dir)
	et.Must(t, err, "CA file")
	fake.Close()
	f, _ := json.Marshal(map[string]any{"probe-android": map[string]string{"project_id": "probe-project", "credentials": creds}})
	a, _ := json.Marshal(map[string]any{"probe-ios": map[string]string{"topic": "org.example.probe", "endpoint": "https://127.0.0.1:9",
		"key": keyFile, "key_id": key.ID, "team_id": key.TeamID}})
	return string(f), string(a), caFile
}

// settingsLine reads the settings in effect the server logged.
func settingsLine(t *testing.T, p *proc.Proc) map[string]string {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(p.Output()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Fields struct {
				Msg      string            `json:"msg"`
				Settings map[string]string `json:"settings"`
			}
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Fields.Msg == single.SettingsMsg {
			return rec.Fields.Settings
		}
	}
	t.Fatalf("no %q line in the output", single.SettingsMsg)
	return nil
}

// fingerprint is how the settings line shows a secret.
func fingerprint(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}

func get(t *testing.T, url, secret string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEverySettingFromEverySource starts the server three times, each
// time with every setting set, through flags, variables, then a JSON
// file, and checks each one applied: the running tiers' configuration as
// the server logs it, and for those a client can see, behaviour (the
// listeners, the endpoint URL, the crypto key and node secret on a push's
// way, the version file, the GC target the runtime runs with, the data
// directory, the backend when a CQL server is there). Then it stops the
// server with SIGTERM: it drains and exits 0.
func TestEverySettingFromEverySource(t *testing.T) {
	binary(t)
	for _, src := range []source{fromFlags, fromEnv, fromFile} {
		t.Run(string(src), func(t *testing.T) {
			scylla := ""
			if src == fromFlags && (os.Getenv("CQL_HOSTS") != "" || e2etest.InCI()) {
				cfg := cqltest.Keyspace(t, "autopush_single")
				scylla = strings.Join(cfg.Hosts, ",") + "/" + cfg.Keyspace
			} else if src == fromFlags {
				t.Log("storage=scylla not exercised: " + cqltest.InstallHint)
			}
			r := newRun(t, src, scylla)
			p := start(t, src, r.vals)
			r.check(t, p)
			p.Signal(syscall.SIGTERM)
			select {
			case <-p.Exited():
			case <-time.After(time.Minute):
				t.Fatal("no exit within a minute of SIGTERM")
			}
			if code := p.ExitCode(); code != 0 || !bytes.Contains(p.Output(), []byte(`"msg":"autopush stopped"`)) {
				t.Fatalf("SIGTERM: exit %d, want 0 after a graceful stop", code)
			}
		})
	}
}

func (r *probeRun) check(t *testing.T, p *proc.Proc) {
	t.Helper()
	v := r.vals
	got := settingsLine(t, p)
	for name, want := range v {
		if single.Secret(name) {
			want = fingerprint(want)
		}
		if got[name] != want {
			t.Errorf("%s: the running server has %q, want %q", name, got[name], want)
		}
	}
	for name := range got {
		if _, ok := v[name]; !ok && name != "crypto-key-file" && name != "push-api-key-file" {
			t.Errorf("the server has a setting %s the test does not know", name)
		}
	}
	// The listeners and URLs, as the server reports and serves them.
	for field, want := range map[string]string{"ws_listen": v["connect-listen"], "node_api": v["router-listen"],
		"push_api": v["endpoint-listen"], "metrics": v["metrics-listen"], "endpoint_url": v["endpoint-url"]} {
		if p.Field(field) != want {
			t.Errorf("ready line %s = %q, want %q", field, p.Field(field), want)
		}
	}
	// The GC target in the runtime (GOGC unset): gc-percent.
	if !bytes.Contains(p.Output(), []byte(`"gogc":`+v["gc-percent"]+`,`)) {
		t.Errorf("the runtime's GC target is not gc-percent %s", v["gc-percent"])
	}
	// The soft fd limit raised to the hard one.
	var lim syscall.Rlimit
	et.Must(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim), "getrlimit")
	if !bytes.Contains(p.Output(), fmt.Appendf(nil, `"fd_limit":%d,`, lim.Max)) {
		t.Errorf("the fd limit was not raised to the hard limit %d", lim.Max)
	}
	if code, body := get(t, v["endpoint-url"]+"/__version__", ""); code != 200 || !strings.Contains(body, r.version) {
		t.Errorf("/__version__: %d %s, want the version file's %s", code, body, r.version)
	}
	if !r.scylla {
		if _, err := os.Stat(v["data-dir"]); err != nil {
			t.Errorf("the embedded store is not in data-dir: %v", err)
		}
	}

	// A push on its way: the endpoint minted under endpoint-url with the
	// crypto-key decrypts at the API tier, which delivers through the node
	// API with node-secret.
	c := et.Dial(t, v["connect-listen"])
	defer c.Close()
	// The node polled megaphone-api-url with megaphone-api-token at
	// start: a hello naming its broadcast learns the version.
	hello := c.HelloBroadcasts("", map[string]string{probeMegaphoneID: "v0"})
	uaid, _ := hello["uaid"].(string)
	if b, _ := hello["broadcasts"].(map[string]any); b[probeMegaphoneID] != probeMegaphoneVer {
		t.Errorf("hello with %s at v0: broadcasts %v, want the fake Megaphone's %s", probeMegaphoneID, b, probeMegaphoneVer)
	}
	chid := uuid.NewString()
	reg := c.Register(chid, "")
	endpoint, _ := reg["pushEndpoint"].(string)
	if !strings.HasPrefix(endpoint, v["endpoint-url"]+"/wpush/v1/") {
		t.Fatalf("endpoint %q is not under endpoint-url %s", endpoint, v["endpoint-url"])
	}
	keys, err := token.ParseKeys(v["crypto-key"])
	et.Must(t, err, "parse the crypto key")
	if _, err := keys.ParseToken("v1", endpoint[strings.LastIndex(endpoint, "/")+1:]); err != nil {
		t.Errorf("the endpoint was not made with crypto-key: %v", err)
	}
	// TTL 0: only a direct delivery (through the node API) can deliver it.
	if code := push(t, endpoint, "probe", "0"); code != http.StatusCreated {
		t.Fatalf("push: %d", code)
	}
	if n := c.Read(); n["messageType"] != "notification" || n["channelID"] != chid {
		t.Fatalf("notification %v", n)
	}
	// The node API takes node-secret, and nothing else.
	uaidPath := "/notif/" + strings.Repeat("ab", 16)
	if code := et.NodeCall(t, http.MethodPut, "http://"+v["router-listen"]+uaidPath, "", ""); code != http.StatusUnauthorized {
		t.Errorf("node API without the secret: %d, want 401", code)
	}
	if code := et.NodeCall(t, http.MethodPut, "http://"+v["router-listen"]+uaidPath, "", v["node-secret"]); code == http.StatusUnauthorized {
		t.Errorf("node API with node-secret: 401")
	}
	// One /metrics for both tiers, on metrics-listen, not the push API.
	if code, body := get(t, "http://"+v["metrics-listen"]+"/metrics", ""); code != 200 ||
		!strings.Contains(body, "autoconnect_hellos_total 1") || !strings.Contains(body, "autoendpoint_") {
		t.Errorf("/metrics: %d, want both tiers' series (the hello counted)", code)
	}
	if code, _ := get(t, v["endpoint-url"]+"/metrics", ""); code != http.StatusNotFound {
		t.Errorf("/metrics on the push API: %d, want 404", code)
	}
	for _, path := range []string{"/__heartbeat__", "/__lbheartbeat__", "/health", "/status"} {
		if code, body := get(t, v["endpoint-url"]+path, ""); code != 200 {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	r.checkBroadcasts(t)
	// admin-tokens open the admin route of metrics-listen.
	if code, body, _ := adminGet(t, v["metrics-listen"], "uaid="+uaid, "probe-admin-token-2"); code != 200 || !strings.Contains(body, uaid) {
		t.Errorf("the endpoint diagnosis with an admin token: %d %s", code, body)
	}
	// The push API takes push-api-keys' keys and push-clients-file's.
	for _, key := range []string{"probe-key-2", probeClientKey} {
		if code, body := get(t, v["endpoint-url"]+"/push?state=SENT", key); code != 200 {
			t.Errorf("GET /push with %s: %d %s", key, code, body)
		}
	}
	r.checkMsgLimit(t, c, uaid, chid, endpoint)
}

// checkBroadcasts: the publish route takes broadcast-tokens, the list
// broadcast-reader-tokens.
func (r *probeRun) checkBroadcasts(t *testing.T) {
	t.Helper()
	v := r.vals
	publish := v["endpoint-url"] + "/v1/broadcasts/probe/published"
	for tok, want := range map[string]int{probeReader: 401, probePublisher: 201} {
		req, _ := http.NewRequest(http.MethodPut, publish, strings.NewReader("p1"))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		et.Must(t, err, "publish")
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("PUT %s with %s: %d, want %d", publish, tok, resp.StatusCode, want)
		}
	}
	if code, body := get(t, v["endpoint-url"]+"/v1/broadcasts", probeReader); code != 200 || !strings.Contains(body, `"probe/published":"p1"`) {
		t.Errorf("GET /v1/broadcasts with broadcast-reader-tokens: %d %s", code, body)
	}
}

// noConnection waits until the node has no connection open and no work
// left of those it had.
func (r *probeRun) noConnection(t *testing.T) {
	t.Helper()
	url := "http://" + r.vals["metrics-listen"] // its /metrics has the node's series
	et.Eventually(t, et.Patience, "the node to close every connection", func() bool {
		v, ok := et.Metric(t, url, "autoconnect_connections")
		return ok && v == 0
	})
	et.Settle(t, url)
}

// checkMsgLimit: a backlog one past msg-limit gets the whole pages of
// message-page messages that fit within msg-limit (the page that passes it
// is not sent, as in the reference), then the user is dropped (close 1000)
// and its next hello gets a new uaid. With the default msg-limit the whole
// backlog would arrive.
func (r *probeRun) checkMsgLimit(t *testing.T, c *et.Client, uaid, chid, endpoint string) {
	t.Helper()
	v := r.vals
	limit, err := strconv.Atoi(v["msg-limit"])
	et.Must(t, err, "msg-limit")
	page, err := strconv.Atoi(v["message-page"])
	et.Must(t, err, "message-page")
	c.Leave()
	r.noConnection(t) // the node is done with it: pushes are stored, and it may take another (connect-max-connections)
	for i := range limit + 1 {
		if code := push(t, endpoint, fmt.Sprint("backlog ", i), "600"); code != http.StatusCreated {
			t.Fatalf("backlog push %d: %d", i, code)
		}
	}
	c = et.Dial(t, v["connect-listen"])
	defer c.Close()
	if got := c.Hello(uaid); got != uaid {
		t.Fatalf("the uaid was replaced at hello, before its backlog: %s", got)
	}
	for i := range limit / page * page {
		n := c.Read()
		if n["messageType"] != "notification" {
			t.Fatalf("backlog message %d: %v", i, n)
		}
		c.Ack(chid, n["version"].(string))
	}
	if code := c.ExpectClose(); code != 1000 {
		t.Fatalf("past msg-limit %d: closed with %d, want 1000", limit, code)
	}
	c.Close()
	r.noConnection(t)
	c = et.Dial(t, v["connect-listen"])
	if got := c.Hello(uaid); got == uaid {
		t.Errorf("past msg-limit %d the next hello kept the uaid", limit)
	}
	c.Leave()
}

// minimal are the settings a run needs besides the key: free loopback
// ports, the endpoint URL naming the API's, a data directory.
func minimal(t *testing.T, dir string) map[string]string {
	api := et.FreeAddr(t)
	return map[string]string{"connect-listen": et.FreeAddr(t), "router-listen": et.FreeAddr(t), "endpoint-listen": api,
		"endpoint-url": "http://" + api, "data-dir": filepath.Join(dir, "store"), "metrics-listen": et.FreeAddr(t)}
}

// TestCryptoKeyFile: through each source, crypto-key-file makes a key on
// the first start (mode 0600) that the server then uses, and keeps it
// across a restart; push-api-key-file does the same with a push API key,
// which opens the push API beside push-api-keys'.
func TestCryptoKeyFile(t *testing.T) {
	binary(t)
	for _, src := range []source{fromFlags, fromEnv, fromFile} {
		t.Run(string(src), func(t *testing.T) {
			dir := t.TempDir()
			vals := minimal(t, dir)
			vals["crypto-key-file"] = filepath.Join(dir, "keys", "crypto_key")
			vals["push-api-key-file"] = filepath.Join(dir, "keys", "push_api_key")
			vals["push-api-keys"] = "configured-push-api-key"
			vals["log-provider-file"] = filepath.Join(dir, "pushes.log") // a provider: the push API serves
			var first, firstPush string
			for i := range 2 {
				p := start(t, src, vals)
				b, err := os.ReadFile(vals["push-api-key-file"])
				et.Must(t, err, "read the push API key file")
				pushKey := strings.TrimSpace(string(b))
				if st, _ := os.Stat(vals["push-api-key-file"]); len(pushKey) < 40 || st.Mode().Perm() != 0o600 {
					t.Errorf("push API key file: %q, mode %v; want a random key, 0600", pushKey, st.Mode().Perm())
				}
				for k, want := range map[string]int{pushKey: 200, "configured-push-api-key": 200, "another-key-altogether": 401} {
					if code, body := get(t, vals["endpoint-url"]+"/push?state=SENT", k); code != want {
						t.Errorf("GET /push with key %q: %d %s, want %d", k, code, body, want)
					}
				}
				if i == 0 {
					firstPush = pushKey
				} else if pushKey != firstPush {
					t.Fatal("the push API key changed across a restart")
				}
				b, err = os.ReadFile(vals["crypto-key-file"])
				et.Must(t, err, "read the key file")
				key := strings.TrimSpace(string(b))
				if _, err := token.ParseKeys(key); err != nil {
					t.Fatalf("the key file holds no key: %v", err)
				}
				if st, _ := os.Stat(vals["crypto-key-file"]); st.Mode().Perm() != 0o600 {
					t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
				}
				got := settingsLine(t, p)
				if got["crypto-key"] != fingerprint(key) || got["crypto-key-file"] != vals["crypto-key-file"] {
					t.Fatalf("start %d runs with crypto-key %s (file %s), want the file's %s", i, got["crypto-key"], got["crypto-key-file"], fingerprint(key))
				}
				if i == 0 {
					first = key
				} else if key != first {
					t.Fatal("the key changed across a restart")
				}
				p.Stop(time.Minute)
			}
		})
	}
}

// TestGOGCWins: with GOGC set, the runtime keeps it and gc-percent is not
// applied (as autoconnect does).
func TestGOGCWins(t *testing.T) {
	binary(t)
	vals := minimal(t, t.TempDir())
	vals["crypto-key"], vals["gc-percent"] = token.GenerateKey(), "40"
	p := start(t, fromFlags, vals, "GOGC=77")
	if !bytes.Contains(p.Output(), []byte(`"gogc":77,`)) {
		t.Fatal("GOGC=77 was not the runtime's GC target")
	}
}

// TestRefusesBadSettings: the server exits 1 with a message naming the
// setting, and starts nothing.
func TestRefusesBadSettings(t *testing.T) {
	bin := binary(t)
	key := token.GenerateKey()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "crypto-key or crypto-key-file is required"},
		{[]string{"-crypto-key", key, "-crypto-key-file", "/tmp/k"}, "not both"},
		{[]string{"-crypto-key", "nope"}, "crypto-key"},
		{[]string{"-crypto-key", key, "-listen", ":1"}, "flag provided but not defined: -listen"},
		{[]string{"-crypto-key", key, "-max-unacked", "0"}, "max-unacked"},
		{[]string{"-crypto-key", key, "-storage", "paper"}, "paper"},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%q: %v\n%s\nwant exit 1 saying %q", tc.args, err, out, tc.want)
		}
	}
	out, err := exec.Command(bin, "-help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "AUTOPUSH__CONNECT_LISTEN") || !strings.Contains(string(out), "-crypto-key-file") {
		t.Errorf("-help: %v\n%s", err, out)
	}
}

// TestSecondServerOnTheSameHost: a second server started beside a
// running one, sharing one of its addresses (the default metrics-listen,
// 127.0.0.1:8084, is shared unless changed) or its data-dir, exits 1 with
// a message naming the setting, under the server's own name, and how to
// change it; not a bare bind or lock error.
func TestSecondServerOnTheSameHost(t *testing.T) {
	bin := binary(t)
	key := token.GenerateKey()
	first := minimal(t, t.TempDir())
	first["crypto-key"] = key
	held := start(t, fromFlags, first)
	for _, setting := range []string{"metrics-listen", "connect-listen", "endpoint-listen", "router-listen", "data-dir"} {
		second := minimal(t, t.TempDir())
		second["crypto-key"], second[setting] = key, first[setting]
		var args []string
		for k, v := range second {
			args = append(args, "-"+k+"="+v)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		want := "autopush: " + setting + " " + first[setting] + ": address already in use by another process (a second node on this host needs addresses of its own); set " +
			setting + " to a free address (port 0: any free port, logged at start)"
		if setting == "metrics-listen" {
			want += `, or to "" to turn it off`
		}
		if setting == "data-dir" {
			want = fmt.Sprintf("autopush: embedded: data-dir %s is in use by process %d (%s): stop it first, or ask the live node", first[setting], held.PID(), bin)
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.HasPrefix(stderr.String(), want) {
			t.Errorf("%s shared: %v\n%s\nwant exit 1 saying %q", setting, err, stderr.String(), want)
		}
	}
}

// TestReadyAtAnyLogLevel: with -log-level error the server logs nothing
// of its start but the ready line, which names the addresses it serves.
func TestReadyAtAnyLogLevel(t *testing.T) {
	binary(t)
	vals := minimal(t, t.TempDir())
	vals["crypto-key"], vals["log-level"] = token.GenerateKey(), "error"
	p := start(t, fromFlags, vals)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(p.Output())), "\n") {
		if strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"msg":"`+single.ReadyMsg+`"`) || !strings.Contains(lines[0], `"push_api":"`+vals["endpoint-listen"]+`"`) {
		t.Fatalf("log lines at -log-level error: %q, want the ready line alone", lines)
	}
}
