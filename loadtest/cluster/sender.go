package cluster

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/loadtest/scenario"
)

// Provider is the (fake) provider a sender node sends to.
type Provider struct {
	// Name is "swrve" or "fcm".
	Name string
	// URL is its base URL (swrve-url, fcm-url).
	URL string
	// FCMAccount is the JSON of the service account the node authenticates
	// to FCM with (fcm only).
	FCMAccount []byte
}

// FCMApp is the FCM app id (fcm-apps) a sender node to a fake FCM is
// configured with: the phones register under it.
const FCMApp = "loadtest-android"

// StartSender starts autoendpoint with its sender workers on the run's
// storage (a fresh keyspace, or an embedded store in a scratch
// directory), sending to p (Swrve with a prototype-key file of its own,
// or FCM with p's service account and the bridge registration API open),
// and returns it with the push API keys it accepts: the first for the
// run's queries (and its pushes with one client), then one per client
// when cfg.Clients is above 1 (SenderKeys). When a step fails it stops
// what the earlier ones started, as Start does, and returns that step's
// error.
func StartSender(ctx context.Context, cfg *scenario.Config, logDir string, log io.Writer, p Provider) (*Cluster, []string, error) {
	c := newCluster(cfg, log)
	keys, err := c.startSender(ctx, logDir, p)
	if err != nil {
		c.Stop()
		return nil, nil, err
	}
	return c, keys, nil
}

// SenderKeys are the push API's keys of a sender run: keys[0] queries
// (and posts when there is one client), keys[1:] are the clients of a
// flood run (cfg.Clients above 1), the first of them the flooding one.
// Each is its own client of the push API. With cfg.FloodQuota they are
// given in a push-clients-file (file's content returned): keys[0] an
// admin client, the others send and read, the flooding one with the
// quota as its rate; else in push-api-keys.
func SenderKeys(cfg *scenario.Config) (keys []string, clientsFile string, err error) {
	n := 1
	if cfg.Clients > 1 {
		n += cfg.Clients
	}
	for range n {
		b := make([]byte, 16)
		if _, err := crand.Read(b); err != nil {
			return nil, "", err
		}
		keys = append(keys, hex.EncodeToString(b))
	}
	if cfg.FloodQuota <= 0 {
		return keys, "", nil
	}
	// The push-clients-file: clients by name, each with its key's
	// SHA-256, its scopes and its quotas (0: none).
	var f strings.Builder
	f.WriteString("clients:\n")
	for i, k := range keys {
		sum := sha256.Sum256([]byte(k))
		name, scopes, rate := fmt.Sprintf("client-%d", i), "[send, read]", 0.0
		if i == 0 {
			name, scopes = "loadtest", "[admin]"
		}
		if i == 1 || len(keys) == 1 { // the flooding client, or the only one
			rate = cfg.FloodQuota
		}
		fmt.Fprintf(&f, "  %s: {key_sha256: %s, scopes: %s, rate: %s, outstanding: 0}\n", name, hex.EncodeToString(sum[:]), scopes,
			strconv.FormatFloat(rate, 'f', -1, 64))
	}
	return keys, f.String(), nil
}

// startSender is StartSender's steps; what each starts is kept in c, for
// Stop.
func (c *Cluster) startSender(ctx context.Context, logDir string, prov Provider) ([]string, error) {
	cfg := c.cfg
	var err error
	if c.dir, err = os.MkdirTemp("", "loadtest-sender-"); err != nil {
		return nil, fmt.Errorf("loadtest: scratch dir: %w", err)
	}
	if c.binDir, err = Binaries(ctx, cfg.BinDir, c.dir, []string{"autoendpoint"}, c.log); err != nil {
		return nil, err
	}
	if c.Storage == "scylla" {
		if err := c.makeKeyspace(ctx); err != nil {
			return nil, err
		}
	}
	keys := filepath.Join(c.dir, "swrve-keys.yaml")
	if err := os.WriteFile(keys, []byte("swrve:\n  messagePrototypePushKeys:\n    'Hello': {IOS: lt-ios, ANDROID: lt-android}\n"), 0o600); err != nil {
		return nil, err
	}
	apiKeys, clients, err := SenderKeys(cfg)
	if err != nil {
		return nil, err
	}
	auth := "AUTOEND__PUSH_API_KEYS=" + strings.Join(apiKeys, ",")
	if clients != "" {
		file := filepath.Join(c.dir, "push-clients.yaml")
		if err := os.WriteFile(file, []byte(clients), 0o600); err != nil {
			return nil, err
		}
		auth = "AUTOEND__PUSH_CLIENTS_FILE=" + file
	}
	// The jobs' portions keep the sizing rule (portion × delay < their
	// 1 s interval) at any -provider-delay.
	portion := strconv.Itoa(max(1, min(200, int(0.8*cfg.Pace()))))
	env := append(c.storageEnv("AUTOEND", "data"),
		"AUTOEND__CRYPTO_KEY="+token.GenerateKey(),
		"AUTOEND__NODE_SECRET="+token.GenerateKey(), // required; no connection node here to share it with
		"AUTOEND__VERSION_FILE=", "AUTOEND__REQUEST_LOG=false", auth,
		"AUTOEND__SENDER_NODE=loadtest", "AUTOEND__SWRVE_KEYS_FILE="+keys,
		"AUTOEND__SENDER_SCHEDULED_PORTION="+portion, "AUTOEND__SENDER_PENDING_PORTION="+portion)
	rate, delay := strconv.FormatFloat(cfg.ProviderRate, 'f', -1, 64), cfg.ProviderDelay.String()
	if prov.Name == "fcm" {
		apps, _ := json.Marshal(map[string]any{FCMApp: map[string]string{"project_id": "loadtest", "credentials": string(prov.FCMAccount)}})
		env = append(env, "AUTOEND__BRIDGE_AUTH_KEYS="+token.GenerateKey(), "AUTOEND__FCM_APPS="+string(apps),
			"AUTOEND__FCM_URL="+prov.URL, "AUTOEND__FCM_RATE="+rate, "AUTOEND__FCM_DELAY="+delay, "AUTOEND__FCM_LATENCY="+cfg.AverageLatency.String())
	} else {
		env = append(env, "AUTOEND__SWRVE_URL="+prov.URL, "AUTOEND__SWRVE_RATE="+rate, "AUTOEND__SWRVE_DELAY="+delay,
			"AUTOEND__SWRVE_AVERAGE_LATENCY="+cfg.AverageLatency.String())
	}
	env = append(env, "AUTOEND__METRICS_LISTEN=127.0.0.1:0")
	p, addr, err := c.startListening("autoendpoint", func(addr string) (*proc.Proc, error) {
		env := append(slices.Clip(env), "AUTOEND__LISTEN="+addr, "AUTOEND__ENDPOINT_URL=http://"+addr)
		env = append(env, passThrough("AUTOEND__", "AUTOENDPOINT__")...)
		return startChild(ctx, "autoendpoint", filepath.Join(c.binDir, "autoendpoint"), nil, env,
			filepath.Join(logDir, "autoendpoint.log"), "autoendpoint started", nil)
	})
	if err != nil {
		return nil, err
	}
	c.Endpoint, c.EndpointURL = p, "http://"+addr
	c.APIMetricsURL = "http://" + p.Field("metrics") + "/metrics"
	return apiKeys, nil
}
