package single

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/engine"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/sender/node"
)

func names(list []settings.Setting) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Name)
	}
	return out
}

// TestEveryTierSettingOnce: each setting of each tier is a setting of the
// server, under its own name, or its tier's prefix when the other tier
// has the name and it is not shared; shared ones set both tiers.
func TestEveryTierSettingOnce(t *testing.T) {
	cfg := DefaultConfig()
	all := settings.Describe(cfg.Settings(), Prefix)
	byName := map[string]settings.Setting{}
	for _, s := range all {
		if _, dup := byName[s.Name]; dup {
			t.Errorf("%s twice", s.Name)
		}
		byName[s.Name] = s
	}
	connect := names(settings.Describe(new(engine.DefaultConfig()), ""))
	// The endpoint tier runs the outbound sender: its settings are that
	// tier's.
	endpoint := append(names(settings.Describe(new(apitier.DefaultConfig()), "")), names(settings.Describe(new(node.DefaultConfig()), ""))...)
	for tier, list := range map[string][]string{"autoconnect": connect, "autoendpoint": endpoint} {
		other, prefix := endpoint, ConnectPrefix
		if tier == "autoendpoint" {
			other, prefix = connect, EndpointPrefix
		}
		for _, n := range list {
			name := n
			if slices.Contains(other, n) && !slices.Contains(Shared(), n) {
				name = prefix + n
			}
			s, ok := byName[name]
			if !ok || !slices.Contains(s.Parts, tier) {
				t.Errorf("%s's %s is not the server's %s (%+v)", tier, n, name, s)
			}
			if slices.Contains(Shared(), n) && !slices.Equal(s.Parts, []string{"autoconnect", "autoendpoint"}) {
				t.Errorf("shared %s sets %v", n, s.Parts)
			}
		}
	}
	if s := byName["crypto-key-file"]; !slices.Equal(s.Parts, []string{"autopush"}) {
		t.Errorf("crypto-key-file: %+v", s)
	}
	for _, n := range []string{"connect-listen", "endpoint-listen", "connect-storage-timeout", "endpoint-storage-timeout", "ping-interval", "max-data-bytes"} {
		if _, ok := byName[n]; !ok {
			t.Errorf("no setting %s", n)
		}
	}
}

// TestLoadSharedAndPrefixed: a shared setting reaches both tiers, a
// prefixed one its own, through file, env and flags in that precedence.
func TestLoadSharedAndPrefixed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(file, []byte(`{"node-secret": "from-file", "max-unacked": 3, "endpoint-listen": "127.0.0.1:9"}`), 0o600)
	key := token.GenerateKey()
	env := map[string]string{"AUTOPUSH__CONFIG": file, "AUTOPUSH__CRYPTO_KEY": key, "AUTOPUSH__MAX_UNACKED": "4"}
	c, err := Load([]string{"-connect-listen", "127.0.0.1:7", "-endpoint-url", "https://push.example.com"},
		settings.MapEnv(env), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Engine.CryptoKey != key || c.API.CryptoKey != key || c.Engine.NodeSecret != "from-file" || c.API.NodeSecret != "from-file" ||
		c.Engine.MaxUnacked != 4 || c.Engine.Listen != "127.0.0.1:7" || c.API.Listen != "127.0.0.1:9" ||
		c.Engine.EndpointURL != "https://push.example.com" || c.API.EndpointURL != "https://push.example.com" {
		t.Fatalf("engine %+v\napi %+v", c.Engine, c.API)
	}
	sc := c.Stack()
	if sc.WSListen != "127.0.0.1:7" || sc.HTTPListen != "127.0.0.1:9" || sc.NodeListen != c.Engine.RouterListen || sc.NodeSecret != "from-file" {
		t.Fatalf("stack config %+v", sc)
	}
}

func TestSecret(t *testing.T) {
	for name, want := range map[string]bool{"crypto-key": true, "node-secret": true, "push-api-keys": true, "bridge-auth-keys": true, "fcm-apps": true, "apns-apps": true, "apns-ca-file": false, "crypto-key-file": false,
		"cql-keyspace": false, "swrve-keys-file": false, "swrve-keys-poll": false, "listen": false, "megaphone-api-token": true, "broadcast-reader-tokens": true} {
		if Secret(name) != want {
			t.Errorf("Secret(%s) = %v", name, !want)
		}
	}
}

// TestPerSourceSettings: per-source-exempt is one setting for both tiers
// (one machine, one proxy in front of both ports); each tier's cap is its
// own. The server's former max-connections-per-source (the push API's,
// before the websocket port had one) is refused by flag and by variable,
// naming what replaced it, not ignored.
func TestPerSourceSettings(t *testing.T) {
	key := token.GenerateKey()
	env := settings.MapEnv
	c, err := Load([]string{"-connect-max-connections-per-source", "7", "-endpoint-max-connections-per-source", "9"},
		env(map[string]string{"AUTOPUSH__CRYPTO_KEY": key, "AUTOPUSH__PER_SOURCE_EXEMPT": "127.0.0.1,10.0.0.0/8"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1", "10.0.0.0/8"}
	if c.Engine.MaxConnectionsPerSource != 7 || c.API.MaxConnectionsPerSource != 9 ||
		!slices.Equal(c.Engine.PerSourceExempt, want) || !slices.Equal(c.API.PerSourceExempt, want) {
		t.Fatalf("engine %d %v, api %d %v", c.Engine.MaxConnectionsPerSource, c.Engine.PerSourceExempt,
			c.API.MaxConnectionsPerSource, c.API.PerSourceExempt)
	}
	for name, load := range map[string]func() error{
		"variable": func() error {
			_, err := Load(nil, env(map[string]string{"AUTOPUSH__CRYPTO_KEY": key, "AUTOPUSH__MAX_CONNECTIONS_PER_SOURCE": "5"}), &bytes.Buffer{})
			return err
		},
		"flag": func() error {
			_, err := Load([]string{"--max-connections-per-source=5"}, env(map[string]string{"AUTOPUSH__CRYPTO_KEY": key}), &bytes.Buffer{})
			return err
		},
	} {
		if err := load(); err == nil || !strings.Contains(err.Error(), "endpoint-max-connections-per-source") ||
			!strings.Contains(err.Error(), "connect-max-connections-per-source") {
			t.Errorf("max-connections-per-source by %s: %v", name, err)
		}
	}
}

// TestEnumDefaults: every setting that takes one of a set of values has
// its default among them, so the defaults pass the check flags and
// variables get.
func TestEnumDefaults(t *testing.T) {
	cfg := DefaultConfig()
	all := settings.Describe(cfg.Settings(), Prefix)
	all = append(all, settings.Describe(new(node.DefaultAutosenderConfig()), "AUTOSENDER")...)
	enums := 0
	for _, s := range all {
		if s.Enum != nil {
			enums++
			if !slices.Contains(s.Enum, s.Default) {
				t.Errorf("%s: default %q is not %s", s.Env, s.Default, s.Type)
			}
		}
	}
	if enums < 7 {
		t.Errorf("%d settings with an enum, want log-level, storage, the cql-consistency ones, sender-interrupted", enums)
	}
}

// TestTLSDevCertDir: tls-dev-cert-dir gives tls-listen the directory's
// files, needs tls-listen, and is refused beside certificate files of
// another place.
func TestTLSDevCertDir(t *testing.T) {
	key := settings.MapEnv(map[string]string{"AUTOPUSH__CRYPTO_KEY": token.GenerateKey()})
	load := func(args ...string) (Config, error) { return Load(args, key, &bytes.Buffer{}) }
	c, err := load("-tls-listen", "127.0.0.1:0", "-tls-dev-cert-dir", "/tmp/d")
	if err != nil || c.API.TLSCertFile != "/tmp/d/cert.pem" || c.API.TLSKeyFile != "/tmp/d/key.pem" {
		t.Fatalf("dev cert files: %q %q, %v", c.API.TLSCertFile, c.API.TLSKeyFile, err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("a second Validate: %v", err)
	}
	if _, err := load("-tls-dev-cert-dir", "/tmp/d"); err == nil || !strings.Contains(err.Error(), "needs tls-listen") {
		t.Fatalf("without tls-listen: %v", err)
	}
	if _, err := load("-tls-listen", "127.0.0.1:0", "-tls-dev-cert-dir", "/tmp/d", "-tls-cert-file", "/etc/c.pem", "-tls-key-file", "/etc/k.pem"); err == nil ||
		!strings.Contains(err.Error(), "not both") {
		t.Fatalf("beside other files: %v", err)
	}
}
