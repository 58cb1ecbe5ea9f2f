package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/apitier/sendernode"
	"github.com/autopush-go/autopush/internal/mozlog"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/storage/open"
)

func main() {
	if err := run(); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "autoendpoint:", err)
		os.Exit(1)
	}
}

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
	pushes, err := sendernode.Build(cfg.SenderConfig, cfg.SwrveConfig, store, log)
	if err != nil {
		return err
	}
	defer pushes.Close()
	srv.SetPushService(pushes)
	// Subscribe before Start logs the start line: a supervisor may send
	// SIGTERM as soon as it sees the node up, and it must stop gracefully.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := srv.Start(); err != nil {
		return err
	}
	if err := pushes.Start(); err != nil {
		return err
	}
	for s := range sig {
		if s == syscall.SIGHUP {
			pushes.Reload() // the provider's prototype keys
			continue
		}
		log.Info("signal received, shutting down", "signal", s.String())
		break
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout+cfg.ShutdownTimeout/2)
	defer cancel()
	err = srv.Shutdown(ctx)
	return errors.Join(err, pushes.Stop(ctx))
}
