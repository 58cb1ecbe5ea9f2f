// Package open builds a storage.Store from a tier's settings, so the
// binaries and tools choose and configure a backend the same way.
package open

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
	"github.com/autopush-go/autopush/storage/scylla"
)

// Settings selects and configures a backend. Both tiers embed it in their
// config, so the storage settings (and their AUTOCONNECT__/AUTOEND__
// variables and flags) are defined once.
type Settings struct {
	// Storage is "embedded" or "scylla". Default "embedded".
	Storage string `conf:"storage" help:"storage backend: embedded or scylla"`
	// DataDir holds the embedded store. Default "./data".
	DataDir string `conf:"data-dir" help:"embedded storage directory"`
	// CQLHosts, CQLKeyspace, CQLConsistency configure the scylla backend.
	// Defaults "127.0.0.1:9042", "autopush", "LOCAL_QUORUM".
	CQLHosts       []string `conf:"cql-hosts" help:"ScyllaDB contact points host:port,..."`
	CQLKeyspace    string   `conf:"cql-keyspace" help:"ScyllaDB keyspace"`
	CQLConsistency string   `conf:"cql-consistency" help:"ScyllaDB consistency level"`
}

// DefaultSettings returns the defaults documented on Settings.
func DefaultSettings() Settings {
	return Settings{
		Storage:        "embedded",
		DataDir:        "./data",
		CQLHosts:       []string{"127.0.0.1:9042"},
		CQLKeyspace:    "autopush",
		CQLConsistency: "LOCAL_QUORUM",
	}
}

// Validate reports a backend that does not exist.
func (s *Settings) Validate() error {
	if s.Storage != "embedded" && s.Storage != "scylla" {
		return fmt.Errorf("storage %q is not embedded or scylla", s.Storage)
	}
	return nil
}

// Store opens the configured backend.
func Store(ctx context.Context, s Settings, log *slog.Logger) (storage.Store, error) {
	switch s.Storage {
	case "embedded":
		return embedded.Open(embedded.Config{Dir: s.DataDir, Logger: log})
	case "scylla":
		cfg := scylla.DefaultConfig()
		cfg.Hosts, cfg.Keyspace, cfg.Consistency, cfg.Logger = s.CQLHosts, s.CQLKeyspace, s.CQLConsistency, log
		return scylla.New(ctx, cfg)
	}
	return nil, fmt.Errorf("storage: unknown backend %q (embedded or scylla)", s.Storage)
}
