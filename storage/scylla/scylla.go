package scylla

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Store is the ScyllaDB/Cassandra storage.Store. It is safe for concurrent
// use: it holds only the gocql session (itself concurrent) and immutable
// settings.
type Store struct {
	session    *gocql.Session
	idleTTL    int // seconds, connection cells
	channelTTL int // seconds, channel rows and cursor
	refreshMS  int64
	closed     atomic.Bool
	// floors: "state/shard" -> the At the next due read of that push
	// index shard starts at (pushes.go).
	floors sync.Map
}

var _ storage.Store = (*Store)(nil)

// requiredTables are what New checks exist before serving.
var requiredTables = []string{"router", "message", "broadcast", "push", "push_state"}

// New connects to the cluster and checks that the schema is in place; it
// never creates it (see ApplySchema). A cluster that cannot be reached
// yields an error wrapping storage.ErrUnavailable; an invalid Config one
// wrapping storage.ErrInvalid.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scylla: new: %w", err)
	}
	session, err := connect(ctx, cfg, cfg.Keyspace)
	if err != nil {
		if errors.Is(err, gocql.ErrNoConnectionsStarted) {
			// gocql reports a missing keyspace (every connection's USE
			// failed) like an outage; tell them apart.
			if schemaErr := diagnoseKeyspace(ctx, cfg); schemaErr != nil {
				return nil, fmt.Errorf("scylla: new: %w", schemaErr)
			}
		}
		return nil, fmt.Errorf("scylla: new: %w", err)
	}
	if err := checkSchema(ctx, session, cfg.Keyspace); err != nil {
		session.Close()
		return nil, fmt.Errorf("scylla: new: %w", err)
	}
	return &Store{
		session:    session,
		idleTTL:    cfg.idleTTL(),
		channelTTL: cfg.channelTTL(),
		refreshMS:  cfg.RefreshInterval.Milliseconds(),
	}, nil
}

// connect opens a gocql session on keyspace ("" for none). Config has been
// validated, so a failure here is the cluster's: gocql formats the cause
// with %v (no unwrapping possible), so every failure to create a session is
// reported as storage.ErrUnavailable, its text kept.
func connect(ctx context.Context, cfg Config, keyspace string) (*gocql.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap("connect", err)
	}
	cluster, err := clusterConfig(cfg, keyspace)
	if err != nil {
		return nil, err
	}
	session, err := cluster.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("connect to %v: %w: %w", cfg.Hosts, storage.ErrUnavailable, err)
	}
	return session, nil
}

// clusterConfig translates Config into gocql's.
func clusterConfig(cfg Config, keyspace string) (*gocql.ClusterConfig, error) {
	consistency, err := cfg.consistency()
	if err != nil {
		return nil, err
	}
	c := gocql.NewCluster(cfg.Hosts...)
	c.Keyspace = keyspace
	c.Consistency = consistency
	c.ConnectTimeout = cfg.ConnectTimeout
	c.Timeout = cfg.Timeout
	c.WriteTimeout = cfg.Timeout
	c.NumConns = cfg.NumConns
	// gocql's default 200µs write coalescing measured at ~1.8ms added to
	// every serial query against a local Cassandra 5 (2.2ms vs 0.43ms per
	// SELECT), and parallel throughput improved without it too (SaveMessage
	// with 16 callers: 127µs to 69µs per call).
	c.WriteCoalesceWaitTime = 0
	c.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: cfg.Retries}
	// Every statement here is idempotent: writes carry explicit timestamps
	// or rewrite the same value, deletes are deletes. So a timed-out write
	// may be retried on another host.
	c.DefaultIdempotence = true
	// Client-side timestamps (the default, kept explicit): statements
	// without USING TIMESTAMP get the writer's clock, in microseconds, the
	// same scale as the connection cells.
	c.DefaultTimestamp = true
	c.PoolConfig.HostSelectionPolicy = hostPolicy(cfg.LocalDC)
	c.Logger = driverLogger{cfg.Logger}
	c.QueryObserver = cfg.QueryObserver
	if cfg.Username != "" {
		c.Authenticator = gocql.PasswordAuthenticator{Username: cfg.Username, Password: cfg.Password}
	}
	return c, nil
}

// hostPolicy routes each query to a replica of its partition (token aware),
// falling back to round robin within LocalDC when set, else over all nodes.
func hostPolicy(localDC string) gocql.HostSelectionPolicy {
	if localDC != "" {
		return gocql.TokenAwareHostPolicy(gocql.DCAwareRoundRobinPolicy(localDC))
	}
	return gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
}

// diagnoseKeyspace checks the schema over a session without keyspace, for
// when a session on the keyspace could not be opened. It returns nil when
// the schema is fine or the cluster is unreachable (the outage is the
// better explanation then).
func diagnoseKeyspace(ctx context.Context, cfg Config) error {
	session, err := connect(ctx, cfg, "")
	if err != nil {
		return nil
	}
	defer session.Close()
	return checkSchema(ctx, session, cfg.Keyspace)
}

// checkSchema fails fast, with a hint, when ApplySchema has not been run.
func checkSchema(ctx context.Context, session *gocql.Session, keyspace string) error {
	found := map[string]bool{}
	iter := session.Query(qTables, keyspace).WithContext(ctx).Iter()
	var name string
	for iter.Scan(&name) {
		found[name] = true
	}
	if err := iter.Close(); err != nil {
		return wrap("check schema", err)
	}
	for _, t := range requiredTables {
		if !found[t] {
			return fmt.Errorf("check schema: table %s.%s does not exist: apply this version's schema first (cqlschema, or scylla.ApplySchema; docs/operations.md)", keyspace, t)
		}
	}
	return nil
}

// Health reads one (absent) partition of the router table at the configured
// consistency: unlike a query on a system table it needs the keyspace's
// replicas, which is what serving requires. 1 RT. Safe for concurrent use.
func (s *Store) Health(ctx context.Context) error {
	if err := s.open("health"); err != nil {
		return err
	}
	var connectedAt int64
	err := s.query(ctx, qHealth, uuidArg(uuid.Nil)).Scan(&connectedAt)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return healthError(err)
	}
	return nil
}

// healthError reports any failure of the health query as unavailable: the
// query itself is known good, so whatever failed, the backend cannot serve.
func healthError(err error) error {
	if e := wrap("health", err); unavailable(err) {
		return e
	}
	return fmt.Errorf("scylla: health: %w: %w", storage.ErrUnavailable, err)
}

// Close closes the session. Calls after Close fail with
// storage.ErrUnavailable; closing twice is a no-op. Safe for concurrent
// use.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.session.Close()
	}
	return nil
}

// open fails once the store is closed. gocql would answer ErrSessionClosed
// itself, but checking first keeps the answer uniform (and cheap) even for
// methods that make several queries.
func (s *Store) open(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("scylla: %s: store is closed: %w", op, storage.ErrUnavailable)
	}
	return nil
}

// query builds a statement bound to ctx.
func (s *Store) query(ctx context.Context, stmt string, args ...any) *gocql.Query {
	return s.session.Query(stmt, args...).WithContext(ctx)
}

// batch builds an unlogged batch bound to ctx. Every batch of this package
// targets a single partition, so it is applied as one mutation: atomic and
// isolated on each replica, without the batchlog of a logged batch.
func (s *Store) batch(ctx context.Context) *gocql.Batch {
	return s.session.BatchWithContext(ctx, gocql.UnloggedBatch)
}

// uuidArg converts to the type gocql marshals without reflection.
func uuidArg(u uuid.UUID) [16]byte { return u }

// driverLogger sends gocql's log lines to slog instead of the standard
// logger, so they carry the service's format and fields.
type driverLogger struct{ l *slog.Logger }

func (d driverLogger) logger() *slog.Logger {
	if d.l == nil {
		return slog.Default()
	}
	return d.l
}

func (d driverLogger) Print(v ...any) { d.logger().Warn(fmt.Sprint(v...), "component", "gocql") }
func (d driverLogger) Printf(format string, v ...any) {
	d.logger().Warn(fmt.Sprintf(format, v...), "component", "gocql")
}
func (d driverLogger) Println(v ...any) { d.logger().Warn(fmt.Sprintln(v...), "component", "gocql") }
