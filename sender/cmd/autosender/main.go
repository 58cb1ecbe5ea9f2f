package main

import (
	"context"
	"errors"
	"os"

	"github.com/autopush-go/autopush/internal/cli"
	"github.com/autopush-go/autopush/internal/mozlog"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/sender/node"
	"github.com/autopush-go/autopush/storage/open"
)

func main() { cli.Main("autosender", run) }

func run() error {
	cfg := node.DefaultAutosenderConfig()
	req, err := settings.Load(&cfg, "AUTOSENDER", os.Args[1:], settings.OSEnv(), os.Stderr)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if req.CheckConfig {
		return cli.ConfigOK(cfg.Config.Check)
	}
	log := mozlog.New(os.Stdout, "autosender", cfg.LogLevel)
	store, err := open.Store(context.Background(), cfg.Settings, log)
	if err != nil {
		return err
	}
	defer store.Close()
	s, err := node.Build(cfg.Config, store, log)
	if err != nil {
		return err
	}
	defer s.Close()
	sig := cli.Subscribe(true)
	ops, err := node.ServeOps(cfg.Listen, s, store, cfg.VersionFile)
	if err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return err
	}
	log.Info("autosender started", "listen", ops.Addr(), "node", s.Node())
	sig.Wait(log, s.Reload)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(ops.Shutdown(ctx), s.Stop(ctx))
}
