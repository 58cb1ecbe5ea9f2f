package session

import (
	"time"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// The message limit, as the reference's msg_limit: a user agent away for
// months can come back to a backlog no one wants delivered at once. When
// the backlog messages sent to a client since storage was last found empty
// pass Config.MsgLimit, the user is dropped (router record, channels and
// messages) and the connection closed with 1000 once that is done; its
// next hello names a uaid storage no longer knows and gets a fresh one, so
// the browser re-subscribes instead of taking the flood. The page that
// crossed the limit is not sent.
//
// The backlog is what the client came back to: the messages the endpoint
// received before this connection's hello (Message.Received before the
// end of connectedAt's millisecond), which waited in storage while the
// user agent had no connection that took them. A message received since then was meant for
// a live client: stored only because its window (MaxUnacked) was full or
// its hello was running, it reaches the client as it acks, where the
// reference would have delivered it directly. None of those count, however
// many a burst brings and whether a backlog is draining meanwhile, so a
// client that keeps acking is never reset: else anyone holding one of its
// endpoints could reset it, and with it every site's subscription on that
// browser. A client that leaves before a burst reached it comes back to
// the rest, which then counts (the reference stores what its client left
// unacked, and counts it too). The page a client's close waits for
// (clientClose) is counted by the same rule. Receipt and hello are stamped
// by different nodes' clocks: their skew only moves the line for messages
// received within it of the hello.

// overLimit counts the page r against the limit and starts the drop when
// it passes; true means the page must not be sent.
func (s *Session) overLimit(x *Ctx, f *flow, r *Result, now time.Time) bool {
	limit := x.Config.MsgLimit
	if limit <= 0 {
		return false
	}
	if len(r.Topics)+len(r.Stamps) == 0 {
		f.fromStorage = 0
		return false
	}
	// The hello's millisecond counts whole: connectedAt is in
	// milliseconds, receipts in nanoseconds, and a message received in
	// the hello's millisecond, before it, is backlog (its last push is
	// often that close to a returning client's hello).
	hello := uint64(s.connectedAt+1) * uint64(time.Millisecond)
	for _, list := range [2][]storage.Message{r.Topics, r.Stamps} {
		for i := range list {
			if list[i].SortKey < hello && !list[i].Expired(now) {
				f.fromStorage++
			}
		}
	}
	if f.fromStorage <= limit {
		return false
	}
	x.Log.Info("dropping user over the message limit", "uaid", protocol.FormatUAID(s.uaid), "limit", limit)
	x.Metrics.UAIDResets.Inc()
	f.dropping, f.more, f.recheck = true, false, false
	// Nothing to leave: the record goes, and deliveries stop finding it.
	s.registered = false
	x.Host.Unenroll()
	x.Jobs = append(x.Jobs, Job{Kind: JobDrop, UAID: s.uaid})
	return true
}

// dropDone closes the connection of a dropped user. Should the drop fail
// the user stays as it was, and the client is closed as for any storage
// failure.
func (s *Session) dropDone(x *Ctx, r *Result) {
	if r.Err != nil {
		x.Log.Warn("dropping user failed", "error", r.Err, "uaid", protocol.FormatUAID(s.uaid))
		s.fail(x, "storage", ws.StatusTryAgainLater, "try again later")
		return
	}
	s.closeWith(x, ws.StatusNormalClosure, "uaid reset")
}
