package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/autopush-go/autopush/engine"
	"github.com/autopush-go/autopush/internal/mozlog"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/storage/open"
)

func main() {
	if err := run(); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "autoconnect:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := engine.DefaultConfig()
	if err := settings.Load(&cfg, "AUTOCONNECT", os.Args[1:], os.LookupEnv, os.Stderr); err != nil {
		return err
	}
	log := mozlog.New(os.Stdout, "autoconnect", cfg.LogLevel)
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(cfg.GCPercent)
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
	// Subscribe before Start logs the start line: a supervisor may send
	// SIGTERM as soon as it sees the node up, and it must drain, not die.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if err := srv.Start(); err != nil {
		return err
	}
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainWindow*2+30e9)
	defer cancel()
	return srv.Drain(ctx)
}
