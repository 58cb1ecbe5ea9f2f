package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/autopush-go/autopush/internal/buildinfo"
)

// Main runs run and exits 1 with "name: error" on stderr when it fails;
// -help (flag.ErrHelp) has printed the usage already and exits 0. A
// version request (PrintVersion) prints the version and runs nothing.
func Main(name string, run func() error) {
	if PrintVersion(name, os.Args[1:], os.Stdout) {
		return
	}
	if err := run(); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// PrintVersion reports whether args ask for the version ("version",
// "-version" or "--version" as the first argument), printing "name
// VERSION (commit ...)" (buildinfo.Info.String) to out when they do. The
// mains call it before their settings or flags are parsed, so the
// request never starts anything and no other argument is looked at.
func PrintVersion(name string, args []string, out io.Writer) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "version", "-version", "--version":
		fmt.Fprintln(out, name, buildinfo.Read())
		return true
	}
	return false
}

// Signals are a node's stop (SIGTERM, SIGINT) and reload (SIGHUP)
// requests. Subscribe before the node logs its start line: a supervisor
// may send SIGTERM as soon as it sees the node up, and the node must
// stop gracefully, not die.
type Signals chan os.Signal

// Subscribe starts catching the stop signals, and SIGHUP when reload.
func Subscribe(reload bool) Signals {
	sig := make(Signals, 1)
	sigs := []os.Signal{syscall.SIGTERM, syscall.SIGINT}
	if reload {
		sigs = append(sigs, syscall.SIGHUP)
	}
	signal.Notify(sig, sigs...)
	return sig
}

// Wait returns at the first stop signal, logging it; each SIGHUP before
// it calls reload.
func (s Signals) Wait(log *slog.Logger, reload func()) { s.WaitOr(log, reload, nil) }

// WaitOr is Wait that also returns when the node fails on its own: then
// with the error failed delivered (nil: it cannot fail).
func (s Signals) WaitOr(log *slog.Logger, reload func(), failed <-chan error) error {
	for {
		select {
		case err := <-failed:
			return err
		case got := <-s:
			if got == syscall.SIGHUP && reload != nil {
				reload()
				continue
			}
			log.Info("signal received, shutting down", "signal", got.String())
			return nil
		}
	}
}

// ConfigOK is the outcome of -check-config: check's error (Main exits 1
// with it), or "configuration OK" on stdout.
func ConfigOK(check func() error) error {
	if err := check(); err != nil {
		return err
	}
	fmt.Println("configuration OK")
	return nil
}
