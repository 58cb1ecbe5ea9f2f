package apitier

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// handleDelete is DELETE /m/{message_id}: the sender cancels a push it
// was given the Location of. The id is decrypted (ours, or the
// reference's "01:"/"02:" ids); one that does not decrypt or parse is 404
// errno 102 (the reference answers 400 with errno null; this tier's issue
// asks for 404 102, the answer for an unknown URL). The stored message is
// deleted (a topic message only while it is still the version the id
// names, so a newer replacement survives) and the answer is 204, also
// when there was nothing to delete: a message already delivered and
// acked, or delivered directly and never stored, cannot be recalled.
func (s *Server) handleDelete(ctx context.Context, c *app.RequestContext, st *reqState) {
	id, err := s.keys.ParseMessageID(c.Param("message_id"))
	if err != nil {
		s.metrics.deleteInvalid.Inc()
		s.writeError(c, st, errBadMessageID)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StorageTimeout)
	defer cancel()
	start := time.Now()
	// A reference id may name a topic with '=' padding, which this tier
	// drops from topics before storing them.
	key := storage.MessageKey{CHID: uuid.UUID(id.CHID), Topic: strings.TrimRight(id.Topic, "="), SortKey: id.SortKey}
	err = s.store.DeleteMessage(sctx, uuid.UUID(id.UAID), key)
	s.metrics.storage(start, err)
	if errors.Is(err, storage.ErrInvalid) {
		s.metrics.deleteInvalid.Inc()
		s.writeError(c, st, errBadMessageID)
		return
	}
	if err != nil {
		s.writeError(c, st, s.storageError("delete message", err))
		return
	}
	s.metrics.deleted.Inc()
	c.SetStatusCode(http.StatusNoContent)
}
