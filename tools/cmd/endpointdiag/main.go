package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/autopush-go/autopush/internal/cli"
	"github.com/autopush-go/autopush/internal/endpointdiag"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/open"
)

func main() {
	if cli.PrintVersion("endpointdiag", os.Args[1:], os.Stdout) {
		return
	}
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "endpointdiag:", err)
			os.Exit(1)
		}
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("endpointdiag", flag.ContinueOnError)
	fs.SetOutput(stderr)
	key := fs.String("crypto-key", os.Getenv("CRYPTO_KEY"), "Fernet key list (env CRYPTO_KEY)")
	backend := fs.String("storage", "embedded", "storage backend: embedded or scylla")
	dataDir := fs.String("data-dir", "./data", "embedded storage directory (of a stopped node: a live node locks it, ask it with GET "+endpointdiag.Route+")")
	hosts := fs.String("cql-hosts", "127.0.0.1:9042", "ScyllaDB contact points")
	keyspace := fs.String("cql-keyspace", "autopush", "ScyllaDB keyspace")
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", endpointdiag.DefaultLimit, "messages to list of each kind (topic, pending)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: endpointdiag [flags] <endpoint URL or token, or UAID>\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("one endpoint URL or token, or UAID, is required")
	}
	keys, err := token.ParseKeys(*key)
	if err != nil {
		return fmt.Errorf("crypto-key: %w", err)
	}
	q, err := endpointdiag.Parse(keys, fs.Arg(0))
	if err != nil {
		return err
	}
	store, err := open.Store(ctx, storage.Settings{Storage: *backend, DataDir: *dataDir, CQLHosts: strings.Split(*hosts, ","),
		CQLKeyspace: *keyspace, CQLConsistency: "LOCAL_QUORUM"}, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	rep, err := endpointdiag.Diagnose(ctx, store, q, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return rep.WriteJSON(stdout)
	}
	rep.WriteText(stdout)
	return nil
}
