package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/stack/backup"
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/storage/embedded"
)

// storeCommand runs `autopush backup DIR [settings]` and `autopush
// restore [-force] DIR [settings]` (docs/operations.md, Backups); done
// is false for any other first argument: the server's.
func storeCommand(args []string, out io.Writer) (done bool, err error) {
	if len(args) == 0 || (args[0] != "backup" && args[0] != "restore") {
		return false, nil
	}
	cmd, args := args[0], args[1:]
	force := cmd == "restore" && len(args) > 0 && (args[0] == "-force" || args[0] == "--force")
	if force {
		args = args[1:]
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return true, fmt.Errorf("usage: autopush backup DIR [settings], autopush restore [-force] DIR [settings]: the settings are the server's (flags, AUTOPUSH__ variables, -config)")
	}
	dir, err := filepath.Abs(args[0])
	if err != nil {
		return true, fmt.Errorf("%s: %w", cmd, err)
	}
	cfg, err := single.Load(args[1:], settings.OSEnv(), os.Stderr)
	if err != nil {
		return true, err
	}
	if s := cfg.Engine.Settings.Storage; s != "embedded" {
		return true, fmt.Errorf("%s: storage is %s: this command backs up the embedded store; back Cassandra up with its own tools (nodetool snapshot)", cmd, s)
	}
	if cmd == "backup" {
		return true, runBackup(dir, cfg, out)
	}
	return true, runRestore(dir, cfg, force, out)
}

// runBackup writes the backup itself when no process holds the store,
// or asks the node that does over metrics-listen.
func runBackup(dir string, cfg single.Config, out io.Writer) error {
	data := cfg.Engine.Settings.DataDir
	// Pebble's marker of its current MANIFEST: opening a directory
	// without one would make an empty store there.
	if m, _ := filepath.Glob(filepath.Join(data, "marker.manifest.*")); len(m) == 0 {
		return fmt.Errorf("backup: data-dir %s holds no store (set data-dir as the server has it)", data)
	}
	files := single.BackupFiles(cfg)
	store, err := embedded.Open(embedded.Config{Dir: data, Logger: quietLog()})
	if err == nil {
		_, err = backup.Write(context.Background(), dir, store, files, "command")
		err = errors.Join(err, store.Close())
		if err == nil {
			fmt.Fprintf(out, "backup: wrote %s (no node held the store: this command checkpointed it)\n", dir)
		}
		return err
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("backup: %w", err)
	}
	addr := cfg.API.MetricsListen
	if _, port, _ := net.SplitHostPort(addr); port == "" || port == "0" {
		return fmt.Errorf("backup: a process holds the store in %s, and metrics-listen (%q) names no port to ask it on", data, addr)
	}
	key, err := cryptoKey(cfg)
	if err != nil {
		return err
	}
	m, err := backup.Ask(context.Background(), addr, backup.Token(key), dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "backup: wrote %s (the running node on metrics-listen %s checkpointed the store; files %v)\n", dir, addr, m.Files)
	return nil
}

// cryptoKey is the key the server runs with: crypto-key, or the
// content of crypto-key-file.
func cryptoKey(cfg single.Config) (string, error) {
	if cfg.Own.CryptoKeyFile == "" {
		return cfg.Engine.CryptoKey, nil
	}
	b, err := os.ReadFile(cfg.Own.CryptoKeyFile)
	if err != nil {
		return "", fmt.Errorf("backup: crypto-key-file (the route's token comes from it): %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// runRestore puts the backup in dir in place for cfg's data-dir and key
// files.
func runRestore(dir string, cfg single.Config, force bool, out io.Writer) error {
	did, err := backup.Restore(dir, backup.Target{
		DataDir: cfg.Engine.Settings.DataDir, Files: single.BackupFiles(cfg), CryptoKey: cfg.Engine.CryptoKey,
		Force: force, Check: checkStore,
	})
	for _, line := range did {
		fmt.Fprintln(out, "restore:", line)
	}
	return err
}

// checkStore opens the store in dir and closes it.
func checkStore(dir string) error {
	s, err := embedded.Open(embedded.Config{Dir: dir, Logger: quietLog()})
	if err != nil {
		return err
	}
	return s.Close()
}

// quietLog is the log of a store the commands open: its warnings only.
func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
