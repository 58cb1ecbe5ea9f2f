package scylla

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// The outbound sender's pushes: table push (one partition each) and its
// index push_state ((state, shard), at, id). See schema.cql for why.
//
// Every change of a push is a lightweight transaction (IF version = ?):
// claims and the start of an attempt fence other nodes, so they must be
// linearizable; and a plain write after a Paxos write of the same row
// would be ordered by the writer's clock against the Paxos ballot's (the
// coordinator's), so a writer whose clock runs behind would have its
// outcome shadowed by the earlier attempt row, and the push would look
// interrupted and be sent again. The create is the exception: a plain
// write at timestamp 1 (createTimestamp), below every ballot, so every
// later change wins over it whatever the clocks say, and a retried create
// is harmless.
const (
	pushColumns = `provider, platform, prototype, push_key, message, cron, state, at, owner,
		created, updated, version, ttl, attempts, bridge, client`
	pushSet = `provider = ?, platform = ?, prototype = ?, push_key = ?, message = ?, cron = ?,
		state = ?, at = ?, owner = ?, created = ?, updated = ?, version = ?, ttl = ?, attempts = ?, bridge = ?, client = ?`
)

var (
	// UPDATE, never INSERT: no row marker outlives the cells.
	qSavePush   = messageWrite(`UPDATE push USING TIMESTAMP 1 SET ` + pushSet + ` WHERE id = ?`)
	qUpdatePush = messageLWT(`UPDATE push USING TTL ? SET ` + pushSet + ` WHERE id = ? IF version = ?`)
	qGetPush    = read(`SELECT ` + pushColumns + ` FROM push WHERE id = ?`)

	qIndexAdd = messageWrite(`INSERT INTO push_state (state, shard, at, id, version) VALUES (?, ?, ?, ?, ?) USING TTL ?`)
	qIndexDel = messageWrite(`DELETE FROM push_state WHERE state = ? AND shard = ? AND at = ? AND id = ?`)
	qIndexDue = read(`SELECT at, id, version FROM push_state
		WHERE state = ? AND shard = ? AND at >= ? AND at <= ? LIMIT ?`)
	qIndexPage = read(`SELECT at, id, version FROM push_state
		WHERE state = ? AND shard = ? AND (at, id) > (?, ?) LIMIT ?`)
)

// pushShards is how many partitions each state's index has. Changing it
// orphans the entries of the shards that go away: it is part of the schema.
const pushShards = 16

// floorMargin is how far below the due time of its last read a state
// shard's read floor stays: entries are written with At no earlier than
// storage.MaxPushBackdate before the writer's now, and this leaves a
// minute more for clock skew between nodes and a write's latency. The
// reads walk the tombstones of the entries deleted within that window:
// at 300 pushes a second, about 2,000 per shard.
const floorMargin = storage.MaxPushBackdate + time.Minute

func pushShard(id uuid.UUID) int8 { return int8(id[15] % pushShards) }

// pushArgs are the values of pushSet, in order.
func pushArgs(p *storage.Push) ([]any, error) {
	log, err := json.Marshal(p.Attempts)
	if err != nil {
		return nil, err
	}
	bridge := ""
	if p.Bridge != nil {
		b, err := json.Marshal(p.Bridge)
		if err != nil {
			return nil, err
		}
		bridge = string(b)
	}
	return []any{p.Provider, p.Platform, p.PrototypeKey, p.PushKey, p.Message, p.CronExpression,
		string(p.State), p.At, p.Owner, p.Created, p.Updated, p.Version, int32(p.TTL), string(log), bridge, p.Client}, nil
}

// indexTTL is the TTL of p's index entry: the push's own, so the entries of
// finished pushes expire with them.
func indexTTL(p *storage.Push) int32 { return int32(min(p.TTL, math.MaxInt32)) }

func (s *Store) addIndex(ctx context.Context, p *storage.Push) error {
	return s.query(ctx, qIndexAdd, string(p.State), pushShard(p.ID), p.At, uuidArg(p.ID), p.Version, indexTTL(p)).Exec()
}

func (s *Store) delIndex(ctx context.Context, state storage.PushState, at int64, id uuid.UUID) error {
	return s.query(ctx, qIndexDel, string(state), pushShard(id), at, uuidArg(id)).Exec()
}

// SavePush implements storage.PushStore: the state index entry and the
// by-key entries (in parallel), then the push, then its open entry
// (pushindex.go), all plain writes (idempotent: the driver may retry
// them). 3 RT.
func (s *Store) SavePush(ctx context.Context, p storage.Push) error {
	if err := storage.ValidatePush(&p); err != nil {
		return fmt.Errorf("scylla: save push: %w", err)
	}
	if p.Version != 1 || p.TTL != 0 {
		return fmt.Errorf("scylla: save push: a new push has version 1 and no TTL: %w", storage.ErrInvalid)
	}
	if err := s.open("save push"); err != nil {
		return err
	}
	args, err := pushArgs(&p)
	if err != nil {
		return fmt.Errorf("scylla: save push: %w", err)
	}
	err = each(2, func(i int) error {
		if i == 0 {
			return s.addIndex(ctx, &p)
		}
		return s.putByKey(ctx, &p)
	})
	if err != nil {
		return wrap("save push: index", err)
	}
	if err := s.query(ctx, qSavePush, append(args, uuidArg(p.ID))...).Exec(); err != nil {
		return wrap("save push", err)
	}
	if !p.State.Final() {
		if err := s.putOpen(ctx, &p); err != nil {
			return wrap("save push: open index", err)
		}
	}
	return nil
}

// GetPush implements storage.PushStore. 1 RT, at SERIAL consistency's
// partner: the configured consistency sees every committed LWT.
func (s *Store) GetPush(ctx context.Context, id uuid.UUID) (storage.Push, error) {
	if err := s.open("get push"); err != nil {
		return storage.Push{}, err
	}
	p, found, err := s.readPush(ctx, id, false)
	if err != nil {
		return storage.Push{}, wrap("get push", err)
	}
	if !found {
		return storage.Push{}, fmt.Errorf("scylla: get push %s: %w", id, storage.ErrNotFound)
	}
	return p, nil
}

// readPush reads a push at the read consistency, or at LOCAL_SERIAL when
// serial.
func (s *Store) readPush(ctx context.Context, id uuid.UUID, serial bool) (storage.Push, bool, error) {
	p := storage.Push{ID: id}
	var state, log, bridge string
	var client *string // absent on rows written before the column
	var version *int64
	var ttl int32
	query := s.query
	if serial {
		query = s.serialRead
	}
	err := query(ctx, qGetPush, uuidArg(id)).Scan(&p.Provider, &p.Platform, &p.PrototypeKey, &p.PushKey,
		&p.Message, &p.CronExpression, &state, &p.At, &p.Owner, &p.Created, &p.Updated, &version, &ttl, &log, &bridge, &client)
	if errors.Is(err, gocql.ErrNotFound) || err == nil && version == nil {
		return storage.Push{}, false, nil // no row, or only expired cells left
	}
	if err != nil {
		return storage.Push{}, false, err
	}
	p.State, p.Version, p.TTL = storage.PushState(state), *version, int64(ttl)
	if client != nil {
		p.Client = *client
	}
	if log != "" {
		if err := json.Unmarshal([]byte(log), &p.Attempts); err != nil {
			return storage.Push{}, false, fmt.Errorf("push %s: attempt log: %w", id, err)
		}
	}
	if bridge != "" {
		p.Bridge = new(storage.PushBridge)
		if err := json.Unmarshal([]byte(bridge), p.Bridge); err != nil {
			return storage.Push{}, false, fmt.Errorf("push %s: bridge: %w", id, err)
		}
	}
	return p, true, nil
}

// UpdatePush implements storage.PushStore: the new index entry first, then
// the LWT, then the old entry's delete, so a crash between the steps leaves
// a stale entry (skipped by readers), never a push its state's index does
// not list. 3 RT when the state or At changes, else 1. A push it makes
// final also leaves its open index before the LWT (1 RT more), and its
// by-key entries take its TTL after it (1 RT more, pushindex.go).
func (s *Store) UpdatePush(ctx context.Context, prev *storage.Push, next storage.Push) error {
	if err := storage.ValidatePushUpdate(prev, &next); err != nil {
		return fmt.Errorf("scylla: update push: %w", err)
	}
	if err := s.open("update push"); err != nil {
		return err
	}
	moved := prev.State != next.State || prev.At != next.At || next.TTL != prev.TTL
	if moved {
		if err := s.addIndex(ctx, &next); err != nil {
			return wrap("update push: index", err)
		}
	}
	// A push leaves the open index before it is final, never after: a
	// crash between leaves it uncounted, not a finished push counted.
	finishing := !prev.State.Final() && next.State.Final()
	if finishing {
		if err := s.delOpen(ctx, prev); err != nil {
			if moved {
				_ = s.delIndex(ctx, next.State, next.At, next.ID)
			}
			return wrap("update push: open index", err)
		}
	}
	applied, cur, err := s.casPush(ctx, prev.Version, &next)
	if err != nil {
		return err
	}
	if !applied {
		// The new index entry stays: it may be the winner's too (the same
		// state and At), and a reader finds it stale otherwise and
		// deletes it (resolve).
		if finishing {
			// Counted again unless another write finished it (rare: a
			// withdrawal racing the send's outcome).
			if p, found, err := s.readPush(ctx, prev.ID, true); err == nil && found && !p.State.Final() {
				_ = s.putOpen(ctx, &p)
			}
		}
		return notApplied(&next, prev.Version, cur)
	}
	// The push is updated: what follows only tidies its indexes. An old
	// state entry left behind is merely stale; by-key entries left
	// without the TTL are skipped once the push is gone.
	if moved && (prev.State != next.State || prev.At != next.At) {
		_ = s.delIndex(ctx, prev.State, prev.At, prev.ID)
	}
	if next.TTL != prev.TTL {
		_ = s.putByKey(ctx, &next)
	}
	if prev.State.Final() && !next.State.Final() {
		_ = s.putOpen(ctx, &next)
	}
	return nil
}

// casPush writes next only if the stored version is still prev: an LWT.
// An error with an unknown outcome (a timeout) is settled by a serial
// read. So is an answer that it did not apply because next's own version
// is stored: the driver ran it again after a server's timeout, or a Paxos
// round left unfinished was completed by this one, and it found its own
// write (reported as a conflict, the push lost its new index entry:
// TestClusterSenderFaults). When it did not apply, cur is the stored
// version (nil: no push).
func (s *Store) casPush(ctx context.Context, prev int64, next *storage.Push) (applied bool, cur *int64, err error) {
	args, err := pushArgs(next)
	if err != nil {
		return false, nil, fmt.Errorf("scylla: update push: %w", err)
	}
	args = append([]any{int32(next.TTL)}, args...)
	applied, err = s.query(ctx, qUpdatePush, append(args, uuidArg(next.ID), prev)...).ScanCAS(&cur)
	switch {
	case err != nil:
		if !s.appliedAfterAll(ctx, next) {
			return false, nil, wrap("update push", err)
		}
		applied = true
	case !applied && cur != nil && *cur == next.Version && s.appliedAfterAll(ctx, next):
		applied = true
	}
	return applied, cur, nil
}

// notApplied is the error of an update whose LWT found version cur
// (nil: no push) instead of prev.
func notApplied(next *storage.Push, prev int64, cur *int64) error {
	if cur == nil {
		return fmt.Errorf("scylla: update push %s: %w", next.ID, storage.ErrNotFound)
	}
	return fmt.Errorf("scylla: update push %s: version %d, not %d: %w", next.ID, *cur, prev, storage.ErrConflict)
}

// appliedAfterAll reads the push at SERIAL consistency, which completes
// any transaction still in flight on it, and reports whether next is what
// is stored: an update whose answer was lost did apply. Written by
// another node it cannot be: next carries this writer's version, time
// and owner, and the attempt log it extended.
func (s *Store) appliedAfterAll(ctx context.Context, next *storage.Push) bool {
	got, found, err := s.readPush(ctx, next.ID, true)
	return err == nil && found && got.Version == next.Version && got.State == next.State && got.At == next.At &&
		got.Owner == next.Owner && got.Updated == next.Updated && reflect.DeepEqual(got.Attempts, next.Attempts)
}

// indexEntry is one row of push_state.
type indexEntry struct {
	shard   int8
	at      int64
	id      uuid.UUID
	version int64
}

// scanEntries reads a page of one shard's index entries (at, id,
// version) and closes iter.
func scanEntries(iter *gocql.Iter, shard int8) ([]indexEntry, error) {
	var got []indexEntry
	var e indexEntry
	var id [16]byte
	for iter.Scan(&e.at, &id, &e.version) {
		e.shard, e.id = shard, id
		got = append(got, e)
	}
	return got, iter.Close()
}

// DuePushes implements storage.PushStore: one bounded slice of each shard
// of the state's index (in parallel), then a read of each push (in
// parallel).
//
// Each shard's read starts at a floor this node keeps: entries are only
// ever written with At at or after their writer's now (a due time, a lease
// expiry, the moment of a move), so everything below the last read's due
// time less floorMargin is gone or stale, and reading from the partition's
// start would only walk over the tombstones of entries already moved on.
// The first read after start walks them once. The floor stays at or below
// every entry read that is not stale, except those newer than their push,
// which the node remembers and reads apart (inflight.go).
func (s *Store) DuePushes(ctx context.Context, state storage.PushState, before int64, limit int) ([]storage.Push, error) {
	if err := storage.ValidatePushPage(state, limit); err != nil {
		return nil, fmt.Errorf("scylla: due pushes: %w", err)
	}
	if err := s.open("due pushes"); err != nil {
		return nil, err
	}
	var byShard [pushShards][]indexEntry
	err := each(pushShards, func(i int) error {
		shard := int8(i)
		floor := s.floor(floorKey(state, shard))
		got, err := scanEntries(s.query(ctx, qIndexDue, string(state), shard, floor, before, limit).Iter(), shard)
		byShard[shard] = got
		return err
	})
	if err != nil {
		return nil, wrap("due pushes: index", err)
	}
	var entries []indexEntry
	for _, got := range byShard {
		entries = append(entries, got...)
	}
	slices.SortFunc(entries, func(a, b indexEntry) int {
		if a.at != b.at {
			return cmpInt(a.at, b.at)
		}
		return strings.Compare(a.id.String(), b.id.String())
	})
	entries = entries[:min(len(entries), limit)]
	// The remembered entries below the floors, read again with the rest
	// (after the shards, so an entry a concurrent read remembered before
	// raising a floor past it is among them).
	now := time.Now()
	apart := 0
	if remembered := s.inflight.due(state, before, now); len(remembered) > 0 {
		read := make(map[indexEntry]bool, len(entries))
		for _, e := range entries {
			read[e] = true
		}
		for _, e := range remembered {
			if !read[e] {
				entries = append(entries, e)
				apart++
			}
		}
	}
	out, verdicts, err := s.resolve(ctx, state, entries, true)
	if err != nil {
		return nil, err
	}
	for i, e := range entries {
		s.inflight.note(state, e, verdicts[i], now)
	}
	if apart > 0 { // remembered entries that came due, in their place
		slices.SortFunc(out, func(a, b storage.Push) int {
			if a.At != b.At {
				return cmpInt(a.At, b.At)
			}
			return strings.Compare(a.ID.String(), b.ID.String())
		})
		out = out[:min(len(out), limit)]
	}
	for shard, got := range byShard {
		next := before - floorMargin.Milliseconds()
		for _, e := range got {
			if e.at >= next {
				break // sorted by At
			}
			if !s.inflight.has(state, e) {
				next = e.at
				break
			}
		}
		s.raiseFloor(floorKey(state, int8(shard)), next)
	}
	return out, nil
}

// floorKey names a state shard's floor.
func floorKey(state storage.PushState, shard int8) string {
	return string(state) + "/" + strconv.Itoa(int(shard))
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// floor returns the lowest At the next due read of a state shard starts at.
func (s *Store) floor(key string) int64 {
	if v, ok := s.floors.Load(key); ok {
		return v.(int64)
	}
	return math.MinInt64
}

// raiseFloor moves a shard's floor up to at (never down: concurrent reads
// of one shard each compute a safe floor, and the lower one is safe too,
// but an older read finishing last must not drop a floor already raised).
func (s *Store) raiseFloor(key string, at int64) {
	for {
		old, ok := s.floors.Load(key)
		if ok && old.(int64) >= at {
			return
		}
		if ok && s.floors.CompareAndSwap(key, old, at) || !ok && func() bool {
			_, loaded := s.floors.LoadOrStore(key, at)
			return !loaded
		}() {
			return
		}
	}
}

// verdict is what resolve found of an index entry.
type verdict uint8

const (
	live     verdict = iota // the push is in the entry's state at its At
	stale                   // the push moved past it (pruned when asked)
	inFlight                // newer than its push: an update in flight
	notFound                // no such push (yet: a save writes its entry first)
)

// resolve reads the pushes the entries name (16 at a time) and keeps those
// still in state, with a verdict per entry. An entry the push has moved
// past (its version is not newer than the push's, but the state or At
// differ) is stale: when prune is set it is deleted. An entry newer than
// its push belongs to an update in flight and is skipped, never deleted:
// its LWT may still apply (inflight.go).
func (s *Store) resolve(ctx context.Context, state storage.PushState, entries []indexEntry, prune bool) ([]storage.Push, []verdict, error) {
	ids := make([]uuid.UUID, len(entries))
	for i, e := range entries {
		ids[i] = e.id
	}
	pushes, err := s.readPushes(ctx, ids) // a push not found: the zero Push, never live
	if err != nil {
		return nil, nil, wrap("read pushes", err)
	}
	out := make([]storage.Push, 0, len(entries))
	verdicts := make([]verdict, len(entries))
	for i, e := range entries {
		p := pushes[i]
		switch {
		case p.State == state && p.At == e.at && p.Version >= e.version:
			out = append(out, p)
			verdicts[i] = live
		case p.Version == 0:
			verdicts[i] = notFound
		case p.Version >= e.version:
			verdicts[i] = stale
			if prune {
				_ = s.delIndex(ctx, state, e.at, e.id)
			}
		default:
			verdicts[i] = inFlight
		}
	}
	return out, verdicts, nil
}

// ListPushes implements storage.PushStore, shard after shard. The cursor
// is "shard.at.id" of the last entry read.
func (s *Store) ListPushes(ctx context.Context, state storage.PushState, cursor string, limit int) ([]storage.Push, string, error) {
	if err := storage.ValidatePushPage(state, limit); err != nil {
		return nil, "", fmt.Errorf("scylla: list pushes: %w", err)
	}
	shard, at, id := int8(0), int64(math.MinInt64), uuid.Nil
	if cursor != "" {
		var err error
		if shard, at, id, err = parseCursor(cursor); err != nil {
			return nil, "", fmt.Errorf("scylla: list pushes: %w", err)
		}
	}
	if err := s.open("list pushes"); err != nil {
		return nil, "", err
	}
	var out []storage.Push
	for shard < pushShards {
		want := limit - len(out)
		got, err := scanEntries(s.query(ctx, qIndexPage, string(state), shard, at, uuidArg(id), want).Iter(), shard)
		if err != nil {
			return nil, "", wrap("list pushes", err)
		}
		found, _, err := s.resolve(ctx, state, got, false)
		if err != nil {
			return nil, "", err
		}
		out = append(out, found...)
		if len(got) < want { // this shard is done
			shard, at, id = shard+1, math.MinInt64, uuid.Nil
			continue
		}
		last := got[len(got)-1]
		if len(out) >= limit {
			return out, fmt.Sprintf("%d.%d.%s", last.shard, last.at, last.id), nil
		}
		at, id = last.at, last.id // more of this shard (some entries were stale)
	}
	return out, "", nil
}

func parseCursor(c string) (int8, int64, uuid.UUID, error) {
	parts := strings.Split(c, ".")
	if len(parts) != 3 {
		return 0, 0, uuid.Nil, fmt.Errorf("bad cursor: %w", storage.ErrInvalid)
	}
	shard, err1 := strconv.Atoi(parts[0])
	at, err2 := strconv.ParseInt(parts[1], 10, 64)
	id, err3 := uuid.Parse(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || shard < 0 || shard >= pushShards {
		return 0, 0, uuid.Nil, fmt.Errorf("bad cursor: %w", storage.ErrInvalid)
	}
	return int8(shard), at, id, nil
}
