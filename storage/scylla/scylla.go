package scylla

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Store is the ScyllaDB/Cassandra storage.Store. It is safe for concurrent
// use: it holds only the gocql session (itself concurrent) and immutable
// settings.
type Store struct {
	session *gocql.Session
	// levels: the consistency of each class of statement.
	levels [numClasses]gocql.Consistency
	// spec: the speculative executions of reads; nil when disabled.
	spec *speculation
	// once: the retry policy of the plain statements that must not run
	// twice.
	once       onceRetry
	idleTTL    int // seconds, connection cells
	channelTTL int // seconds, channel rows and cursor
	refreshMS  int64
	closed     atomic.Bool
	// floors: "state/shard" -> the At the next due read of that push
	// index shard starts at (pushes.go).
	floors sync.Map
	// inflight: index entries newer than their pushes, read apart so
	// the floors can pass them (inflight.go).
	inflight inflight
	// buckets: the fate expiry minutes this node listed (fatesweep.go).
	buckets bucketSet
	// lostCounts: milestone increments that failed (fates.go).
	lostCounts atomic.Int64
	log        *slog.Logger
}

var _ storage.Store = (*Store)(nil)

// requiredTables are what New checks exist before serving.
// The fate tables come after the ALTER adding message.tracked in
// schema.cql, so their presence also says the column is there.
var requiredTables = []string{"router", "message", "broadcast", "push", "push_state",
	"fate", "fate_expiry", "fate_bucket", "fate_count", "receipt_sub", "receipt", "receipt_hook", "receipt_hook_by_key"}

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
	levels, err := cfg.levels()
	if err != nil {
		session.Close()
		return nil, fmt.Errorf("scylla: new: %w", err)
	}
	s := &Store{
		session:    session,
		levels:     levels,
		idleTTL:    cfg.idleTTL(),
		channelTTL: cfg.channelTTL(),
		refreshMS:  cfg.RefreshInterval.Milliseconds(),
		once:       onceRetry{retries: cfg.Retries},
		log:        cfg.Logger,
	}
	if cfg.SpeculativeAttempts > 0 {
		s.spec = newSpeculation(cfg.SpeculativeAttempts, cfg.SpeculativeDelay, sessionUpHosts(session))
	}
	return s, nil
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

// clusterConfig translates Config into gocql's. Every statement of the
// Store sets its class's level; the session's default, Consistency, is
// for the schema statements.
func clusterConfig(cfg Config, keyspace string) (*gocql.ClusterConfig, error) {
	consistency, err := parseLevel("consistency", cfg.Consistency)
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
	// Every plain statement here is idempotent: writes carry explicit
	// timestamps or rewrite the same value, deletes are deletes. So a
	// timed-out write may be retried on another host. LWTs and counter
	// increments are marked otherwise where they run (Store.query).
	c.DefaultIdempotence = true
	// A node marked down is redialed every ReconnectInterval; between
	// redials, a pool that loses its connections dials again up to 3
	// times, 1 s apart, when the failure was a timeout (a refused
	// connection ends the fill at once and the node is marked down).
	c.ReconnectInterval = cfg.ReconnectInterval
	c.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 3, Interval: time.Second}
	// Client-side timestamps (the default, kept explicit): statements
	// without USING TIMESTAMP get the writer's clock, in microseconds, the
	// same scale as the connection cells.
	c.DefaultTimestamp = true
	c.PoolConfig.HostSelectionPolicy = hostPolicy(cfg.LocalDC)
	c.Logger = driverLogger{cfg.Logger}
	c.QueryObserver = cfg.QueryObserver
	c.BatchObserver = cfg.BatchObserver
	if cfg.Username != "" {
		c.Authenticator = gocql.PasswordAuthenticator{Username: cfg.Username, Password: cfg.Password}
	}
	return c, nil
}

// hostPolicy routes each query to a replica of its partition (token aware),
// falling back to round robin within LocalDC when set, else over all nodes
// (the fallback only serves when no replica is up, or before the driver
// knows the ring). The replicas are shuffled for each query, so a hot
// partition's reads spread over its replicas. gocql keeps ring order for
// the LWTs it recognises (serial reads, and on ScyllaDB, which flags them
// in the prepared metadata, conditional writes), so that concurrent Paxos
// rounds on a partition meet at one coordinator.
func hostPolicy(localDC string) gocql.HostSelectionPolicy {
	if localDC != "" {
		return gocql.TokenAwareHostPolicy(gocql.DCAwareRoundRobinPolicy(localDC), gocql.ShuffleReplicas())
	}
	return gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy(), gocql.ShuffleReplicas())
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

// Health reads one (absent) partition of the router table at the read
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

// query builds st bound to ctx, at its class's level: reads may be
// speculated; LWTs run their Paxos phase at LOCAL_SERIAL and are never
// speculated; the statements marked once are neither speculated nor tried
// again unless they certainly did not run (onceRetry).
func (s *Store) query(ctx context.Context, st statement, args ...any) *gocql.Query {
	q := s.session.Query(st.cql, args...).WithContext(ctx).Consistency(s.levels[st.class])
	switch {
	case st.lwt:
		q.SerialConsistency(gocql.LocalSerial).Idempotent(false)
	case st.once:
		q.Idempotent(false).RetryPolicy(s.once)
	case st.class == classRead && s.spec != nil:
		q.SetSpeculativeExecutionPolicy(s.spec)
	}
	return q
}

// serialRead builds the read st at LOCAL_SERIAL, which completes any LWT
// in flight on the row first: how a caller learns whether an LWT whose
// answer was lost applied. Never speculated: each execution would be a
// Paxos round of its own.
func (s *Store) serialRead(ctx context.Context, st statement, args ...any) *gocql.Query {
	return s.session.Query(st.cql, args...).WithContext(ctx).Consistency(gocql.LocalSerial)
}

// batch builds an unlogged batch bound to ctx at class's level. Every
// batch of this package targets a single partition, so it is applied as
// one mutation: atomic and isolated on each replica, without the batchlog
// of a logged batch.
func (s *Store) batch(ctx context.Context, class opClass) *gocql.Batch {
	b := s.session.BatchWithContext(ctx, gocql.UnloggedBatch)
	b.SetConsistency(s.levels[class])
	return b
}

// uuidArg converts to the type gocql marshals without reflection.
func uuidArg(u uuid.UUID) [16]byte { return u }

// logger is where the Store reports what it does not return.
func (s *Store) logger() *slog.Logger {
	if s.log == nil {
		return slog.Default()
	}
	return s.log
}

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
