package node

import (
	"context"
	"io"
	"log/slog"

	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/bridge"
	"github.com/autopush-go/autopush/sender/swrve"
	"github.com/autopush-go/autopush/storage"
)

// Config holds every setting of a sender node: the sender's (sender-*)
// and its providers' (swrve-*, fcm-*, apns-*). autoendpoint, autosender
// and the single-node server each embed it beside their own settings.
type Config struct {
	// SenderConfig: sender-* (defaults in sender.DefaultConfig).
	SenderConfig
	// ProvidersConfig: swrve-*, fcm-*, apns-* (providers.go).
	ProvidersConfig
}

// SenderConfig names the sender's settings for embedding.
type SenderConfig = sender.Config

// DefaultConfig returns the sender's and every provider's defaults.
func DefaultConfig() Config {
	return Config{SenderConfig: sender.DefaultConfig(), ProvidersConfig: DefaultProvidersConfig()}
}

// Validate reports the first setting that cannot work: the sender's,
// then each provider's, alone and against the sender's.
func (c *Config) Validate() error {
	if err := c.SenderConfig.Validate(); err != nil {
		return err
	}
	return c.ProvidersConfig.Validate(&c.SenderConfig)
}

// Sender is a sender with its providers and the mobile bridges: Reload
// (SIGHUP) re-reads the Swrve keys.
type Sender struct {
	*sender.Sender
	cfg       Config
	providers *Providers
	bridges   *bridge.Bridges
	log       *slog.Logger
	stop      context.CancelFunc
}

// Build checks cfg (Validate), makes the configured providers, the
// sender over store and the bridges (whose device-gone verdicts drop
// registrations from store), and starts watching the Swrve keys file.
// Start the sender with Start; Close stops the watcher and the
// providers' connections.
func Build(cfg Config, store Store, log *slog.Logger) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	providers, err := BuildProviders(cfg.ProvidersConfig)
	if err != nil {
		return nil, err
	}
	// Before any send: the APNs client reports BadDeviceToken to them.
	bridges := providers.Bridges(log)
	s, err := sender.New(cfg.SenderConfig, store, providers.List(), log)
	if err != nil {
		providers.Close()
		return nil, err
	}
	// Only FCM UNREGISTERED and APNs 410 are DeviceGone verdicts: the
	// registration is dropped for nothing else (docs/bridges.md).
	s.OnDeviceGone(bridges.DeviceGone(store))
	s.OnFinal(bridges.Settled(store))
	firstUse(providers, cfg.SwrveConfig.KeysFile, log)
	ctx, cancel := context.WithCancel(context.Background())
	out := &Sender{Sender: s, cfg: cfg, providers: providers, bridges: bridges, log: log, stop: cancel}
	go swrve.Watch(ctx, providers.SwrveKeys, cfg.SwrveConfig.KeysPoll, log, s.KeysReloaded)
	return out, nil
}

// NoProviderMsg is the line a node without a configured provider logs at
// start (BuildConfigured), at info level: a WebPush-only node is a
// deployment, not a mistake.
const NoProviderMsg = "no push provider configured: the outbound sender is off (POST /push answers 503 saying so)"

// BuildConfigured is Build when cfg configures a provider
// (ProvidersConfig.Configured); otherwise it checks cfg, logs
// NoProviderMsg and returns nil: the node runs no sender (no workers, no
// keys watcher, no bridges, no autosender_* series), and its push API
// answers that no provider is configured.
func BuildConfigured(cfg Config, store Store, log *slog.Logger) (*Sender, error) {
	if len(cfg.Configured()) > 0 {
		return Build(cfg, store, log)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	log.Info(NoProviderMsg, "set_one_of", "swrve-keys-file, fcm-apps, apns-apps, log-provider-file")
	return nil, nil
}

// firstUse says at start where POST /push's pushes go when that is not a
// push service: to the log provider's file, or nowhere (every one is
// refused, 400 naming messagePrototypeKey): a warning, with how to fix
// it, when Swrve is configured and its mapping is empty; a line of
// information on a node configured for the bridges only (no
// swrve-keys-file), whose POST /push is not meant to send.
func firstUse(p *Providers, keysFile string, log *slog.Logger) {
	switch {
	case p.Log != nil:
		log.Info("POST /push records each push in a file instead of sending it (the log provider)", "log_provider_file", p.Log.File())
	case keysFile == "":
		log.Info("POST /push refuses every push: swrve-keys-file is not set (this node sends to phones through the bridges only)")
	case p.SwrveKeys.Len() == 0:
		log.Warn("swrve-keys-file maps no message prototype: every push will be refused (POST /push answers 400 naming messagePrototypeKey); "+
			"set swrve-keys-file to a YAML file mapping each prototype to its Swrve push keys (docs/sender.md, Prototype keys), "+
			"or log-provider-file to record pushes in a file instead of sending them", "swrve_keys_file", keysFile)
	}
}

// Config is the configuration the node runs with (what Build was given).
func (s *Sender) Config() Config { return s.cfg }

// Store is what a sender node keeps: the pushes, and the registrations
// the bridges drop when a device is gone.
type Store interface {
	storage.PushStore
	bridge.Store
}

// Bridges are the mobile bridges over the configured FCM and APNs apps,
// for the API tier's push and registration routes (SetBridges).
func (s *Sender) Bridges() *bridge.Bridges { return s.bridges }

// WriteMetrics writes the sender's and the bridges' metrics.
func (s *Sender) WriteMetrics(w io.Writer) {
	s.Sender.WriteMetrics(w)
	s.bridges.WriteMetrics(w)
}

// Reload re-reads the keys file (on SIGHUP); the mapping in use stays on
// any error.
func (s *Sender) Reload() {
	_, err := s.providers.SwrveKeys.Reload()
	swrve.ReportReload(s.log, s.providers.SwrveKeys, err, "SIGHUP")
	s.KeysReloaded(err)
}

// Close stops the keys watcher and the providers' connections.
func (s *Sender) Close() {
	s.stop()
	s.providers.Close()
}
