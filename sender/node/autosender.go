package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/autopush-go/autopush/internal/dockerflow"
	"github.com/autopush-go/autopush/internal/exposition"
	"github.com/autopush-go/autopush/internal/listener"
	"github.com/autopush-go/autopush/storage"
)

// AutosenderConfig is the configuration of autosender, the binary that
// only sends: the storage, the sender and its providers, and the
// operations listener.
type AutosenderConfig struct {
	// Listen serves /metrics and the health routes. Default ":8083".
	Listen string `conf:"listen" help:"operations HTTP listen address (/metrics, /__heartbeat__)"`
	storage.Settings
	// Config: sender-*, swrve-*, fcm-*, apns-*.
	Config
	// ShutdownTimeout bounds a graceful stop: sends in flight finish and
	// the queue is handed back. Default 40s.
	ShutdownTimeout time.Duration `conf:"shutdown-timeout" help:"time allowed to finish sends in flight on shutdown"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `conf:"log-level" enum:"debug|info|warn|error" help:"least severe level logged"`
	// VersionFile is served at /__version__. Default "version.json".
	VersionFile string `conf:"version-file" help:"file served at /__version__"`
}

// DefaultAutosenderConfig returns the defaults documented on
// AutosenderConfig.
func DefaultAutosenderConfig() AutosenderConfig {
	return AutosenderConfig{Listen: ":8083", Settings: storage.DefaultSettings(), Config: DefaultConfig(),
		ShutdownTimeout: 40 * time.Second, LogLevel: "info", VersionFile: "version.json"}
}

// Validate reports the first setting that cannot work.
func (c *AutosenderConfig) Validate() error {
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
	if len(c.Configured()) == 0 {
		return errors.New("autosender: config: no provider configured, nothing to send through: set swrve-keys-file, fcm-apps, apns-apps or log-provider-file")
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
	ln, err := listener.Listen("autosender", "listen", addr)
	if err != nil {
		return nil, err
	}
	o := &Ops{ln: ln}
	version := dockerflow.Version(versionFile)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", exposition.Handler(s.WriteMetrics, metrics.WriteProcessMetrics))
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
