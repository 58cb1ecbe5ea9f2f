package engine

import (
	"sync"
	"time"

	"github.com/autopush-go/autopush/engine/session"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// The storage writes the node owes its clients and could not make because
// storage was unavailable (docs/operations.md, Storage outage):
//
//   - the unacked direct notifications of a client that left: their
//     senders were answered 201 and nothing else holds them;
//   - the deletes of messages a client acked: left stored, they would be
//     sent to it again.
//
// They are kept here, in order, and made again after each health read of
// the storage watch's probe that succeeds (storagewatch.go), until none is
// left. A delete owed keeps its user's count in srv.deletes, so a storage
// read for that user waits for it (up to the storage timeout) rather than
// read back what was acked. A notification is stored with a fresh sort key
// (session.Restamp) when the write is finally made, and dropped if it
// expired meanwhile.
//
// They live in memory only: a node killed, or closed with storage still
// unavailable, loses them and logs how many. Their memory was the
// sessions' already (at most max-unacked notifications per client), and
// while storage is down the node takes no new direct delivery.
type owedWrites struct {
	paying sync.Mutex // one payOwed at a time
	mu     sync.Mutex
	list   []owedWrite
}

// owedWrite is one write: a notification to store, or a message to
// delete.
type owedWrite struct {
	uaid [16]byte
	save *storage.Message
	del  storage.MessageKey
}

// owe keeps w for later and makes sure the probe runs.
func (srv *Server) owe(w owedWrite) {
	srv.owed.mu.Lock()
	srv.owed.list = append(srv.owed.list, w)
	srv.owed.mu.Unlock()
	srv.watchStorage()
}

// owing is how many writes are owed. Safe for concurrent use.
func (srv *Server) owing() int {
	srv.owed.mu.Lock()
	defer srv.owed.mu.Unlock()
	return len(srv.owed.list)
}

// payOwed makes the owed writes, in order, until one fails as
// unavailable: it and those after it stay owed. It returns how many are
// left. Safe for concurrent use (the probe, and Close).
func (srv *Server) payOwed() int {
	srv.owed.paying.Lock()
	defer srv.owed.paying.Unlock()
	srv.owed.mu.Lock()
	list := srv.owed.list
	srv.owed.list = nil
	srv.owed.mu.Unlock()
	stored := map[[16]byte]bool{}
	paid := 0
	for ; paid < len(list); paid++ {
		if !srv.pay(&list[paid], stored) {
			break
		}
	}
	for uaid := range stored {
		ctx, cancel := srv.ctx()
		srv.notifyHolder(ctx, uaid)
		cancel()
	}
	srv.owed.mu.Lock()
	defer srv.owed.mu.Unlock()
	srv.owed.list = append(list[paid:], srv.owed.list...)
	return len(srv.owed.list)
}

// pay makes one owed write; false when storage is still unavailable. A
// stored notification's user is added to stored.
func (srv *Server) pay(w *owedWrite, stored map[[16]byte]bool) bool {
	ctx, cancel := srv.ctx()
	defer cancel()
	if w.save == nil {
		err := srv.timed(func() error { return srv.store.DeleteMessage(ctx, w.uaid, w.del) })
		if unavailable(err) {
			return false
		}
		if err != nil {
			srv.log.Warn("owed delete of an acked message failed", "error", err)
		}
		srv.deletes.done(w.uaid)
		return true
	}
	now := time.Now()
	if w.save.Expired(now) {
		return true
	}
	m := session.Restamp(*w.save, now)
	err := srv.timed(func() error { return srv.store.SaveMessage(ctx, w.uaid, m) })
	switch {
	case unavailable(err):
		return false
	case err != nil:
		srv.log.Error("storing an unacked notification failed: lost", "error", err, "uaid", protocol.FormatUAID(w.uaid))
	default:
		srv.metrics.storedOut.Inc()
		stored[w.uaid] = true
	}
	return true
}
