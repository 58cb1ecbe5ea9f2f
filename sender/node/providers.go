package node

// The outbound sender's set of providers: their settings in one struct
// (Swrve, and the mobile bridges FCM and APNs), validated together
// against the sender's, and built together.
//
// A provider is configured by its own setting: Swrve by swrve-keys-file,
// FCM and APNs by their apps, the log provider by its file. With none
// (a WebPush-only node) no sender is built at all (BuildConfigured). With
// any, Swrve is always built (its keys file may map nothing); FCM and
// APNs only when their apps are configured: without apps they have no
// work, and the bridges answer their pushes 502 errno 900. The log
// provider, when its file is set, takes POST /push's pushes in Swrve's
// place.

import (
	"fmt"
	"log/slog"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/apns"
	"github.com/autopush-go/autopush/sender/bridge"
	"github.com/autopush-go/autopush/sender/fcm"
	"github.com/autopush-go/autopush/sender/logprovider"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/swrve"
)

// ProvidersConfig holds every provider's settings (swrve-*, fcm-*,
// apns-*, log-provider-file).
type ProvidersConfig struct {
	SwrveConfig
	FCMConfig
	APNsConfig
	LogConfig
}

// The providers' own configs, named for embedding.
type (
	SwrveConfig = swrve.Config
	FCMConfig   = fcm.Config
	APNsConfig  = apns.Config
	LogConfig   = logprovider.Config
)

// DefaultProvidersConfig returns each provider's defaults.
func DefaultProvidersConfig() ProvidersConfig {
	return ProvidersConfig{SwrveConfig: swrve.DefaultConfig(), FCMConfig: fcm.DefaultConfig(), APNsConfig: apns.DefaultConfig()}
}

// Validate reports the first provider setting that cannot work, alone or
// with the sender's settings sc (a provider's pace against the sender's
// queue and jobs).
func (c *ProvidersConfig) Validate(sc *sender.Config) error {
	if err := c.SwrveConfig.Validate(); err != nil {
		return err
	}
	if err := sc.ValidateFor(swrve.Name, c.SwrveConfig.Limits()); err != nil {
		return err
	}
	if err := c.FCMConfig.Validate(); err != nil {
		return err
	}
	if len(c.FCMConfig.AppIDs()) > 0 {
		if err := sc.ValidateFor(fcm.Name, c.FCMConfig.Limits()); err != nil {
			return err
		}
	}
	if err := c.APNsConfig.Validate(); err != nil {
		return err
	}
	if len(c.APNsConfig.AppIDs()) > 0 {
		if err := sc.ValidateFor(apns.Name, c.APNsConfig.Limits()); err != nil {
			return err
		}
	}
	if c.LogConfig.File != "" {
		return sc.ValidateFor(logprovider.Name, c.LogConfig.Limits())
	}
	return nil
}

// Configured names the providers c configures (swrve, fcm, apns, log),
// in that order; none for a WebPush-only node.
func (c *ProvidersConfig) Configured() []string {
	var out []string
	for _, p := range []struct {
		name string
		set  bool
	}{
		{swrve.Name, c.SwrveConfig.KeysFile != ""},
		{fcm.Name, appsSet(fcm.ParseApps(c.FCMConfig.Apps))},
		{apns.Name, appsSet(apns.ParseApps(c.APNsConfig.Apps))},
		{logprovider.Name, c.LogConfig.File != ""},
	} {
		if p.set {
			out = append(out, p.name)
		}
	}
	return out
}

// appsSet says whether a bridge's apps setting, parsed, configures it:
// it names an app, or does not parse (Build then refuses it, naming the
// setting).
func appsSet[A any](apps map[string]A, err error) bool { return err != nil || len(apps) > 0 }

// Providers are the built providers. FCM, APNs and Log are nil when not
// configured.
type Providers struct {
	Swrve     *swrve.Client
	SwrveKeys *swrve.Keys
	FCM       *fcm.Client
	APNs      *apns.Client
	Log       *logprovider.Provider
	cfg       ProvidersConfig
}

// BuildProviders makes the configured providers, reading their
// credentials, so a missing key file or service account stops the start
// with its app id.
func BuildProviders(c ProvidersConfig) (*Providers, error) {
	keys, err := swrve.LoadKeys(c.SwrveConfig.KeysFile)
	if err != nil {
		return nil, err
	}
	s := &Providers{SwrveKeys: keys, cfg: c}
	if s.Swrve, err = swrve.New(c.SwrveConfig, keys); err != nil {
		return nil, err
	}
	if len(c.FCMConfig.AppIDs()) > 0 {
		if s.FCM, err = fcm.New(c.FCMConfig); err != nil {
			return nil, err
		}
	}
	if len(c.APNsConfig.AppIDs()) > 0 {
		if s.APNs, err = apns.New(c.APNsConfig); err != nil {
			return nil, fmt.Errorf("providers: %w", err)
		}
	}
	if c.LogConfig.File != "" {
		if s.Log, err = logprovider.New(c.LogConfig); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// List is the providers for sender.New, the one POST /push sends through
// first: the log provider when it is configured, else Swrve.
func (s *Providers) List() []provider.Provider {
	var out []provider.Provider
	if s.Log != nil {
		out = append(out, s.Log)
	}
	out = append(out, s.Swrve)
	if s.FCM != nil {
		out = append(out, s.FCM)
	}
	if s.APNs != nil {
		out = append(out, s.APNs)
	}
	return out
}

// Bridges are the mobile bridges over the configured FCM and APNs apps,
// with their providers' data limits; the APNs client reports its
// BadDeviceToken answers to them. Call once, before the providers send.
func (s *Providers) Bridges(log *slog.Logger) *bridge.Bridges {
	var f, a *bridge.Bridge
	if s.FCM != nil {
		fc := s.cfg.FCMConfig
		f = &bridge.Bridge{AppIDs: fc.AppIDs(), Check: fc.CheckData}
	}
	if s.APNs != nil {
		ac := s.cfg.APNsConfig
		apps, _ := apns.ParseApps(ac.Apps) // Build parsed them
		envs := make(map[string]string, len(apps))
		for id, app := range apps {
			envs[id] = app.Environment()
		}
		a = &bridge.Bridge{AppIDs: ac.AppIDs(), Check: func(data map[string]string) error {
			// The payload carries the push's id ("ver"): a uuid, as long
			// as any the sender gives.
			return ac.CheckData(&provider.Notification{ID: uuid.Nil.String(), Data: data})
		}, Mixup: bridge.MixupRule{Tokens: ac.BadTokenBurst, Window: ac.BadTokenWindow}, Environments: envs}
	}
	b := bridge.New(f, a, log)
	if s.APNs != nil {
		// BadDeviceToken fails a push without dropping its registration;
		// the bridges watch those answers for a sandbox/production mix-up.
		s.APNs.OnBadDeviceToken(b.BadDeviceToken)
	}
	return b
}

// Close releases the providers' connections and files.
func (s *Providers) Close() {
	if s.APNs != nil {
		s.APNs.Close()
	}
	if s.Log != nil {
		s.Log.Close()
	}
}

// Check validates c as Build would, reading what the providers read at
// start (the Swrve keys file, the FCM service accounts, the APNs keys and
// certificates), without starting or sending anything (-check-config).
// The log provider's file is not opened: it is made at start.
func (c *Config) Check() error {
	if err := c.Validate(); err != nil {
		return err
	}
	pc := c.ProvidersConfig
	pc.LogConfig.File = ""
	p, err := BuildProviders(pc)
	if err != nil {
		return err
	}
	p.Close()
	return nil
}
