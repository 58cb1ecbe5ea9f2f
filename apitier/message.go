package apitier

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender/bridge"
	"github.com/autopush-go/autopush/storage"
)

// handleDelete is DELETE /m/{message_id}: the application server cancels
// a push it was given the Location of. The id is decrypted (ours, or the
// reference's "01:"/"02:" ids); one that does not decrypt or parse is 404
// errno 102 (the reference answers 400 with errno null; 404 102 is the
// answer for an unknown URL; docs/errors.md). A bridged push still
// waiting in the outbound sender (queued, pending or between retries) is
// withdrawn: FAILED unsent (the reference sends bridged pushes inline and
// has nothing to withdraw). Otherwise the stored message is deleted (a
// topic message only while it is still the version the id names, so a
// newer replacement survives). The answer is 204, also when there was
// nothing to delete: a message already delivered and acked, delivered
// directly and never stored, or already handed to FCM or APNs, cannot be
// recalled. With the sender wired, a DELETE costs one more read (the
// push's), as the id does not say whether its user is bridged. A tracked
// message's fate settles as dropped, withdrawn (tracking.Withdrawn; a
// withdrawn bridged push's in bridge.Settled), which costs a read of the
// fate.
func (s *Server) handleDelete(ctx context.Context, c *app.RequestContext, st *reqState) {
	id, err := s.keys.ParseMessageID(c.Param("message_id"))
	if err != nil {
		s.metrics.deleteInvalid.Inc()
		st.x.Fail(errBadMessageID)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StorageTimeout)
	defer cancel()
	if s.pushes != nil && id.SortKey != 0 {
		start := time.Now()
		withdrawn, err := s.pushes.Withdraw(sctx, bridgedPushID(&id), bridge.WithdrawCause)
		s.metrics.storage(start, err)
		if err != nil {
			st.x.Fail(s.storageError("withdraw bridged push", err))
			return
		}
		if withdrawn {
			s.metrics.withdrawn.Inc()
			c.SetStatusCode(http.StatusNoContent)
			return
		}
	}
	start := time.Now()
	// A reference id may name a topic with '=' padding, which this tier
	// drops from topics before storing them.
	key := storage.MessageKey{CHID: uuid.UUID(id.CHID), Topic: strings.TrimRight(id.Topic, "="), SortKey: id.SortKey}
	err = s.store.DeleteMessage(sctx, uuid.UUID(id.UAID), key)
	s.metrics.storage(start, err)
	if errors.Is(err, storage.ErrInvalid) {
		s.metrics.deleteInvalid.Inc()
		st.x.Fail(errBadMessageID)
		return
	}
	if err != nil {
		st.x.Fail(s.storageError("delete message", err))
		return
	}
	if s.tracker.On() {
		s.tracker.Withdrawn(sctx, uuid.UUID(id.UAID), c.Param("message_id"))
	}
	s.metrics.deleted.Inc()
	c.SetStatusCode(http.StatusNoContent)
}
