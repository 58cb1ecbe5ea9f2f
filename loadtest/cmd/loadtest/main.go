package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/autopush-go/autopush/loadtest"
	"github.com/autopush-go/autopush/loadtest/floor"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/loadtest/worker"
)

func main() {
	if floor.IsServer() {
		if err := floor.Serve(); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest floor server:", err)
			os.Exit(1)
		}
		return
	}
	if worker.IsWorker() {
		if err := worker.Run(os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest worker:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage()
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	name, rest := args[0], args[1:]
	if name == "capacity" {
		return exit(loadtest.Capacity(ctx, rest, os.Stdout, os.Stderr))
	}
	if name == "floor" {
		return exit(floor.Main(ctx, rest, os.Stdout, os.Stderr))
	}
	if name == "cluster" {
		return exit(loadtest.Cluster(ctx, rest, os.Stdout, os.Stderr))
	}
	if !slices.Contains(scenario.Names, name) {
		fmt.Fprintf(os.Stderr, "loadtest: unknown scenario %q\n\n", name)
		usage()
		return 2
	}
	cfg, err := scenario.ParseFlags(name, rest, os.Stderr)
	if err != nil {
		return exit(err)
	}
	rep, err := loadtest.Run(ctx, cfg, os.Stdout, os.Stderr)
	if err != nil {
		return exit(err)
	}
	if !rep.Pass {
		return 1
	}
	return 0
}

func exit(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, loadtest.ErrFailed):
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, err)
	return 2
}

func usage() {
	fmt.Fprintf(os.Stderr, `usage: loadtest <scenario> [flags]

Scenarios (each one's -help lists its flags):
  hold      idle user agents ramped in steps; engine memory per connection
  notify    open-loop push rates; end-to-end latency percentiles
  stored    pushes to offline user agents, reconnect and drain; exactly-once accounting
  churn     connects and disconnects while pushes flow; exactly-once accounting
  broadcast broadcast version changes fanned out while pushes flow; push latency with and without
  sender    the outbound sender above its provider's rate limit (fake Swrve with Swrve's measured latency; -provider fcm: the FCM bridge)
  faults    the replicated cluster (3 Cassandra nodes, engines, endpoints behind nginx) through node loss and restarts
  capacity  the standard profile (hold, notify, stored, churn); writes docs/capacity.md
  cluster   start that replicated cluster and keep it until SIGTERM (make cluster, make cluster-down)
  floor     the CPU per push of a bare Go push transport (HTTP, a websocket frame, a synced write) on this machine

The engines, the endpoint and the worker processes are started and stopped
by this command. With CQL_HOSTS (or -cql-hosts) set they share that
ScyllaDB/Cassandra; without it one engine process runs on the embedded
store. Reports go to -out (default %s).
`, scenario.Default(scenario.Hold).Out)
}
