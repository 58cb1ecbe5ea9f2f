package engine

import (
	"context"
	"errors"
	"time"

	"github.com/autopush-go/autopush/engine/session"
	"github.com/autopush-go/autopush/internal/nodeapi"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// The storage side of the session core: Jobs run on the workers, and
// their Results go back to the session on its loop.

// submit queues job for cn on a worker; false when the queue is full (the
// node is overloaded and the session sheds the work).
func (srv *Server) submit(cn *conn, job session.Job) bool {
	if job.Kind == session.JobDelete {
		// Counted before it can run, so that a check queued after it,
		// even for another connection of the user, waits for it.
		srv.deletes.add(job.UAID)
	}
	srv.pending.Add(1)
	ok := srv.workers.submit(func() {
		// Pending until the result is handed to the loop, which counts
		// it from then on: the count never drops to 0 in between.
		defer srv.pending.Add(-1)
		res := session.Result{Job: job}
		srv.run(&res)
		if job.Kind != session.JobCursor && job.Kind != session.JobFate {
			srv.onLoop(cn, func(x *session.Ctx) { cn.s.Done(x, &res) })
		}
	})
	if !ok {
		srv.pending.Add(-1)
		if job.Kind == session.JobDelete {
			srv.deletes.done(job.UAID)
		}
	}
	return ok
}

func (srv *Server) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), srv.cfg.StorageTimeout)
}

// run does r.Job's storage work and fills r.
func (srv *Server) run(r *session.Result) {
	ctx, cancel := srv.ctx()
	defer cancel()
	j := &r.Job
	switch j.Kind {
	case session.JobHello:
		srv.hello(ctx, r)
	case session.JobRegister:
		if j.MaxChannels > 0 {
			r.Err = srv.timed(func() (err error) {
				r.Channels, err = srv.store.CountChannels(ctx, j.UAID, j.MaxChannels)
				return err
			})
			if r.Full = r.Channels >= j.MaxChannels; r.Err != nil || r.Full {
				return
			}
		}
		r.Endpoint, r.Err = srv.keys.MakeEndpoint(srv.cfg.EndpointURL, j.UAID, j.CHID, j.Key)
		switch {
		case r.Err != nil:
		case j.NewUser:
			// The fresh uaid's router record (session.JobHello), written
			// with its first channel: nothing to read first, nothing to
			// count (storage.ConnectNew).
			u := storage.User{UAID: j.UAID, RouterType: storage.RouterWebPush, NodeID: srv.nodeURL, ConnectedAt: j.ConnectedAt}
			r.Err = srv.timed(func() error { return srv.store.ConnectNew(ctx, u, j.CHID) })
		default:
			r.Err = srv.timed(func() error { return srv.store.AddChannel(ctx, j.UAID, j.CHID) })
		}
	case session.JobUnregister:
		r.Err = srv.timed(func() error { return srv.store.RemoveChannel(ctx, j.UAID, j.CHID) })
		if r.Err == nil {
			srv.settleUser(ctx, j.UAID, j.CHID, storage.DropUnsubscribed)
		}
	case session.JobCheck:
		// A previous connection of this user on this node may still be
		// deleting what its client acked: read after those deletes land.
		srv.deletes.wait(ctx, j.UAID)
		r.Err = srv.timed(func() (err error) {
			// Topic messages first (docs/protocol.md), then what fits after them.
			if r.Topics, err = srv.store.TopicMessages(ctx, j.UAID, j.Page); err != nil || len(r.Topics) == j.Page {
				return err
			}
			r.Stamps, err = srv.store.TimestampMessages(ctx, j.UAID, j.Cursor, j.Page-len(r.Topics))
			return err
		})
		r.More = len(r.Topics)+len(r.Stamps) == j.Page
	case session.JobDelete:
		srv.deleteAcked(ctx, r)
	case session.JobFate:
		if len(j.Fates) > 0 {
			srv.fates(ctx, j.UAID, j.Fates, j.State)
		} else {
			srv.fate(ctx, j.UAID, j.Fate, j.State)
		}
	case session.JobCursor:
		srv.timed(func() error { return srv.store.AdvanceCursor(ctx, j.UAID, j.Cursor) })
	case session.JobDrop:
		r.Err = srv.timed(func() error { return srv.store.DropUser(ctx, j.UAID) })
		if r.Err == nil {
			srv.settleUser(ctx, j.UAID, [16]byte{}, storage.DropMsgLimit)
		}
	case session.JobHealth:
		r.Err = srv.storageHealth(ctx)
	}
}

// deleteAcked deletes the stored message a client acked. A tracked one's
// fate settles delivered at the ack, in the same write where storage can
// (storage.FateStore.DeleteDelivered); failing that, one call after the
// other, whatever became of the delete: an unavailable one is owed, and
// the user's reads wait for it (owed.go).
func (srv *Server) deleteAcked(ctx context.Context, r *session.Result) {
	j := &r.Job
	if j.Tracked {
		r.Err = srv.timed(func() error {
			_, err := srv.store.DeleteDelivered(ctx, j.UAID, j.Message, j.Fate)
			return err
		})
		if r.Err == nil {
			srv.deletes.done(j.UAID)
			return
		}
	}
	r.Err = srv.timed(func() error { return srv.store.DeleteMessage(ctx, j.UAID, j.Message) })
	if unavailable(r.Err) {
		srv.log.Warn("delete acked message failed: owed until storage answers", "error", r.Err)
		srv.owe(owedWrite{uaid: j.UAID, del: j.Message})
	} else {
		srv.deletes.done(j.UAID)
		if r.Err != nil {
			srv.log.Warn("delete acked message failed", "error", r.Err)
		}
	}
	if j.Tracked {
		srv.fate(ctx, j.UAID, j.Fate, storage.FateDelivered)
	}
}

// hello looks a returning user agent up, records the connection and
// evicts an older connection held by another node. An unknown uaid is
// replaced by a fresh one, whose record its first register writes.
func (srv *Server) hello(ctx context.Context, r *session.Result) {
	j := &r.Job
	r.UAID = j.UAID
	u := storage.User{UAID: j.UAID, RouterType: storage.RouterWebPush, NodeID: srv.nodeURL, ConnectedAt: j.ConnectedAt}
	var prev storage.User
	// The record read and rewritten at once (storage.Reconnect); a record
	// of another router type is left alone.
	err := srv.timed(func() (err error) {
		prev, err = srv.store.Reconnect(ctx, u)
		return err
	})
	switch {
	case errors.Is(err, storage.ErrNotFound):
		r.UAID, r.Fresh = session.NewUAID(), true
	case err != nil:
		r.Err = err
	default:
		r.Cursor = prev.Cursor
		if prev.NodeID != "" && prev.NodeID != srv.nodeURL && prev.ConnectedAt < j.ConnectedAt {
			srv.evictRemote(ctx, prev.NodeID, r.UAID, prev.ConnectedAt)
		}
	}
}

// timed runs a storage call and records its latency and failures.
func (srv *Server) timed(call func() error) error {
	start := time.Now()
	err := call()
	srv.metrics.storageSeconds.UpdateDuration(start)
	if err != nil && !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrConflict) {
		srv.metrics.storageErrors.Inc()
		if unavailable(err) {
			srv.watchStorage() // an outage? its health says (storagewatch.go)
		}
	}
	return err
}

// leave does a closed registered connection's remaining work (see
// session.Leave). Notifications answered 201 are never dropped: when the
// workers cannot take it (overloaded, or the node stopping), this one job
// gets its own goroutine.
func (srv *Server) leave(l session.Leave) {
	srv.pending.Add(1)
	job := func() {
		defer srv.pending.Add(-1)
		ctx, cancel := srv.ctx()
		defer cancel()
		stored := 0
		for i := range l.Keep {
			err := srv.timed(func() error { return srv.store.SaveMessage(ctx, l.UAID, l.Keep[i]) })
			switch {
			case unavailable(err):
				// Owed until storage answers (owed.go).
				srv.owe(owedWrite{uaid: l.UAID, save: &l.Keep[i]})
			case err != nil:
				srv.log.Error("storing unacked notification on close failed: lost", "error", err, "uaid", protocol.FormatUAID(l.UAID))
			default:
				srv.metrics.storedOut.Inc()
				stored++
				if l.Keep[i].Tracked {
					srv.fate(ctx, l.UAID, storage.NewFateID(l.Keep[i].Version), storage.FateStored)
				}
			}
		}
		srv.timed(func() error { return srv.store.ClearNode(ctx, l.UAID, l.ConnectedAt) })
		if stored > 0 {
			srv.notifyHolder(ctx, l.UAID)
		}
	}
	if !srv.workers.submit(job) {
		srv.leaving.Add(1)
		go func() {
			defer srv.leaving.Done()
			job()
		}()
	}
}

// evictRemote asks the node holding an older connection to drop it. Best
// effort: a node that is gone has no connection to drop.
func (srv *Server) evictRemote(ctx context.Context, node string, uaid [16]byte, connectedAt int64) {
	if code, err := srv.nodes.Drop(ctx, node, uaid, connectedAt); err != nil {
		srv.log.Info("evict on other node failed", "node", node, "error", err)
	} else if code == nodeapi.StatusDropped {
		srv.metrics.evictions.Inc()
	}
}

// notifyHolder tells whichever node now holds uaid to check storage: the
// "re-read the router record and notify the new node" of a push's route
// (docs/architecture.md, Flows), used after this node stored messages for
// a user that moved. When the router record cannot be read, the check is
// owed (internal/owedcheck) and tried again every second.
func (srv *Server) notifyHolder(ctx context.Context, uaid [16]byte) {
	if srv.tellHolder(ctx, uaid) {
		return
	}
	owed := srv.checks.Owe(uaid) // false: too many owed, they wait for the next connection
	srv.log.Warn("router record unreadable after storing: its node is told once storage answers", "uaid", protocol.FormatUAID(uaid), "owed", owed)
}

// tellHolder is notifyHolder's one try; false when storage did not say
// who holds uaid.
func (srv *Server) tellHolder(ctx context.Context, uaid [16]byte) bool {
	if cn := srv.registry.get(uaid); cn != nil {
		srv.onLoop(cn, func(x *session.Ctx) { cn.s.Check(x) })
		return true
	}
	u, err := srv.store.GetUser(ctx, uaid)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return true
	case err != nil:
		return false
	case u.NodeID != "" && u.NodeID != srv.nodeURL:
		srv.nodes.Notif(ctx, u.NodeID, uaid)
	}
	return true
}

// payOwedCheck is one try of an owed check (owedcheck.Try).
func (srv *Server) payOwedCheck(ctx context.Context, uaid [16]byte) bool {
	ctx, cancel := context.WithTimeout(ctx, srv.cfg.StorageTimeout)
	defer cancel()
	return srv.tellHolder(ctx, uaid)
}

// fate records that a tracked message of uaid reached state: written to
// its client, stored again, or acked (settled delivered). A failure is
// logged and counted; the fate then settles later, as expired.
func (srv *Server) fate(ctx context.Context, uaid [16]byte, id storage.FateID, state storage.FateState) {
	err := srv.timed(func() (err error) {
		if state.Terminal() {
			_, err = srv.store.Settle(ctx, uaid, id, state, storage.DropNone)
		} else {
			_, err = srv.store.Reach(ctx, uaid, id, state)
		}
		return err
	})
	if err != nil {
		srv.metrics.fateErrors.Inc()
		srv.log.Warn("record a tracked message's fate", "state", state.String(), "error", err, "uaid", protocol.FormatUAID(uaid))
	}
}

// fates records that tracked messages of uaid, a page written to its
// client, reached the non-terminal state; failures as in fate.
func (srv *Server) fates(ctx context.Context, uaid [16]byte, ids []storage.FateID, state storage.FateState) {
	err := srv.timed(func() error {
		_, err := srv.store.ReachAll(ctx, uaid, ids, state)
		return err
	})
	if err != nil {
		srv.metrics.fateErrors.Inc()
		srv.log.Warn("record tracked messages' fates", "state", state.String(), "fates", len(ids), "error", err, "uaid", protocol.FormatUAID(uaid))
	}
}

// settleUser settles the unsettled fates of uaid's channel chid (every
// channel: chid zero) as dropped for reason, once their messages are
// gone with the channel or the user.
func (srv *Server) settleUser(ctx context.Context, uaid, chid [16]byte, reason storage.DropReason) {
	err := srv.timed(func() error {
		_, err := srv.store.SettleUser(ctx, uaid, chid, reason)
		return err
	})
	if err != nil {
		srv.metrics.fateErrors.Inc()
		srv.log.Warn("settle a user's tracked messages", "reason", reason.String(), "error", err, "uaid", protocol.FormatUAID(uaid))
	}
}
