package ops_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// unit is a systemd unit file: section → key → values, in order.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, b []byte) unit {
	t.Helper()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("unit line %q", line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func (u unit) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// envFile reads a systemd EnvironmentFile's NAME=value lines.
func envFile(t *testing.T, b []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("env file line %q", line)
		}
		out[k] = v
	}
	return out
}

// TestSystemdUnit checks ops/systemd: the env file names only settings of
// the single-node server and yields a configuration it accepts, with its
// state under the unit's StateDirectory; the unit runs it as its own
// user with a high fd limit, restarts it on failure, and waits for a
// drain longer than the server does; systemd-analyze finds nothing wrong.
func TestSystemdUnit(t *testing.T) {
	raw := read(t, "ops/systemd/autopush.service")
	u := parseUnit(t, raw)
	env := envFile(t, read(t, "ops/systemd/autopush.env"))
	known := map[string]bool{}
	cfg := single.DefaultConfig()
	for _, s := range settings.Describe(cfg.Settings(), single.Prefix) {
		known[s.Env] = true
	}
	for k := range env {
		if !known[k] {
			t.Errorf("autopush.env sets %s, which is not a setting of autopush", k)
		}
	}
	loaded, err := single.Load(nil, settings.MapEnv(env), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("autopush.env does not make a valid configuration: %v", err)
	}
	state := "/var/lib/" + u.get("Service", "StateDirectory")
	for name, path := range map[string]string{"data-dir": loaded.Engine.DataDir, "crypto-key-file": loaded.Own.CryptoKeyFile} {
		if !strings.HasPrefix(path, state+"/") {
			t.Errorf("%s %s is not under the unit's StateDirectory %s (the only place it may write)", name, path, state)
		}
	}
	for _, listen := range []string{loaded.Engine.Listen, loaded.Engine.RouterListen, loaded.API.Listen} {
		if !strings.HasPrefix(listen, "127.0.0.1:") {
			t.Errorf("listener %s is not on loopback: nginx is in front", listen)
		}
	}

	for key, want := range map[string]string{"User": "autopush", "Restart": "on-failure", "KillSignal": "SIGTERM",
		"EnvironmentFile": "/etc/autopush/autopush.env", "ExecStart": "/usr/bin/autopush", "WorkingDirectory": state} {
		if got := u.get("Service", key); got != want {
			t.Errorf("[Service] %s=%q, want %q", key, got, want)
		}
	}
	if n, err := strconv.Atoi(u.get("Service", "LimitNOFILE")); err != nil || n < 65536 {
		t.Errorf("LimitNOFILE=%q: each push client holds a socket; want at least 65536", u.get("Service", "LimitNOFILE"))
	}
	stop, err := time.ParseDuration(u.get("Service", "TimeoutStopSec"))
	if err != nil || stop <= loaded.StopTimeout() {
		t.Errorf("TimeoutStopSec=%s: the server may take %v to drain and stop; systemd must wait longer", u.get("Service", "TimeoutStopSec"), loaded.StopTimeout())
	}
	if u.get("Install", "WantedBy") != "multi-user.target" {
		t.Errorf("[Install] WantedBy=%q", u.get("Install", "WantedBy"))
	}

	analyze, err := exec.LookPath("systemd-analyze")
	e2etest.Require(t, err == nil, "systemd-analyze not found: apt-get install systemd")
	// verify wants ExecStart to exist: point it at any executable.
	self, _ := os.Executable()
	file := filepath.Join(t.TempDir(), "autopush.service")
	os.WriteFile(file, bytes.ReplaceAll(raw, []byte("/usr/bin/autopush"), []byte(self)), 0o644)
	out, err := exec.Command(analyze, "verify", file).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// nginxDirective finds "name value;" inside the block that starts with
// header (a location), or in the whole file when header is "".
func nginxDirective(t *testing.T, conf, header, name string) []string {
	t.Helper()
	if header != "" {
		i := strings.Index(conf, header+" {")
		if i < 0 {
			t.Fatalf("autopush.conf has no %q block", header)
		}
		conf = conf[i : i+strings.Index(conf[i:], "}")]
	}
	var out []string
	for line := range strings.SplitSeq(conf, "\n") {
		f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), ";"))
		if len(f) >= 2 && f[0] == name {
			out = append(out, strings.Join(f[1:], " "))
		}
	}
	return out
}

// TestNginxSite checks ops/nginx/autopush.conf against the server it
// fronts (make e2e runs it with a real Firefox): its upstreams are the
// listeners of ops/systemd/autopush.env; the websocket location upgrades
// and keeps an idle connection longer than the server lets a silent
// client be (ping-interval + pong-timeout); the body limit lets the API
// answer oversized pushes itself.
func TestNginxSite(t *testing.T) {
	conf := string(read(t, "ops/nginx/autopush.conf"))
	env := envFile(t, read(t, "ops/systemd/autopush.env"))
	cfg, err := single.Load(nil, settings.MapEnv(env), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ups := nginxDirective(t, conf, "", "server")
	for _, want := range []string{cfg.Engine.Listen, cfg.API.Listen} {
		if !slices.Contains(ups, want) {
			t.Errorf("no upstream server %s (autopush.env's listener) in %v", want, ups)
		}
	}
	idle := cfg.Engine.PingInterval + cfg.Engine.PongTimeout
	for _, name := range []string{"proxy_read_timeout", "proxy_send_timeout"} {
		v := nginxDirective(t, conf, "location = /", name)
		d, err := time.ParseDuration(strings.Join(v, ""))
		if err != nil || d <= idle {
			t.Errorf("websocket %s %v: an idle client is pinged only after %v; want more", name, v, idle)
		}
	}
	headers := strings.Join(nginxDirective(t, conf, "location = /", "proxy_set_header"), "\n")
	if !strings.Contains(headers, "Upgrade $http_upgrade") || !strings.Contains(headers, `Connection "upgrade"`) {
		t.Errorf("the websocket location does not pass the upgrade: %s", headers)
	}
	if v := nginxDirective(t, conf, "location = /", "proxy_http_version"); !slices.Equal(v, []string{"1.1"}) {
		t.Errorf("websocket proxy_http_version %v, want 1.1", v)
	}
	body := nginxDirective(t, conf, "", "client_max_body_size")
	if len(body) != 1 || !strings.HasSuffix(body[0], "k") {
		t.Fatalf("client_max_body_size %v", body)
	}
	if kb, _ := strconv.Atoi(strings.TrimSuffix(body[0], "k")); kb*1024 <= apitier.MaxMaxDataBytes {
		t.Errorf("client_max_body_size %s is below the largest max-data-bytes (%d)", body[0], apitier.MaxMaxDataBytes)
	}
	if v := nginxDirective(t, conf, "location = /metrics", "return"); !slices.Equal(v, []string{"404"}) {
		t.Errorf("/metrics is served through nginx: %v", v)
	}
}
