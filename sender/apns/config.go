package apns

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
)

// Name is the provider's name in storage, metrics and the bridge API.
const Name = "apns"

// Apple's hosts.
const (
	ProductionURL = "https://api.push.apple.com"
	SandboxURL    = "https://api.sandbox.push.apple.com"
)

// Config of the APNs provider; the settings package fills it (flags
// -apns-*, variables PREFIX__APNS_*).
type Config struct {
	// Apps is a JSON object of app id (autopush-rs's release channel,
	// the {app_id} of /v1/apns/{app_id}/registration) to App. A string,
	// since an environment variable cannot hold a map. Default "{}" (no
	// apps: the bridge is off).
	Apps string `conf:"apns-apps" help:"JSON object: app id -> {topic, endpoint, key, key_id, team_id | cert, cert_key} (keys and certificates are paths, or PEM starting with '-')"`
	// Rate is the most calls a second APNs gets, from every sender node
	// sharing the store together. Default 500.
	Rate float64 `conf:"apns-rate" help:"most calls a second to APNs, from all sender nodes together"`
	// Delay is the time between two calls, all nodes together; at most
	// 95% of Rate, for headroom. Default 2.5ms (400 calls a second).
	Delay time.Duration `conf:"apns-delay" help:"time between two calls to APNs, all sender nodes together (the pace; leaves headroom under apns-rate)"`
	// Concurrency is the most sends in flight (HTTP/2 streams) at once;
	// the sender's pool is this size. Default 100.
	Concurrency int `conf:"apns-concurrency" help:"most concurrent sends (HTTP/2 streams) to APNs; the sending pool's size"`
	// Timeout bounds one send, answer included. Default 10s.
	Timeout time.Duration `conf:"apns-timeout" help:"timeout of one send to APNs"`
	// MaxData is the most bytes of payload JSON (Apple's limit for a
	// remote notification is 4096). Default 4096.
	MaxData int `conf:"apns-max-data" help:"most bytes of APNs payload JSON (Apple's limit: 4096)"`
	// CAFile is a PEM file of extra root certificates to trust besides
	// the system's (tests, private CAs). Default "" (system roots only).
	CAFile string `conf:"apns-ca-file" help:"PEM file of extra CA certificates to trust for APNs (tests, private CAs)"`
	// BadTokenBurst is how many distinct device tokens of one app APNs
	// must refuse as 400 BadDeviceToken within BadTokenWindow for the
	// bridges to report a likely sandbox/production mix-up (a gauge and
	// an error log; docs/bridges.md). BadDeviceToken never drops a
	// registration either way. 0: never report. Default 10.
	BadTokenBurst int `conf:"apns-bad-token-burst" help:"distinct device tokens of one app refused as BadDeviceToken within apns-bad-token-window that report a likely sandbox/production mix-up (0: never)"`
	// BadTokenWindow is the sliding window of BadTokenBurst. Default 10m.
	BadTokenWindow time.Duration `conf:"apns-bad-token-window" help:"sliding window of apns-bad-token-burst"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Apps: "{}", Rate: 500, Delay: 2500 * time.Microsecond, Concurrency: 100, Timeout: 10 * time.Second, MaxData: 4096,
		BadTokenBurst: 10, BadTokenWindow: 10 * time.Minute}
}

// maxBadTokenBurst bounds apns-bad-token-burst: the bridges keep that
// many tokens' hashes per app, and scan them on each BadDeviceToken.
const maxBadTokenBurst = 1000

// Environment names an app's APNs environment: "production",
// "sandbox", or its endpoint URL (tests, proxies).
func (a App) Environment() string {
	switch a.Endpoint {
	case ProductionURL:
		return "production"
	case SandboxURL:
		return "sandbox"
	}
	return a.Endpoint
}

// Limits are what the sender drives the provider with. AverageLatency is
// Concurrency sends' worth of Delay, so that the sender's PoolSize
// (AverageLatency/Delay) is exactly Concurrency. APNs does not
// deduplicate by apns-id, so Dedup is false.
func (c *Config) Limits() provider.Limits {
	return provider.Limits{Rate: c.Rate, Delay: c.Delay, Timeout: c.Timeout, Bridge: true,
		AverageLatency: c.Delay * time.Duration(c.Concurrency)}
}

// Validate reports the first setting that cannot work. It parses Apps
// but reads no key or certificate file (New does).
func (c *Config) Validate() error {
	if _, err := ParseApps(c.Apps); err != nil {
		return fmt.Errorf("apns: config: %w", err)
	}
	switch {
	case c.Concurrency < 1 || c.Concurrency > 100000:
		return fmt.Errorf("apns: config: apns-concurrency %d is outside 1..100000", c.Concurrency)
	case c.MaxData < 1 || c.MaxData > 1<<20:
		return fmt.Errorf("apns: config: apns-max-data %d is outside 1..1048576", c.MaxData)
	case c.BadTokenBurst < 0 || c.BadTokenBurst > maxBadTokenBurst:
		return fmt.Errorf("apns: config: apns-bad-token-burst %d is outside 0..%d", c.BadTokenBurst, maxBadTokenBurst)
	case c.BadTokenBurst > 0 && (c.BadTokenWindow <= 0 || c.BadTokenWindow > 24*time.Hour):
		return fmt.Errorf("apns: config: apns-bad-token-window %s is outside (0, 24h]", c.BadTokenWindow)
	}
	if err := c.Limits().Validate(); err != nil {
		return fmt.Errorf("apns: config: %w", err)
	}
	return nil
}

// AppIDs are the configured app ids, sorted (nil when Apps does not
// parse): what the registration API accepts.
func (c *Config) AppIDs() []string {
	apps, err := ParseApps(c.Apps)
	if err != nil {
		return nil
	}
	return sortedKeys(apps)
}

func sortedKeys(apps map[string]App) []string {
	ids := make([]string, 0, len(apps))
	for id := range apps {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// App is one application's APNs settings. Exactly one way of
// authenticating is set: a provider token (Key, KeyID, TeamID) or a
// certificate (Cert, CertKey).
type App struct {
	// Topic is the app's bundle id (apns-topic). Default, as autopush-rs
	// derives it: "com.mozilla.org." + the app id.
	Topic string `json:"topic"`
	// Endpoint is "production" (default), "sandbox" or an https base URL
	// (tests); ParseApps resolves it to a base URL.
	Endpoint string `json:"endpoint"`
	// Sandbox is autopush-rs's spelling of Endpoint "sandbox".
	Sandbox bool `json:"sandbox"`
	// Key is the .p8 signing key (PKCS#8 EC P-256): a path, or the PEM
	// itself when it starts with '-'. KeyID is its 10-character id (the
	// JWT's kid) and TeamID the developer team (the JWT's iss).
	Key    string `json:"key"`
	KeyID  string `json:"key_id"`
	TeamID string `json:"team_id"`
	// Cert is the TLS client certificate (path or PEM) and CertKey its
	// private key (path or PEM; autopush-rs's configuration names it
	// "key", which is accepted when no key_id or team_id is set).
	Cert    string `json:"cert"`
	CertKey string `json:"cert_key"`
}

// TokenAuth reports whether the app authenticates with a provider token
// (else with a certificate).
func (a App) TokenAuth() bool { return a.Cert == "" }

// String describes the app without its key material.
func (a App) String() string {
	auth := "certificate"
	if a.TokenAuth() {
		auth = "token key_id=" + a.KeyID + " team_id=" + a.TeamID
	}
	return fmt.Sprintf("topic=%s endpoint=%s auth=%s", a.Topic, a.Endpoint, auth)
}

// maxAppID bounds an app id: it is a path segment of the bridge API.
const maxAppID = 64

// ParseApps parses the apns-apps JSON ("" is no apps), fills the
// defaults and checks each app; errors name the app id, never a key.
func ParseApps(s string) (map[string]App, error) {
	apps := map[string]App{}
	if strings.TrimSpace(s) == "" {
		return apps, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&apps); err != nil {
		return nil, fmt.Errorf("apns-apps: not a JSON object of app id to settings: %w", err)
	}
	if dec.More() {
		return nil, errors.New("apns-apps: text after the JSON object")
	}
	for id, a := range apps {
		if err := checkAppID(id); err != nil {
			return nil, err
		}
		a, err := a.normalise(id)
		if err != nil {
			return nil, fmt.Errorf("apns-apps: app %q: %w", id, err)
		}
		apps[id] = a
	}
	return apps, nil
}

func checkAppID(id string) error {
	if id == "" || len(id) > maxAppID {
		return fmt.Errorf("apns-apps: app id %q is empty or longer than %d bytes", id, maxAppID)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("apns-apps: app id %q: only letters, digits, '.', '_' and '-' are allowed", id)
		}
	}
	return nil
}

// normalise fills the defaults and checks one app.
func (a App) normalise(id string) (App, error) {
	if a.Topic == "" {
		a.Topic = "com.mozilla.org." + id
	}
	if !printable(a.Topic) || strings.Contains(a.Topic, "/") {
		return a, errors.New("topic must be printable ASCII without spaces or '/'")
	}
	base, err := endpointURL(a.Endpoint, a.Sandbox)
	if err != nil {
		return a, err
	}
	a.Endpoint, a.Sandbox = base, base == SandboxURL
	if a.Cert != "" && a.CertKey == "" && a.KeyID == "" && a.TeamID == "" {
		a.CertKey, a.Key = a.Key, "" // autopush-rs's {"cert", "key"}
	}
	switch {
	case a.Cert != "" && (a.Key != "" || a.KeyID != "" || a.TeamID != ""):
		return a, errors.New("both certificate (cert) and token (key, key_id, team_id) authentication are set; choose one")
	case a.Cert != "":
		if a.CertKey == "" {
			return a, errors.New("cert is set without its private key (cert_key)")
		}
	case a.Key == "" || a.KeyID == "" || a.TeamID == "":
		return a, errors.New("needs token authentication (key, key_id and team_id) or a certificate (cert and cert_key)")
	case !printable(a.KeyID) || !printable(a.TeamID):
		return a, errors.New("key_id and team_id must be printable ASCII without spaces")
	}
	return a, nil
}

// endpointURL resolves an app's endpoint setting to a base URL.
func endpointURL(e string, sandbox bool) (string, error) {
	switch e {
	case "", "production":
		if sandbox && e == "production" {
			return "", errors.New(`endpoint "production" contradicts sandbox true`)
		}
		if sandbox {
			return SandboxURL, nil
		}
		return ProductionURL, nil
	case "sandbox":
		return SandboxURL, nil
	}
	u, err := url.Parse(e)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf(`endpoint %q is not "production", "sandbox" or an https URL`, e)
	}
	if sandbox {
		return "", fmt.Errorf("endpoint %q contradicts sandbox true", e)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// printable: non-empty visible ASCII (no spaces or controls), safe in a
// header and a JWT claim.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}
