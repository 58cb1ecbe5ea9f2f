package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/autopush-go/autopush/internal/cli"
	"github.com/autopush-go/autopush/internal/mozlog"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/storage/open"
)

func main() { cli.Main("autopush", run) }

func run() error {
	if done, err := storeCommand(os.Args[1:], os.Stdout); done {
		return err
	}
	cfg, err := single.Load(os.Args[1:], settings.OSEnv(), os.Stderr)
	if err != nil {
		return err
	}
	if cfg.Request.CheckConfig {
		return cli.ConfigOK(cfg.Check)
	}
	log := mozlog.New(os.Stdout, "autopush", cfg.Engine.LogLevel)
	// Subscribe before the ready line: a supervisor may send SIGTERM as
	// soon as it sees the server up, and it must drain, not die.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	store, err := open.Store(ctx, cfg.Engine.Settings, log)
	if err != nil {
		return err
	}
	defer store.Close()
	return single.Run(ctx, cfg, store, log)
}
