package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

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
		fmt.Fprintln(os.Stderr, "autosender:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := sendernode.DefaultConfig()
	if err := settings.Load(&cfg, "AUTOSENDER", os.Args[1:], os.LookupEnv, os.Stderr); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := mozlog.New(os.Stdout, "autosender", cfg.LogLevel)
	store, err := open.Store(context.Background(), cfg.Settings, log)
	if err != nil {
		return err
	}
	defer store.Close()
	s, err := sendernode.Build(cfg.SenderConfig, cfg.SwrveConfig, store, log)
	if err != nil {
		return err
	}
	defer s.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	ops, err := sendernode.ServeOps(cfg.Listen, s, store, cfg.VersionFile)
	if err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return err
	}
	log.Info("autosender started", "listen", ops.Addr(), "node", s.Node())
	for got := range sig {
		if got == syscall.SIGHUP {
			s.Reload()
			continue
		}
		log.Info("signal received, shutting down", "signal", got.String())
		break
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(ops.Shutdown(ctx), s.Stop(ctx))
}
