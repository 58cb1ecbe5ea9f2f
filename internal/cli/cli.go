package cli

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Main runs run and exits 1 with "name: error" on stderr when it fails;
// -help (flag.ErrHelp) has printed the usage already and exits 0.
func Main(name string, run func() error) {
	if err := run(); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
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
func (s Signals) Wait(log *slog.Logger, reload func()) {
	for got := range s {
		if got == syscall.SIGHUP && reload != nil {
			reload()
			continue
		}
		log.Info("signal received, shutting down", "signal", got.String())
		return
	}
}
