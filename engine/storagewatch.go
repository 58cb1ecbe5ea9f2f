package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/autopush-go/autopush/storage"
)

// The node's view of whether storage can serve (docs/operations.md,
// Storage outage). A storage call that fails as unavailable starts a
// probe: storage's health, read at once (or its result of the last
// second, healthCache) and then every probeEvery until it answers. A
// failed health read, the probe's or a /__heartbeat__'s, marks storage
// down (session.Env.StorageDown); the first that succeeds marks it up.
// A single failed call is not an outage: only a health read decides.
//
// While storage is down the node answers new websocket upgrades 503 with
// Retry-After and direct deliveries busy (so the endpoint stores the push
// or, storage being down, answers its sender 503 errno 201): it accepts
// nothing it could not keep should the client leave before acking it.

// probeEvery paces the health reads while storage is down: the node
// notices storage's return within about this long.
const probeEvery = time.Second

// storageWatch is the probe's state. Safe for concurrent use.
type storageWatch struct {
	probing atomic.Bool // a probe goroutine runs
}

// unavailable reports a storage error that means storage cannot serve
// now (as opposed to a missing record, a conflict or a bug).
func unavailable(err error) bool {
	return errors.Is(err, storage.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// noteHealth records a fresh health read: down on failure (and a probe
// runs until storage answers), up on success.
func (srv *Server) noteHealth(err error) {
	was := srv.env.StorageDown.Swap(err != nil)
	switch {
	case err != nil && !was:
		srv.log.Warn("storage unavailable: refusing new connections and direct deliveries until it answers", "error", err)
	case err == nil && was:
		srv.log.Info("storage available again")
	}
	if err != nil {
		srv.watchStorage()
	}
}

// watchStorage starts a probe unless one runs.
func (srv *Server) watchStorage() {
	if srv.watch.probing.CompareAndSwap(false, true) {
		go srv.probeStorage()
	}
}

// probeStorage reads storage's health every probeEvery until it answers
// and every owed write is made (owed.go), or until the node closes.
func (srv *Server) probeStorage() {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		ctx, cancel := srv.ctx()
		err := srv.storageHealth(ctx)
		cancel()
		if err == nil && srv.payOwed() == 0 {
			srv.watch.probing.Store(false)
			// A failure or a write owed between the checks above and the
			// line above found a probe running and started none: take
			// it over.
			if (!srv.env.StorageDown.Load() && srv.owing() == 0) || !srv.watch.probing.CompareAndSwap(false, true) {
				return
			}
		}
		select {
		case <-srv.quit:
			srv.watch.probing.Store(false)
			return
		case <-t.C:
		}
	}
}
