package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/autopush-go/autopush/internal/cli"
	"github.com/autopush-go/autopush/storage/scylla"
)

func main() {
	if cli.PrintVersion("cqlschema", os.Args[1:], os.Stdout) {
		return
	}
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // asked for: not a failure
		}
		fmt.Fprintln(os.Stderr, "cqlschema:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := scylla.DefaultConfig()
	fs := flag.NewFlagSet("cqlschema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hosts := fs.String("hosts", envOr("CQL_HOSTS", strings.Join(def.Hosts, ",")), "contact points, host[:port],... (env CQL_HOSTS)")
	keyspace := fs.String("keyspace", def.Keyspace, "keyspace to create the tables in")
	replication := fs.String("replication", "{'class': 'NetworkTopologyStrategy', 'replication_factor': 3}",
		"replication map of the keyspace (a single test node: {'class': 'SimpleStrategy', 'replication_factor': 1})")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cqlschema [flags]\n\nApplies the autopush schema (idempotent). Credentials: env CQL_USERNAME, CQL_PASSWORD.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := def
	cfg.Hosts = strings.Split(*hosts, ",")
	cfg.Keyspace = *keyspace
	cfg.Username, cfg.Password = os.Getenv("CQL_USERNAME"), os.Getenv("CQL_PASSWORD")
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := scylla.ApplySchema(ctx, cfg, *replication); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema applied to keyspace %s on %s\n", cfg.Keyspace, *hosts)
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
