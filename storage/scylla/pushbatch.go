package scylla

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// batchLWTs bounds the LWTs UpdatePushes runs at once: measured on one
// local Cassandra node, 64 at once hand back about four times as many
// pushes a second as one at a time; more only queue at the coordinator.
const batchLWTs = 64

// entryBatch bounds the index rows of one batch (one partition, so one
// mutation; the bound keeps it under the batch size warnings).
const entryBatch = 100

// UpdatePushes implements storage.PushStore. Updates that move a push in
// the state index and neither finish it, reopen it nor change its TTL (a
// stopping node's queue handed back) share their index writes, in the
// order UpdatePush keeps for one push: the new entries in
// single-partition batches, then each push's LWT (batchLWTs at once),
// then the entries left behind deleted in batches. The others are an
// UpdatePush each, as many at once.
func (s *Store) UpdatePushes(ctx context.Context, updates []storage.PushUpdate) []error {
	errs := make([]error, len(updates))
	if len(updates) > storage.MaxPushBatch {
		fill(errs, fmt.Errorf("scylla: update pushes: %d updates, over %d: %w", len(updates), storage.MaxPushBatch, storage.ErrInvalid))
		return errs
	}
	if err := s.open("update pushes"); err != nil {
		fill(errs, err)
		return errs
	}
	var shared, alone []int
	for i, u := range updates {
		switch err := storage.ValidatePushUpdate(u.Prev, &u.Next); {
		case err != nil:
			errs[i] = fmt.Errorf("scylla: update push: %w", err)
		case u.Prev.State.Final() || u.Next.State.Final() || u.Prev.TTL != u.Next.TTL:
			alone = append(alone, i)
		default:
			shared = append(shared, i)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, batchLWTs)
	each := func(idx []int, f func(i int)) {
		for _, i := range idx {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				f(i)
			}()
		}
	}
	each(alone, func(i int) { errs[i] = s.UpdatePush(ctx, updates[i].Prev, updates[i].Next) })
	moved := func(u *storage.PushUpdate) bool { return u.Prev.State != u.Next.State || u.Prev.At != u.Next.At }
	var adds []*storage.Push
	for _, i := range shared {
		if moved(&updates[i]) {
			adds = append(adds, &updates[i].Next)
		}
	}
	failedAdds := s.indexBatches(ctx, qIndexAdd.cql, adds, true)
	var staleMu sync.Mutex
	var stale []*storage.Push // entries to delete: the old ones of applied moves
	each(shared, func(i int) {
		u := &updates[i]
		if err := failedAdds[u.Next.ID]; err != nil {
			errs[i] = wrap("update push: index", err)
			return
		}
		applied, cur, err := s.casPush(ctx, u.Prev.Version, &u.Next)
		switch {
		case err != nil:
			errs[i] = err
		case !applied:
			errs[i] = notApplied(&u.Next, u.Prev.Version, cur)
		}
		if !moved(u) {
			return
		}
		// The new entry of an update that did not apply stays (UpdatePush).
		if errs[i] == nil {
			staleMu.Lock()
			stale = append(stale, u.Prev)
			staleMu.Unlock()
		}
	})
	wg.Wait()
	// Only tidying: an entry left behind is stale, skipped by readers.
	s.indexBatches(ctx, qIndexDel.cql, stale, false)
	return errs
}

// indexBatches writes (add: qIndexAdd) or deletes (qIndexDel) the state
// index entries of ps, grouped by partition, entryBatch rows a batch, the
// batches at once. It returns the error of each push whose batch failed.
func (s *Store) indexBatches(ctx context.Context, cql string, ps []*storage.Push, add bool) map[uuid.UUID]error {
	type part struct {
		state storage.PushState
		shard int8
	}
	groups := map[part][][]*storage.Push{}
	for _, p := range ps {
		k := part{p.State, pushShard(p.ID)}
		g := groups[k]
		if len(g) == 0 || len(g[len(g)-1]) == entryBatch {
			g = append(g, nil)
		}
		g[len(g)-1] = append(g[len(g)-1], p)
		groups[k] = g
	}
	var chunks [][]*storage.Push
	for _, g := range groups {
		chunks = append(chunks, g...)
	}
	failed := map[uuid.UUID]error{}
	var mu sync.Mutex
	_ = each(len(chunks), func(c int) error {
		b := s.batch(ctx, classMessageWrite)
		for _, p := range chunks[c] {
			if add {
				b.Query(cql, string(p.State), pushShard(p.ID), p.At, uuidArg(p.ID), p.Version, indexTTL(p))
			} else {
				b.Query(cql, string(p.State), pushShard(p.ID), p.At, uuidArg(p.ID))
			}
		}
		err := s.session.ExecuteBatch(b)
		if err != nil {
			mu.Lock()
			for _, p := range chunks[c] {
				failed[p.ID] = err
			}
			mu.Unlock()
		}
		return err
	})
	return failed
}

// fill sets every error of errs to err.
func fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}
