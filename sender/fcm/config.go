package fcm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
)

// Name is the provider's name in storage, metrics and the push API.
const Name = "fcm"

// MaxTTL is the longest time to live FCM keeps a message: 28 days.
const MaxTTL = 28 * 24 * time.Hour

// Config of the FCM provider; the settings package fills it (flags
// -fcm-*, variables PREFIX__FCM_*).
type Config struct {
	// Apps is a JSON object of app id -> {"project_id": ..., "credentials":
	// ...}; credentials is the path of a Google service-account JSON file,
	// or that JSON itself when it starts with '{' (autopush-rs spells the
	// key "credential" or "server_access_token"; both are read too).
	// Default "" (no FCM app: every FCM push is refused as misconfigured).
	Apps string `conf:"fcm-apps" help:"FCM apps: JSON object of app id -> {project_id, credentials: a service-account JSON file or the JSON itself}"`
	// URL is the base of the FCM API. Default "https://fcm.googleapis.com".
	// (The OAuth2 token URL is the service account's token_uri.)
	URL string `conf:"fcm-url" help:"base URL of the FCM HTTP v1 API"`
	// Rate is the most calls a second FCM gets, from every sender node
	// sharing the store together (the project's quota). Default 500.
	Rate float64 `conf:"fcm-rate" help:"most calls a second to FCM, from all sender nodes together (the project quota)"`
	// Delay is the time between two calls, all nodes together; at most
	// 95% of Rate, for headroom. Default 2.5ms (400 calls a second).
	Delay time.Duration `conf:"fcm-delay" help:"time between two calls to FCM, all sender nodes together (the pace; leaves headroom under fcm-rate)"`
	// AverageLatency is the expected average answer time; with Delay it
	// sizes the sending pool. Default 200ms (pool 80 + the look-ahead).
	AverageLatency time.Duration `conf:"fcm-latency" help:"expected average FCM answer time (sizes the sending pool)"`
	// Timeout bounds one send, the token fetch included. Default 10s.
	Timeout time.Duration `conf:"fcm-timeout" help:"timeout of one send to FCM"`
	// MaxData is the most bytes of notification data, measured as
	// DataSize (the JSON of the data object, as autopush-rs measures it).
	// Default 4096.
	MaxData int `conf:"fcm-max-data" help:"most bytes of FCM message data (the JSON of the data object)"`
	// MinTTL raises shorter TTLs (and TTL 0) to it: FCM may drop a
	// message whose TTL runs out before the device wakes. Default 60s.
	MinTTL time.Duration `conf:"fcm-min-ttl" help:"shortest time to live sent to FCM (shorter TTLs are raised to it)"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		URL: "https://fcm.googleapis.com", Rate: 500, Delay: 2500 * time.Microsecond, AverageLatency: 200 * time.Millisecond,
		Timeout: 10 * time.Second, MaxData: 4096, MinTTL: 60 * time.Second,
	}
}

// Limits are what the sender drives the provider with.
func (c *Config) Limits() provider.Limits {
	return provider.Limits{Rate: c.Rate, Delay: c.Delay, AverageLatency: c.AverageLatency, Timeout: c.Timeout, Bridge: true}
}

// Validate reports the first setting that cannot work. It checks the
// apps' shape; New reads their credentials.
func (c *Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("fcm: config: fcm-url %q is not an absolute http(s) URL without query", c.URL)
	}
	if err := c.Limits().Validate(); err != nil {
		return fmt.Errorf("fcm: config: %w", err)
	}
	if c.MaxData <= 0 {
		return fmt.Errorf("fcm: config: fcm-max-data %d is not positive", c.MaxData)
	}
	if c.MinTTL < 0 || c.MinTTL > MaxTTL {
		return fmt.Errorf("fcm: config: fcm-min-ttl %s is outside [0, %s]", c.MinTTL, MaxTTL)
	}
	if _, err := ParseApps(c.Apps); err != nil {
		return err
	}
	return nil
}

// AppIDs lists the configured app ids, sorted (nil when fcm-apps does
// not parse: Validate says why).
func (c *Config) AppIDs() []string {
	apps, err := ParseApps(c.Apps)
	if err != nil {
		return nil
	}
	return sortedKeys(apps)
}

// App is one FCM application: the Firebase project it sends through and
// its service account.
type App struct {
	ProjectID string
	// Credentials is a service-account JSON file's path, or the JSON
	// itself when it starts with '{'. It is a secret: never print it.
	Credentials string
}

// appJSON is one entry of fcm-apps; the aliases are autopush-rs's
// spellings of the credential.
type appJSON struct {
	ProjectID   string  `json:"project_id"`
	Credentials *string `json:"credentials"`
	Credential  *string `json:"credential"`
	ServerToken *string `json:"server_access_token"`
}

// ParseApps parses fcm-apps. "" (or blanks) is no app. Errors name the
// app id and never include a credential.
func ParseApps(s string) (map[string]App, error) {
	if len(bytes.TrimSpace([]byte(s))) == 0 {
		return map[string]App{}, nil
	}
	var raw map[string]appJSON
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		// A syntax error's text quotes no input; a type error names
		// the field. Neither carries a credential.
		return nil, fmt.Errorf("fcm: fcm-apps: not a JSON object of app id -> {project_id, credentials}: %w", err)
	}
	if dec.More() {
		return nil, errors.New("fcm: fcm-apps: trailing data after the JSON object")
	}
	if raw == nil {
		return nil, errors.New("fcm: fcm-apps: not a JSON object of app id -> {project_id, credentials}")
	}
	apps := make(map[string]App, len(raw))
	for _, id := range sortedKeys(raw) {
		a, err := raw[id].app()
		if id == "" {
			err = errors.New("empty app id")
		}
		if err != nil {
			return nil, fmt.Errorf("fcm: fcm-apps: app %q: %w", id, err)
		}
		apps[id] = a
	}
	return apps, nil
}

func (j appJSON) app() (App, error) {
	if !validProjectID(j.ProjectID) {
		return App{}, fmt.Errorf("project_id %q is not a Firebase project id (letters, digits, '-', '_', '.')", j.ProjectID)
	}
	var creds []string
	for _, c := range []*string{j.Credentials, j.Credential, j.ServerToken} {
		if c != nil {
			creds = append(creds, *c)
		}
	}
	switch {
	case len(creds) == 0 || len(creds) == 1 && creds[0] == "":
		return App{}, errors.New("no credentials (a service-account JSON file, or the JSON itself)")
	case len(creds) > 1:
		return App{}, errors.New("more than one of credentials, credential and server_access_token")
	}
	return App{ProjectID: j.ProjectID, Credentials: creds[0]}, nil
}

// validProjectID keeps the project id a single path segment.
func validProjectID(p string) bool {
	if p == "" || len(p) > 100 {
		return false
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return p != "." && p != ".."
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ClampTTL is the TTL sent to FCM: ttl in whole seconds (rounded down),
// raised to fcm-min-ttl and lowered to MaxTTL, as autopush-rs does.
func (c *Config) ClampTTL(ttl time.Duration) time.Duration {
	return min(max(ttl.Truncate(time.Second), c.MinTTL.Truncate(time.Second)), MaxTTL)
}

// ErrTooMuchData is the error of CheckData (the API tier answers 413).
var ErrTooMuchData = errors.New("fcm: too much data")

// CheckData reports data whose DataSize exceeds fcm-max-data, by how
// many bytes (errors.Is ErrTooMuchData).
func (c *Config) CheckData(data map[string]string) error {
	if n := DataSize(data); n > c.MaxData {
		return fmt.Errorf("%w: %d bytes, %d over fcm-max-data %d", ErrTooMuchData, n, n-c.MaxData, c.MaxData)
	}
	return nil
}

// DataSize is the size autopush-rs compares with max_data before a
// send: the length of the compact JSON object of the data map alone
// (keys, values, quotes, colons, commas and braces; not the rest of the
// message), as FCM counts only the data toward its 4096-byte limit.
// Characters are escaped as serde_json does, without HTML escaping.
func DataSize(data map[string]string) int {
	b, err := marshal(dataMap(data))
	if err != nil { // a map of strings always encodes
		return 0
	}
	return len(b)
}

// dataMap never gives null: FCM wants an object.
func dataMap(data map[string]string) map[string]string {
	if data == nil {
		return map[string]string{}
	}
	return data
}

// marshal is compact JSON with sorted map keys and without HTML escaping
// (so "<" stays "<" as in autopush-rs), giving exact, testable bytes.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
