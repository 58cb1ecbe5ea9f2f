package single

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/engine"
	"github.com/autopush-go/autopush/internal/devcert"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/sender/node"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/storage"
)

// Prefix is the prefix of the server's variables (AUTOPUSH__NAME,
// AUTOPUSH__CONFIG for the JSON file).
const Prefix = "AUTOPUSH"

// The prefixes of the settings both tiers have under one name that are
// not shared (Shared): listen becomes connect-listen (the websocket
// listener) and endpoint-listen (the HTTP API).
const (
	ConnectPrefix  = "connect-"
	EndpointPrefix = "endpoint-"
)

// Shared lists the settings both tiers have that take one value in one
// process (each tier gets it): the key and secret they must agree on,
// the endpoint URL, the logger's level, the version file, profiling
// (one process's profiles, served on both internal listeners), the
// sources exempt from the per-source caps (one machine: the same proxy
// is in front of both ports), and every storage setting (one store).
// Their names are the tiers' own.
func Shared() []string {
	names := []string{"crypto-key", "node-secret", "endpoint-url", "log-level", "version-file", "pprof", "per-source-exempt"}
	for _, s := range settings.Describe(&storage.Settings{}, "") {
		names = append(names, s.Name)
	}
	return names
}

// Config of the single-node server: both tiers' configs whole, the
// outbound sender's (run by the endpoint tier, as autoendpoint runs it),
// and the server's own settings. DefaultConfig holds every default (the
// tiers').
type Config struct {
	Engine engine.Config
	API    apitier.Config
	Sender node.Config
	Own    Options
	// Request is what the command line asked besides settings
	// (-check-config).
	Request settings.Request
}

// Options are the server's own settings, beside the tiers'.
type Options struct {
	// CryptoKeyFile names a file holding the crypto-key, for when
	// crypto-key is not set: read at start, or, when there is no such
	// file, made with a new key (mode 0600, its directory 0700) and kept,
	// so endpoints stay valid across restarts. Back it up with the data:
	// a lost key invalidates every endpoint handed out. Default "": the
	// crypto-key setting is required.
	CryptoKeyFile string `conf:"crypto-key-file" help:"file holding the crypto-key, made with a new key when missing (instead of crypto-key)"`
	// PushAPIKeyFile names a file holding a push API key, for trying the
	// sender's API (make run): read at start, or, when there is no such
	// file, made with a new random key (mode 0600, its directory 0700)
	// and kept. The key opens the push API beside push-api-keys', and is
	// printed at start with a curl line that sends a push. Default "":
	// none.
	PushAPIKeyFile string `conf:"push-api-key-file" help:"file holding a push API key, made with a new random key when missing; printed at start with a curl line (development)"`
	// TLSDevCertDir names a directory holding a development certificate
	// for tls-listen, in place of tls-cert-file and tls-key-file: made
	// there on the first start and kept (internal/devcert: a CA that can
	// sign for 127.0.0.1, ::1 and localhost only, its key not kept, and
	// a certificate it signed). The start prints how to make clients
	// trust its ca.pem. Default "": none.
	TLSDevCertDir string `conf:"tls-dev-cert-dir" help:"directory of a development certificate for tls-listen, made on first start: a CA for loopback names only whose ca.pem clients trust (development; instead of tls-cert-file and tls-key-file)"`
}

// DefaultConfig returns the defaults: the tiers' own.
func DefaultConfig() Config {
	return Config{Engine: engine.DefaultConfig(), API: apitier.DefaultConfig(), Sender: node.DefaultConfig()}
}

// Settings returns the settings of c as one group bound to c's fields:
// loading it sets them. A setting only one tier has keeps its name;
// Shared ones appear once; the other names both tiers have get
// ConnectPrefix or EndpointPrefix. It panics if the config structs clash
// (a name both tiers have, prefixed, equal to another setting's), which
// the package's tests catch.
func (c *Config) Settings() *settings.Group {
	g, err := settings.NewGroup(Shared(),
		settings.Part{Name: "autoconnect", Cfg: &c.Engine, Prefix: ConnectPrefix},
		settings.Part{Name: "autoendpoint", Cfg: &c.API, Prefix: EndpointPrefix},
		// The sender runs in the endpoint tier, as in autoendpoint: its
		// settings are that tier's.
		settings.Part{Name: "autoendpoint", Cfg: &c.Sender, Prefix: EndpointPrefix},
		settings.Part{Name: "autopush", Cfg: &c.Own},
	)
	if err != nil {
		panic(err)
	}
	return g
}

// Load reads the configuration as the tier binaries read theirs:
// defaults, the JSON file named by -config or AUTOPUSH__CONFIG, AUTOPUSH__
// variables from env, then args. It returns flag.ErrHelp after printing
// usage for -help, and Validate's error.
func Load(args []string, env settings.Env, usage io.Writer) (Config, error) {
	c := DefaultConfig()
	if err := checkRenamed(args, env); err != nil {
		return c, err
	}
	req, err := settings.Load(c.Settings(), Prefix, args, env, usage)
	if err != nil {
		return c, err
	}
	c.Request = req
	return c, c.Validate()
}

// Check validates c as Start would, reading the files it reads (the key
// files when they exist, push-clients-file, the providers' credentials),
// without listening or opening the store (-check-config).
func (c *Config) Check() error {
	if err := c.Validate(); err != nil {
		return err
	}
	for _, kept := range []struct {
		setting, path string
		check         func(string) error
	}{{"crypto-key-file", c.Own.CryptoKeyFile, checkCryptoKey}, {"push-api-key-file", c.Own.PushAPIKeyFile, checkPushAPIKey}} {
		if kept.path != "" {
			if _, _, err := readKept(kept.path, kept.setting, kept.check); err != nil {
				return err
			}
		}
	}
	// Validate checked the tiers as the stack wires them (a node-secret
	// made when none is set): only their files are left.
	if err := c.API.CheckFiles(); err != nil {
		return err
	}
	return c.Sender.Check()
}

// Renamed are the server's settings that a setting added to the other
// tier split in two (Config.Settings), with what replaced them. Given by
// a flag they would fail as unknown, but a variable would be ignored
// without a word: Load refuses both, naming the new settings.
var Renamed = map[string]string{
	"max-connections-per-source": "endpoint-max-connections-per-source (the push API's) and connect-max-connections-per-source (the websocket port's)",
}

// checkRenamed fails on a Renamed setting among args or the variables.
func checkRenamed(args []string, env settings.Env) error {
	for old, now := range Renamed {
		_, set := env.Lookup(settings.EnvName(Prefix, old))
		for _, a := range args {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			set = set || (strings.HasPrefix(a, "-") && name == old)
		}
		if set {
			return fmt.Errorf("single: config: %s is now %s", old, now)
		}
	}
	return nil
}

// Validate reports the first setting that cannot work: the key
// settings, then each tier's checks on its wired config.
func (c *Config) Validate() error {
	key := c.Engine.CryptoKey
	switch {
	case key != "" && c.Own.CryptoKeyFile != "":
		return errors.New("single: config: set crypto-key or crypto-key-file, not both")
	case key == "" && c.Own.CryptoKeyFile == "":
		return errors.New("single: config: crypto-key or crypto-key-file is required (tools/cmd/autokey prints a key)")
	case key != "":
		if _, err := token.ParseKeys(key); err != nil {
			return fmt.Errorf("single: config: crypto-key: %w", err)
		}
	}
	if dir := c.Own.TLSDevCertDir; dir != "" {
		// tls-listen serves the directory's files (a second Validate
		// finds them set so).
		f := devcert.In(dir)
		switch {
		case c.API.TLSListen == "":
			return errors.New("single: config: tls-dev-cert-dir needs tls-listen")
		case c.API.TLSCertFile != "" && c.API.TLSCertFile != f.Cert, c.API.TLSKeyFile != "" && c.API.TLSKeyFile != f.Key:
			return errors.New("single: config: set tls-dev-cert-dir or tls-cert-file and tls-key-file, not both")
		}
		c.API.TLSCertFile, c.API.TLSKeyFile = f.Cert, f.Key
	}
	sc := c.Stack()
	if sc.CryptoKey == "" {
		sc.CryptoKey = "read from crypto-key-file at start"
	}
	return sc.Validate()
}

// Stack is the stack's config: the tiers' configs, with the fields the
// stack sets on both taken from them (the tiers' listen addresses, the
// shared endpoint URL, key and secret).
func (c *Config) Stack() stack.Config {
	return stack.Config{
		WSListen:    c.Engine.Listen,
		NodeListen:  c.Engine.RouterListen,
		HTTPListen:  c.API.Listen,
		EndpointURL: c.API.EndpointURL,
		CryptoKey:   c.API.CryptoKey,
		NodeSecret:  c.API.NodeSecret,
		Engine:      c.Engine,
		API:         c.API,
		Sender:      c.Sender,
	}
}

// StopTimeout bounds a graceful stop as the tier binaries bound theirs:
// the connection node's 2 × drain-window + 30s, then the API tier's 1.5 ×
// shutdown-timeout. A supervisor's stop timeout must exceed it.
func (c *Config) StopTimeout() time.Duration {
	return 2*c.Engine.DrainWindow + 30*time.Second + c.API.ShutdownTimeout*3/2
}

// Secret says whether a setting's value must not be logged: a name whose
// last word is key(s), secret(s), token(s) or password(s) (crypto-key,
// node-secret, push-api-keys; not cql-keyspace, crypto-key-file or
// swrve-keys-poll), and the bridges' app lists (fcm-apps, apns-apps),
// which may hold a service account or a .p8 key inline.
func Secret(name string) bool {
	words := strings.Split(name, "-")
	switch strings.TrimSuffix(words[len(words)-1], "s") {
	case "key", "secret", "token", "password", "app":
		return true
	}
	return false
}
