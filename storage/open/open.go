package open

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
	"github.com/autopush-go/autopush/storage/scylla"
)

// Store opens the configured backend.
func Store(ctx context.Context, s storage.Settings, log *slog.Logger) (storage.Store, error) {
	switch s.Storage {
	case "embedded":
		return embedded.Open(embedded.Config{Dir: s.DataDir, Logger: log})
	case "scylla":
		cfg := scylla.DefaultConfig()
		cfg.Hosts, cfg.Keyspace, cfg.Consistency, cfg.Logger = s.CQLHosts, s.CQLKeyspace, s.CQLConsistency, log
		cfg.RouterWriteConsistency = s.CQLRouterWriteConsistency
		cfg.MessageWriteConsistency = s.CQLMessageWriteConsistency
		cfg.ReadConsistency = s.CQLReadConsistency
		return scylla.New(ctx, cfg)
	}
	return nil, fmt.Errorf("storage: unknown backend %q (embedded or scylla)", s.Storage)
}
