package main

import (
	"context"
	"errors"
	"os"

	"github.com/autopush-go/autopush/engine"
	"github.com/autopush-go/autopush/internal/cli"
	"github.com/autopush-go/autopush/internal/gctune"
	"github.com/autopush-go/autopush/internal/mozlog"
	"github.com/autopush-go/autopush/internal/procs"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/storage/open"
)

func main() { cli.Main("autoconnect", run) }

func run() error {
	cfg := engine.DefaultConfig()
	req, err := settings.Load(&cfg, "AUTOCONNECT", os.Args[1:], settings.OSEnv(), os.Stderr)
	if err != nil {
		return err
	}
	if req.CheckConfig {
		return cli.ConfigOK(cfg.Validate)
	}
	log := mozlog.New(os.Stdout, "autoconnect", cfg.LogLevel)
	cores := procs.ForLoops(cfg.EventLoops)
	if _, set := os.LookupEnv("GOGC"); !set {
		gcfg := gctune.Defaults(cfg.GCPercent, cfg.GCPercentBusy)
		gcfg.Cores = cores
		gc := gctune.New(gcfg, log)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go gc.Run(ctx)
	}
	store, err := open.Store(context.Background(), cfg.Settings, log)
	if err != nil {
		return err
	}
	defer store.Close()
	srv, err := engine.New(cfg, store, log)
	if err != nil {
		return err
	}
	// Before Start logs the start line. SIGHUP is caught too: a node has
	// no file to reload, and the signal's default would end the process
	// (a reload sent to every unit of a host).
	sig := cli.Subscribe(true)
	if err := srv.Start(); err != nil {
		return err
	}
	if err := sig.WaitOr(log, func() { log.Info("SIGHUP: autoconnect has nothing to reload") }, srv.Failed()); err != nil {
		log.Error("no client can reach this node any more: it stops, and exits with an error for its supervisor to restart it", "error", err)
		return errors.Join(err, srv.Close())
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainWindow*2+30e9)
	defer cancel()
	return srv.Drain(ctx)
}
