package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/autopush-go/autopush/storage"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
)

// Store is the embedded backend. All methods are safe for concurrent use.
//
// Locking: read-modify-write sequences of one user (router record, topic
// messages) hold that user's stripe of locks; plain inserts and deletes of
// timestamp messages and channels take none. Every call holds mu for
// reading so Close cannot pull the database out from under it. Lock order:
// mu, then one stripe, rateMu or claimMu; never two of those.
type Store struct {
	cfg         Config
	db          *pebble.DB
	wo          *pebble.WriteOptions
	compactions *compactScheduler // Pebble's, kept for tests
	busy        atomic.Int64      // calls in progress: WAL syncs wait to be shared when many are (syncShare)
	log         *slog.Logger
	mu          sync.RWMutex
	closed      bool
	stripes     [256]sync.Mutex
	counts      [256]stripeCounts // each stripe's, under its lock (counts.go)
	// rateMu serializes the rate shares' compare-and-set (rateshares.go),
	// claimMu the idempotency claims' (idempotency.go).
	rateMu, claimMu sync.Mutex
	stop            chan struct{}
	swept           sync.WaitGroup
	// closeOnce makes Close idempotent.
	closeOnce sync.Once
}

var _ storage.Store = (*Store)(nil)

// Open opens (or creates) the store under cfg.Dir and starts its sweeper.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cache := pebble.NewCache(cfg.CacheBytes)
	defer cache.Unref()
	s := &Store{cfg: cfg, wo: pebble.Sync, log: cfg.Logger, stop: make(chan struct{})}
	opts := &pebble.Options{
		Cache:              cache,
		MemTableSize:       cfg.MemTableBytes,
		Logger:             pebbleLogger{cfg.Logger},
		WALMinSyncInterval: s.syncShare,
		FS:                 zeroedWAL{FS: vfs.Default, size: int64(cfg.MemTableBytes + cfg.MemTableBytes/4)},
	}
	// Pebble compacts L0 into the base level once L0 is this many
	// sublevels deep; with small memtables and keys spread over every user
	// agent each such compaction rewrites most of the base level
	// (Config.L0Compaction). Writes stop at three times as deep.
	opts.L0CompactionThreshold = cfg.L0Compaction
	opts.L0StopWritesThreshold = 3 * cfg.L0Compaction
	// A point read (a fate, a record, a count not yet in memory) skips
	// every file whose bloom filter rules its key out: with L0 that deep,
	// without them a read searched each file's index.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	s.compactions = newCompactScheduler()
	opts.Experimental.CompactionScheduler = s.compactions
	db, err := pebble.Open(cfg.Dir, opts)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		// Pebble's lock on the directory: another process has it open.
		pid, command := lockHolder(cfg.Dir)
		return nil, &LockedError{Dir: cfg.Dir, PID: pid, Command: command, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: open %s: %w", cfg.Dir, err)
	}
	s.db = db
	if cfg.NoSync {
		s.wo = pebble.NoSync
	}
	s.swept.Add(1)
	go s.sweepLoop()
	return s, nil
}

// syncShare is Pebble's WALMinSyncInterval: Config.SyncShare while at
// least Config.SyncShareFrom calls are in progress, else no wait.
func (s *Store) syncShare() time.Duration {
	if s.cfg.SyncShare > 0 && s.busy.Load() >= int64(s.cfg.SyncShareFrom) {
		return s.cfg.SyncShare
	}
	return 0
}

// enter guards a call against Close; callers defer s.mu.RUnlock().
func (s *Store) enter(ctx context.Context, op string) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return fmt.Errorf("embedded: %s: store closed: %w", op, storage.ErrUnavailable)
	}
	if err := ctx.Err(); err != nil {
		s.mu.RUnlock()
		return fmt.Errorf("embedded: %s: %w: %w", op, storage.ErrUnavailable, err)
	}
	s.busy.Add(1)
	return nil
}

// leave ends a call that enter let in.
func (s *Store) leave() {
	s.busy.Add(-1)
	s.mu.RUnlock()
}

func (s *Store) stripe(uaid uuid.UUID) *sync.Mutex { return &s.stripes[stripeIndex(uaid)] }

// stripeIndex is the stripe of uaid (a fate's counts are split by it).
func stripeIndex(uaid uuid.UUID) byte { return uaid[15] }

// failed wraps an error of Pebble itself: the disk, not the caller.
func failed(op string, err error) error {
	return fmt.Errorf("embedded: %s: %w: %w", op, storage.ErrUnavailable, err)
}

// get returns a copy of the value at key, or nil when there is none.
func (s *Store) get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	return out, closer.Close()
}

func (s *Store) getRecord(uaid uuid.UUID) (record, bool, error) {
	v, err := s.get(userKey(uaid))
	if err != nil || v == nil {
		return record{}, false, err
	}
	rec, err := decodeUser(v)
	if err != nil {
		return record{}, false, fmt.Errorf("user %s: %w", uaid, err)
	}
	rec.UAID = uaid
	return rec, true, nil
}

func (s *Store) commit(b *pebble.Batch) error {
	defer b.Close()
	return b.Commit(s.wo)
}

// GetUser implements storage.Store. One local read.
func (s *Store) GetUser(ctx context.Context, uaid uuid.UUID) (storage.User, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return storage.User{}, fmt.Errorf("embedded: get user: %w", err)
	}
	if err := s.enter(ctx, "get user"); err != nil {
		return storage.User{}, err
	}
	defer s.leave()
	rec, ok, err := s.getRecord(uaid)
	if err != nil {
		return storage.User{}, failed("get user", err)
	}
	if !ok || rec.ExpiresAt <= time.Now().UnixNano() {
		return storage.User{}, fmt.Errorf("embedded: get user %s: %w", uaid, storage.ErrNotFound)
	}
	return rec.User, nil
}

// ConnectNew implements storage.Store: Connect's write and the first
// channel in one durable commit, nothing read (no Pebble read, so no
// block-cache fill, for a new user agent's first register): one commit
// and one fsync per new user agent (docs/benchmarks.md). Were the uaid
// not new after all, the old record's expiry entry would stay behind,
// harmless: the sweeper checks the record's own expiry.
func (s *Store) ConnectNew(ctx context.Context, u storage.User, chid uuid.UUID) error {
	if err := storage.ValidateUser(&u); err != nil {
		return fmt.Errorf("embedded: connect new: %w", err)
	}
	if err := storage.ValidateChannel(u.UAID, chid); err != nil {
		return fmt.Errorf("embedded: connect new: %w", err)
	}
	if err := s.enter(ctx, "connect new"); err != nil {
		return err
	}
	defer s.leave()
	u.Cursor = 0
	b := s.recordBatch(u, time.Now())
	b.Set(channelKey(u.UAID, chid), nil, nil)
	if err := s.commit(b); err != nil {
		return failed("connect new", err)
	}
	return nil
}

// recordBatch is a batch writing u's record and its expiry entry.
func (s *Store) recordBatch(u storage.User, now time.Time) *pebble.Batch {
	if u.LastConnect == 0 {
		u.LastConnect = now.UnixMilli()
	}
	rec := record{User: u, ExpiresAt: now.Add(s.cfg.IdleTTL).UnixNano()}
	b := s.db.NewBatch()
	b.Set(userKey(u.UAID), encodeUser(&rec), nil)
	b.Set(expiryKey(rec.ExpiresAt, userKey(u.UAID)), nil, nil)
	return b
}

// Connect implements storage.Store. One local read and one durable write,
// under the user's stripe lock so the connected_at comparison is exact.
func (s *Store) Connect(ctx context.Context, u storage.User) error {
	_, err := s.connect(ctx, "connect", u, false)
	return err
}

// Reconnect implements storage.Store: Connect, refused (nothing written)
// without a live record of u.RouterType.
func (s *Store) Reconnect(ctx context.Context, u storage.User) (storage.User, error) {
	return s.connect(ctx, "reconnect", u, true)
}

// connect records the connection u and returns the live record it
// replaced (the zero User when there was none). returning: only over a
// live record of u.RouterType, else ErrNotFound.
func (s *Store) connect(ctx context.Context, op string, u storage.User, returning bool) (storage.User, error) {
	if err := storage.ValidateUser(&u); err != nil {
		return storage.User{}, fmt.Errorf("embedded: %s: %w", op, err)
	}
	if err := s.enter(ctx, op); err != nil {
		return storage.User{}, err
	}
	defer s.leave()
	l := s.stripe(u.UAID)
	l.Lock()
	defer l.Unlock()

	old, found, err := s.getRecord(u.UAID)
	if err != nil {
		return storage.User{}, failed(op, err)
	}
	now := time.Now()
	live := found && old.ExpiresAt > now.UnixNano()
	if returning && (!live || old.RouterType != u.RouterType) {
		return storage.User{}, fmt.Errorf("embedded: %s %s: %w", op, u.UAID, storage.ErrNotFound)
	}
	var prev storage.User
	if live {
		prev = old.User
		if old.ConnectedAt > u.ConnectedAt {
			return prev, fmt.Errorf("embedded: %s %s at %d: newer connection at %d: %w",
				op, u.UAID, u.ConnectedAt, old.ConnectedAt, storage.ErrConflict)
		}
		u.Cursor = old.Cursor
	} else {
		u.Cursor = 0
	}
	b := s.recordBatch(u, now)
	if found {
		b.Delete(expiryKey(old.ExpiresAt, userKey(u.UAID)), nil)
	}
	if err := s.commit(b); err != nil {
		return prev, failed(op, err)
	}
	return prev, nil
}

// updateRecord applies change to the live record of uaid under its stripe
// lock and writes it back when change reports a difference. A missing or
// expired user is left alone. One local read, at most one durable write.
func (s *Store) updateRecord(ctx context.Context, op string, uaid uuid.UUID, change func(*record) bool) error {
	if err := storage.ValidateUAID(uaid); err != nil {
		return fmt.Errorf("embedded: %s: %w", op, err)
	}
	if err := s.enter(ctx, op); err != nil {
		return err
	}
	defer s.leave()
	l := s.stripe(uaid)
	l.Lock()
	defer l.Unlock()
	rec, found, err := s.getRecord(uaid)
	if err != nil {
		return failed(op, err)
	}
	if !found || rec.ExpiresAt <= time.Now().UnixNano() || !change(&rec) {
		return nil
	}
	if err := s.db.Set(userKey(uaid), encodeUser(&rec), s.wo); err != nil {
		return failed(op, err)
	}
	return nil
}

// ClearNode implements storage.Store.
func (s *Store) ClearNode(ctx context.Context, uaid uuid.UUID, connectedAt int64) error {
	return s.updateRecord(ctx, "clear node", uaid, func(r *record) bool {
		if r.ConnectedAt != connectedAt || r.NodeID == "" {
			return false
		}
		r.NodeID = ""
		return true
	})
}

// AdvanceCursor implements storage.Store.
func (s *Store) AdvanceCursor(ctx context.Context, uaid uuid.UUID, sortKey uint64) error {
	return s.updateRecord(ctx, "advance cursor", uaid, func(r *record) bool {
		if sortKey <= r.Cursor {
			return false
		}
		r.Cursor = sortKey
		return true
	})
}

// DropUser implements storage.Store. One local read and one durable write
// of range deletions; the expiry entries of the user's messages are left
// for the sweeper, which finds their targets gone.
func (s *Store) DropUser(ctx context.Context, uaid uuid.UUID) error {
	return s.drop(ctx, "drop user", uaid, math.MaxInt64)
}

// DropUserAt implements storage.Store: DropUser, unless the record read
// under the user's lock is of a newer connection.
func (s *Store) DropUserAt(ctx context.Context, uaid uuid.UUID, connectedAt int64) error {
	return s.drop(ctx, "drop user at", uaid, connectedAt)
}

// drop drops uaid under its lock unless its record is of a connection
// newer than connectedAt.
func (s *Store) drop(ctx context.Context, op string, uaid uuid.UUID, connectedAt int64) error {
	if err := storage.ValidateUAID(uaid); err != nil {
		return fmt.Errorf("embedded: %s: %w", op, err)
	}
	if err := s.enter(ctx, op); err != nil {
		return err
	}
	defer s.leave()
	l := s.stripe(uaid)
	l.Lock()
	defer l.Unlock()
	rec, found, err := s.getRecord(uaid)
	switch {
	case err != nil:
		return failed(op, err)
	case !found:
		err = s.dropLocked(uaid, nil) // channels or messages may be left
	case rec.ConnectedAt > connectedAt:
		return nil // a newer connection: it stays
	default:
		err = s.dropLocked(uaid, &rec)
	}
	if err != nil {
		return failed(op, err)
	}
	return nil
}

// dropLocked deletes uaid's record (rec, nil when there is none),
// channels and messages; the caller holds the user's lock.
func (s *Store) dropLocked(uaid uuid.UUID, rec *record) error {
	b := s.db.NewBatch()
	if rec != nil {
		b.Delete(expiryKey(rec.ExpiresAt, userKey(uaid)), nil)
	}
	b.Delete(userKey(uaid), nil)
	for _, p := range [][]byte{channelPrefix(uaid), append([]byte{prefixMessage}, uaid[:]...)} {
		b.DeleteRange(p, prefixEnd(p), nil)
	}
	return s.commit(b)
}

// Health implements storage.Store: a write and a read of a probe key.
func (s *Store) Health(ctx context.Context) error {
	if err := s.enter(ctx, "health"); err != nil {
		return err
	}
	defer s.leave()
	// Below every prefix (keys.go), so no prefix scan meets it.
	probe := []byte("\x00health")
	if err := s.db.Set(probe, []byte(time.Now().UTC().Format(time.RFC3339)), s.wo); err != nil {
		return failed("health", err)
	}
	if _, err := s.get(probe); err != nil {
		return failed("health", err)
	}
	return nil
}

// Close stops the sweeper, waits for calls in flight and closes the
// database. Safe to call twice.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		// The sweeper takes mu itself, so it is stopped before mu is.
		close(s.stop)
		s.swept.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		if e := s.db.Close(); e != nil {
			err = fmt.Errorf("embedded: close: %w", e)
		}
	})
	return err
}

// pebbleLogger sends Pebble's own logging to slog; its info lines
// (compactions, flushes) are debug detail for us.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	panic(fmt.Sprintf("pebble: "+format, args...))
}
