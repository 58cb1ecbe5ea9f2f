// Package open builds a storage.Store from a tier's settings, so the
// binaries and tools choose a backend the same way.
package open

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
	"github.com/autopush-go/autopush/storage/scylla"
)

// Config selects and configures a backend.
type Config struct {
	Backend        string // "embedded" or "scylla"
	DataDir        string // embedded
	CQLHosts       []string
	CQLKeyspace    string
	CQLConsistency string
	Logger         *slog.Logger
}

// Store opens the configured backend.
func Store(ctx context.Context, c Config) (storage.Store, error) {
	switch c.Backend {
	case "embedded":
		return embedded.Open(embedded.Config{Dir: c.DataDir, Logger: c.Logger})
	case "scylla":
		cfg := scylla.DefaultConfig()
		cfg.Hosts, cfg.Keyspace, cfg.Consistency, cfg.Logger = c.CQLHosts, c.CQLKeyspace, c.CQLConsistency, c.Logger
		return scylla.New(ctx, cfg)
	}
	return nil, fmt.Errorf("storage: unknown backend %q (embedded or scylla)", c.Backend)
}
