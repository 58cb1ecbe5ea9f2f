package sendernode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/autopush-go/autopush/apitier/bridge"
	"github.com/autopush-go/autopush/apitier/sender"
	"github.com/autopush-go/autopush/apitier/sender/providers"
	"github.com/autopush-go/autopush/apitier/sender/swrve"
	"github.com/autopush-go/autopush/internal/dockerflow"
	"github.com/autopush-go/autopush/storage"
)

// Sender is a sender with its providers and the mobile bridges: Reload
// (SIGHUP) re-reads the Swrve keys.
type Sender struct {
	*sender.Sender
	set     *providers.Set
	bridges *bridge.Bridges
	log     *slog.Logger
	stop    context.CancelFunc
}

// Build makes the configured providers, the sender over store and the
// bridges (whose device-gone verdicts drop registrations from store), and
// starts watching the Swrve keys file. Start the sender with Start; Close
// stops the watcher and the providers' connections.
func Build(sc sender.Config, pc providers.Config, store Store, log *slog.Logger) (*Sender, error) {
	set, err := providers.Build(pc)
	if err != nil {
		return nil, err
	}
	// Before any send: the APNs client reports BadDeviceToken to them.
	bridges := set.Bridges(log)
	s, err := sender.New(sc, store, set.List(), log)
	if err != nil {
		set.Close()
		return nil, err
	}
	// Only FCM UNREGISTERED and APNs 410 are DeviceGone verdicts: the
	// registration is dropped for nothing else (docs/bridges.md).
	s.OnDeviceGone(bridges.DeviceGone(store))
	ctx, cancel := context.WithCancel(context.Background())
	out := &Sender{Sender: s, set: set, bridges: bridges, log: log, stop: cancel}
	go swrve.Watch(ctx, set.SwrveKeys, pc.SwrveConfig.KeysPoll, log, s.KeysReloaded)
	return out, nil
}

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
	_, err := s.set.SwrveKeys.Reload()
	swrve.ReportReload(s.log, s.set.SwrveKeys, err, "SIGHUP")
	s.KeysReloaded(err)
}

// Close stops the keys watcher and the providers' connections.
func (s *Sender) Close() {
	s.stop()
	s.set.Close()
}

// Config of autosender, the binary that only sends: the storage, the
// sender and its provider, and the operations listener.
type Config struct {
	// Listen serves /metrics and the health routes. Default ":8083".
	Listen string `conf:"listen" help:"operations HTTP listen address (/metrics, /__heartbeat__)"`
	storage.Settings
	SenderConfig
	// ProvidersConfig: swrve-*, fcm-*, apns-* (package providers).
	ProvidersConfig
	// ShutdownTimeout bounds a graceful stop: sends in flight finish and
	// the queue is handed back. Default 40s.
	ShutdownTimeout time.Duration `conf:"shutdown-timeout" help:"time allowed to finish sends in flight on shutdown"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `conf:"log-level" help:"debug, info, warn or error"`
	// VersionFile is served at /__version__. Default "version.json".
	VersionFile string `conf:"version-file" help:"file served at /__version__"`
}

// SenderConfig and ProvidersConfig name the settings Config embeds.
type (
	SenderConfig    = sender.Config
	ProvidersConfig = providers.Config
)

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Listen: ":8083", Settings: storage.DefaultSettings(), SenderConfig: sender.DefaultConfig(),
		ProvidersConfig: providers.DefaultConfig(), ShutdownTimeout: 40 * time.Second, LogLevel: "info", VersionFile: "version.json"}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	if c.Listen == "" {
		return errors.New("autosender: config: listen is required")
	}
	if c.ShutdownTimeout <= 0 {
		return errors.New("autosender: config: shutdown-timeout must be positive")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("autosender: config: %w", err)
	}
	if err := c.SenderConfig.Validate(); err != nil {
		return err
	}
	if !c.Workers {
		return errors.New("autosender: config: sender-workers is false: this binary only sends")
	}
	return c.ProvidersConfig.Validate(&c.SenderConfig)
}

// Ops is the operations HTTP server of a sender node.
type Ops struct {
	srv      *http.Server
	ln       net.Listener
	draining atomic.Bool
}

// ServeOps listens on addr and serves the operations routes.
func ServeOps(addr string, s *Sender, store storage.Store, versionFile string) (*Ops, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("autosender: listen %s: %w", addr, err)
	}
	o := &Ops{ln: ln}
	version := dockerflow.Version(versionFile)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		var b bytes.Buffer
		s.WriteMetrics(&b)
		metrics.WriteProcessMetrics(&b)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(b.Bytes())
	})
	mux.HandleFunc("GET /__heartbeat__", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := store.Health(ctx); err != nil {
			writeStatus(w, http.StatusServiceUnavailable, "error")
			return
		}
		writeStatus(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /__lbheartbeat__", func(w http.ResponseWriter, _ *http.Request) {
		if o.draining.Load() {
			writeStatus(w, http.StatusServiceUnavailable, "draining")
			return
		}
		writeStatus(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /__version__", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(version)
	})
	o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 75 * time.Second}
	go o.srv.Serve(ln)
	return o, nil
}

// Addr is the listen address with its real port.
func (o *Ops) Addr() string { return o.ln.Addr().String() }

// Shutdown fails /__lbheartbeat__ and stops serving.
func (o *Ops) Shutdown(ctx context.Context) error {
	o.draining.Store(true)
	return o.srv.Shutdown(ctx)
}

func writeStatus(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"status":%q}`, status)
}
