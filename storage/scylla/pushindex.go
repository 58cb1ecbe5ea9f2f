package scylla

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// The push API's indexes of outbound pushes (schema.cql): push_by_key,
// the pushes of a client to a device key, newest first, each push listed
// under its client and under storage.AllClients; and push_open, a
// client's pushes not yet final, in (client, shard) partitions.
//
// SavePush writes the by-key entries before the push (like its state
// index entry: a crash between leaves entries readers skip, never a push
// the index does not list) and the open entry after it; UpdatePush removes
// the open entry before the write that makes the push final, and puts it
// back when that write did not apply. A crash between steps thus leaves
// an open push uncounted (its client's outstanding quota is looser by
// one), never a finished one counted for ever. The by-key entries take
// the push's TTL when UpdatePush finishes it, so they expire with it; an
// entry whose push is gone (that write lost in a crash) is skipped. An
// open entry lives at most openTTL.
var (
	qByKeyAdd  = messageWrite(`INSERT INTO push_by_key (client, push_key, created, id) VALUES (?, ?, ?, ?) USING TTL ?`)
	qByKeyPage = read(`SELECT created, id FROM push_by_key WHERE client = ? AND push_key = ? AND (created, id) < (?, ?) LIMIT ?`)
	qByKeyTop  = read(`SELECT created, id FROM push_by_key WHERE client = ? AND push_key = ? LIMIT ?`)
	qOpenAdd   = messageWrite(`INSERT INTO push_open (client, shard, id) VALUES (?, ?, ?) USING TTL ?`)
	qOpenDel   = messageWrite(`DELETE FROM push_open WHERE client = ? AND shard = ? AND id = ?`)
	qOpenCount = read(`SELECT id FROM push_open WHERE client = ? AND shard = ? LIMIT ?`)
)

// openTTL bounds an open entry's life: a delete lost on a replica (a
// ghost that counts a finished push as open) goes by itself then, and a
// push open for longer (a cron push scheduled weeks ahead) stops counting
// towards its client's outstanding quota.
const openTTL = 7 * 24 * time.Hour

// openShards is how many partitions each client's open index has: a
// count reads them all, and the tombstones of finished pushes are spread
// over them. Part of the schema, like pushShards.
const openShards = 16

// putByKey writes p's two by-key entries (its client's and every
// client's) with the push's TTL, in parallel.
func (s *Store) putByKey(ctx context.Context, p *storage.Push) error {
	clients := [2]string{p.Client, storage.AllClients}
	return each(2, func(i int) error {
		return s.query(ctx, qByKeyAdd, clients[i], p.PushKey, p.Created, uuidArg(p.ID), indexTTL(p)).Exec()
	})
}

func (s *Store) putOpen(ctx context.Context, p *storage.Push) error {
	return s.query(ctx, qOpenAdd, p.Client, pushShard(p.ID), uuidArg(p.ID), int32(openTTL/time.Second)).Exec()
}

func (s *Store) delOpen(ctx context.Context, p *storage.Push) error {
	return s.query(ctx, qOpenDel, p.Client, pushShard(p.ID), uuidArg(p.ID)).Exec()
}

// PushesByKey implements storage.PushStore. The cursor is "created.id" of
// the last entry read. 1 RT, then the pushes' reads (16 at a time).
func (s *Store) PushesByKey(ctx context.Context, client, pushKey, cursor string, limit int) ([]storage.Push, string, error) {
	if err := storage.ValidateKeyPage(client, pushKey, limit); err != nil {
		return nil, "", fmt.Errorf("scylla: pushes by key: %w", err)
	}
	q := s.query(ctx, qByKeyTop, client, pushKey, limit)
	if cursor != "" {
		created, id, err := parseKeyCursor(cursor)
		if err != nil {
			return nil, "", fmt.Errorf("scylla: pushes by key: %w", err)
		}
		q = s.query(ctx, qByKeyPage, client, pushKey, created, uuidArg(id), limit)
	}
	if err := s.open("pushes by key"); err != nil {
		return nil, "", err
	}
	iter := q.Iter()
	var ids []uuid.UUID
	var created int64
	var raw [16]byte
	for iter.Scan(&created, &raw) {
		ids = append(ids, raw)
	}
	if err := iter.Close(); err != nil {
		return nil, "", wrap("pushes by key", err)
	}
	next := ""
	if len(ids) == limit {
		next = strconv.FormatInt(created, 10) + "." + ids[len(ids)-1].String()
	}
	pushes, err := s.readPushes(ctx, ids)
	if err != nil {
		return nil, "", wrap("pushes by key", err)
	}
	out := pushes[:0]
	for _, p := range pushes {
		// Only a push that is there (an entry may outlive it, or come
		// before it is written), and, defensively, the one the entry names.
		if p.Version > 0 && p.PushKey == pushKey && (client == storage.AllClients || p.Client == client) {
			out = append(out, p)
		}
	}
	return out, next, nil
}

// readPushes reads the pushes of ids, 16 at a time; a push not found is
// the zero Push in its place.
func (s *Store) readPushes(ctx context.Context, ids []uuid.UUID) ([]storage.Push, error) {
	pushes := make([]storage.Push, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			p, found, err := s.readPush(ctx, id, false)
			if found {
				pushes[i] = p
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return pushes, errors.Join(errs...)
}

func parseKeyCursor(c string) (int64, uuid.UUID, error) {
	at, idText, ok := strings.Cut(c, ".")
	created, err1 := strconv.ParseInt(at, 10, 64)
	id, err2 := uuid.Parse(idText)
	if !ok || err1 != nil || err2 != nil {
		return 0, uuid.Nil, fmt.Errorf("bad cursor: %w", storage.ErrInvalid)
	}
	return created, id, nil
}

// CountOpen implements storage.PushStore: every shard of the client's open
// index, in parallel, each up to about twice its even part of limit; only
// when one is that full and the sum is under limit are those shards read
// again, up to limit. 1 RT (2 in that rare case).
func (s *Store) CountOpen(ctx context.Context, client string, limit int) (int, error) {
	if err := storage.ValidateOpenCount(client, limit); err != nil {
		return 0, fmt.Errorf("scylla: count open: %w", err)
	}
	if err := s.open("count open"); err != nil {
		return 0, err
	}
	counts := make([]int, openShards)
	shards := make([]int8, openShards)
	for i := range shards {
		shards[i] = int8(i)
	}
	part := min(limit, 2*(limit/openShards)+1)
	for {
		err := each(len(shards), func(i int) error {
			n, err := s.countShard(ctx, client, shards[i], part)
			counts[shards[i]] = n
			return err
		})
		if err != nil {
			return 0, wrap("count open", err)
		}
		sum := 0
		var full []int8
		for shard, n := range counts {
			sum += n
			if n == part {
				full = append(full, int8(shard))
			}
		}
		if sum >= limit || part == limit || len(full) == 0 {
			return min(sum, limit), nil
		}
		shards, part = full, limit
	}
}

func (s *Store) countShard(ctx context.Context, client string, shard int8, limit int) (int, error) {
	iter := s.query(ctx, qOpenCount, client, shard, limit).PageSize(min(limit, 5000)).Iter()
	n := 0
	var raw [16]byte
	for iter.Scan(&raw) {
		n++
	}
	return n, iter.Close()
}
