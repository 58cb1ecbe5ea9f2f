package main

import (
	"context"
	"errors"
	"os"
	"strings"

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

// lookupEnv reads PREFIX__NAME, falling back to ALIAS__NAME.
func lookupEnv(name string) (string, bool) {
	if v, ok := os.LookupEnv(name); ok {
		return v, true
	}
	if rest, ok := strings.CutPrefix(name, envPrefix+"__"); ok {
		return os.LookupEnv(envAlias + "__" + rest)
	}
	return "", false
}

// config is autoendpoint's settings: the HTTP tier's, then the outbound
// sender's (sender-*, swrve-*, fcm-*, apns-*), whose workers run here
// too unless sender-workers is false. docs/configuration.md lists them
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

func run() error {
	cfg := config{apitier.DefaultConfig(), node.DefaultConfig()}
	if err := settings.Load(&cfg, envPrefix, os.Args[1:], lookupEnv, os.Stderr); err != nil {
		return err
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
	// The outbound sender: its API on this node, its workers too unless
	// sender-workers is false.
	pushes, err := node.Build(cfg.Sender, store, log)
	if err != nil {
		return err
	}
	defer pushes.Close()
	srv.SetPushService(pushes)
	srv.SetBridges(pushes.Bridges())
	sig := cli.Subscribe(true) // before Start logs the start line
	if err := srv.Start(); err != nil {
		return err
	}
	if err := pushes.Start(); err != nil {
		return err
	}
	// SIGHUP: the provider's prototype keys and the push API's clients.
	sig.Wait(log, func() { pushes.Reload(); srv.Reload() })
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout+cfg.ShutdownTimeout/2)
	defer cancel()
	err = srv.Shutdown(ctx)
	return errors.Join(err, pushes.Stop(ctx))
}
