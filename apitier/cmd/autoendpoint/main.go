package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/internal/cli"
	"github.com/autopush-go/autopush/internal/mozlog"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/sender/node"
	"github.com/autopush-go/autopush/storage/open"
)

func main() { cli.Main("autoendpoint", run) }

// envPrefix is the reference's (autoendpoint reads AUTOEND__*);
// envAlias is also read, for symmetry with AUTOCONNECT__.
const (
	envPrefix = "AUTOEND"
	envAlias  = "AUTOENDPOINT"
)

// config is autoendpoint's settings: the HTTP tier's, then the outbound
// sender's (sender-*, swrve-*, fcm-*, apns-*), which runs here when a
// provider is configured, its workers too unless sender-workers is
// false. docs/configuration.md lists them
// in this order.
type config struct {
	HTTP
	Sender
}

// HTTP and Sender name the parts config embeds.
type (
	HTTP   = apitier.Config
	Sender = node.Config
)

// check validates both parts as run builds them (-check-config).
func (c *config) check() error {
	if err := c.HTTP.Check(); err != nil {
		return err
	}
	return c.Sender.Check()
}

func run() error {
	cfg := config{apitier.DefaultConfig(), node.DefaultConfig()}
	req, err := settings.Load(&cfg, envPrefix, os.Args[1:], settings.WithAlias(settings.OSEnv(), envPrefix, envAlias), os.Stderr)
	if err != nil {
		return err
	}
	if req.CheckConfig {
		return cli.ConfigOK(cfg.check)
	}
	log := mozlog.New(os.Stdout, "autoendpoint", cfg.LogLevel)
	store, err := open.Store(context.Background(), cfg.Settings, log)
	if err != nil {
		return err
	}
	defer store.Close()
	srv, err := apitier.New(cfg.HTTP, store, log)
	if err != nil {
		return err
	}
	// The outbound sender, when a provider is configured: its API on this
	// node, its workers too unless sender-workers is false.
	pushes, err := node.BuildConfigured(cfg.Sender, store, log)
	if err != nil {
		return err
	}
	if pushes != nil {
		defer pushes.Close()
		srv.SetPushService(pushes)
		srv.SetBridges(pushes.Bridges())
	}
	sig := cli.Subscribe(true) // before Start logs the start line
	if err := srv.Start(); err != nil {
		return err
	}
	if pushes == nil {
		sig.Wait(log, srv.Reload) // SIGHUP: the push API's clients
		return shutdown(srv, cfg.ShutdownTimeout, nil)
	}
	if err := pushes.Start(); err != nil {
		return err
	}
	// SIGHUP: the provider's prototype keys and the push API's clients.
	sig.Wait(log, func() { pushes.Reload(); srv.Reload() })
	return shutdown(srv, cfg.ShutdownTimeout, pushes.Stop)
}

// shutdown stops srv, then the sender (stop, when there is one), within
// 1.5 × timeout.
func shutdown(srv *apitier.Server, timeout time.Duration, stop func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+timeout/2)
	defer cancel()
	err := srv.Shutdown(ctx)
	if stop != nil {
		err = errors.Join(err, stop(ctx))
	}
	return err
}
