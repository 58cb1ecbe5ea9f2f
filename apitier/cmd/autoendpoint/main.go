package main

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/apitier/sendernode"
	"github.com/autopush-go/autopush/internal/cli"
	"github.com/autopush-go/autopush/internal/mozlog"
	"github.com/autopush-go/autopush/internal/settings"
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

func run() error {
	cfg := apitier.DefaultConfig()
	if err := settings.Load(&cfg, envPrefix, os.Args[1:], lookupEnv, os.Stderr); err != nil {
		return err
	}
	log := mozlog.New(os.Stdout, "autoendpoint", cfg.LogLevel)
	store, err := open.Store(context.Background(), cfg.Settings, log)
	if err != nil {
		return err
	}
	defer store.Close()
	srv, err := apitier.New(cfg, store, log)
	if err != nil {
		return err
	}
	// The outbound sender: its API on this node, its workers too unless
	// sender-workers is false.
	pushes, err := sendernode.Build(cfg.SenderConfig, cfg.ProvidersConfig, store, log)
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
	sig.Wait(log, pushes.Reload) // SIGHUP: the provider's prototype keys
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout+cfg.ShutdownTimeout/2)
	defer cancel()
	err = srv.Shutdown(ctx)
	return errors.Join(err, pushes.Stop(ctx))
}
