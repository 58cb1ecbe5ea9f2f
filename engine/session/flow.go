package session

import (
	"time"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/notification"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// flow is a session's delivery state while anything is in flight; nil
// when idle, so idle connections carry none of it.
//
// Ordering rules it keeps (docs/engine.md, Protocol):
//   - at most MaxUnacked notifications unacked; beyond, deliveries are Busy
//     and a storage check is owed (recheck);
//   - a storage read never starts while acked messages are still being
//     deleted, so an acked message is never read back and redelivered;
//   - the cursor moves only past timestamp messages that were all acked,
//     and never closer to now than Config.CursorLag.
type flow struct {
	unacked  []pending
	checking bool // a storage read is running
	recheck  bool // storage must be read again once idle
	// retry: the last read failed; it is read again from Tick, every
	// checkRetry, once the node holds storage reachable (a message stored
	// meanwhile would otherwise wait for the client's next reconnect).
	retry    bool
	more     bool   // the last page was full
	deleting int    // acked messages whose delete is still running
	batchMax uint64 // largest SortKey of stored timestamp messages sent

	// fromStorage counts the backlog messages (received before the
	// hello) sent since a read last found storage empty (Config.MsgLimit);
	// dropping is set once the user is being dropped for passing it
	// (msglimit.go).
	fromStorage int
	dropping    bool
	// closeAsked: the client sent its close frame; the answer waits for
	// what its acks started (clientClose).
	closeAsked bool
}

// pending is a notification sent and not yet acked.
type pending struct {
	chid    string
	version string
	key     storage.MessageKey // stored: what the ack deletes
	stored  bool
	direct  *storage.Message // direct: what to store if the client leaves first
	sentAt  int64            // ns since Env.Epoch, monotonic: the ack latency's start
	tracked bool             // its fate is recorded (fate)
}

// fate asks for the tracked message version's fate to reach state (its
// write to the client, its ack), off the loop.
func (s *Session) fate(x *Ctx, version string, state storage.FateState) {
	x.Jobs = append(x.Jobs, Job{Kind: JobFate, UAID: s.uaid, Fate: storage.NewFateID(version), State: state})
}

// appendNotification is n's notification message; a tracked one names
// its fate (reliability_id, docs/receipts.md).
func appendNotification(b []byte, n *protocol.Notification) []byte {
	if n.Tracked {
		return protocol.AppendTrackedNotification(b, n, storage.NewFateID(n.Version))
	}
	return protocol.AppendNotification(b, n)
}

func (s *Session) flowState() *flow {
	if s.flow == nil {
		s.flow = &flow{}
	}
	return s.flow
}

// idle drops the flow once nothing is in flight.
func (s *Session) idle() {
	f := s.flow
	if f != nil && len(f.unacked) == 0 && !f.checking && !f.recheck && !f.retry && !f.more && f.deleting == 0 && !f.dropping {
		s.flow = nil
	}
}

// monoNanos is now as ns since Epoch: 8 bytes per pending instead of a
// time.Time's 24, still on the monotonic clock (a wall-clock step would
// skew the ack latency).
func (x *Ctx) monoNanos(now time.Time) int64 { return int64(now.Sub(x.Epoch)) }

// Deliver sends a notification the endpoint tier routed here: Delivered
// (written into Ctx.Out), Busy (the endpoint stores it and asks for a
// check, which is now owed) or NotHere.
func (s *Session) Deliver(x *Ctx, n *protocol.Notification) Outcome {
	switch {
	case s.state == stHelloing:
		// Answering NotHere would make the endpoint clear the node_id this
		// hello just wrote: busy instead, and the hello's check finds it.
		s.flowState().recheck = true
		return Busy
	case s.state != stReady:
		return NotHere
	case x.Draining.Load():
		return Busy
	case x.StorageDown.Load():
		// Accepted now, it could not be kept should the client leave
		// before acking it: the endpoint stores it or refuses it (503
		// errno 201). No check is owed: if it is stored, the endpoint
		// asks for one.
		return Busy
	case s.flow != nil && s.flow.dropping:
		return NotHere // the user is being dropped (msglimit.go)
	}
	f := s.flowState()
	if f.checking || f.deleting > 0 || len(f.unacked) >= x.Config.MaxUnacked || f.closeAsked {
		f.recheck = true
		return Busy
	}
	s.sendJSON(x, func(b []byte) []byte { return appendNotification(b, n) })
	c := n.Clone()
	m := notification.ToMessage(&c)
	f.unacked = append(f.unacked, pending{chid: m.CHID.String(), version: m.Version, direct: &m, sentAt: x.monoNanos(x.Now()), tracked: m.Tracked})
	if m.Tracked {
		s.fate(x, m.Version, storage.FateTransmitted)
	}
	x.InFlight.Add(1)
	x.SentDirect++
	x.Pending++
	return Delivered
}

// Check asks for a storage read: now when idle (Checking), or once what
// is in flight has drained (CheckLater); NotHere when no client is
// registered here.
func (s *Session) Check(x *Ctx) Outcome {
	switch s.state {
	case stHelloing:
		s.flowState().recheck = true
		return CheckLater
	case stReady:
	default:
		return NotHere
	}
	f := s.flowState()
	if f.checking || f.deleting > 0 || len(f.unacked) > 0 || f.dropping {
		f.recheck = true
		return CheckLater
	}
	s.check(x)
	return Checking
}

// checkRetry is how often a failed storage read is tried again.
const checkRetry = time.Second

// retryCheck reads storage again after a failed read, when the node holds
// storage reachable and nothing else runs (else later, or by the flow's
// own recheck once it drains). It reports whether the session is done
// with the retry.
func (s *Session) retryCheck(x *Ctx, now time.Time) bool {
	f := s.flow
	switch {
	case f == nil || !f.retry:
		return true
	case x.StorageDown.Load():
		x.schedule(now.Add(checkRetry))
		return false
	case f.checking || f.deleting > 0 || len(f.unacked) > 0 || f.dropping:
		f.retry, f.recheck = false, true
		return true
	}
	f.retry = false
	s.check(x)
	return true
}

// check asks for one page of stored messages.
func (s *Session) check(x *Ctx) {
	f := s.flowState()
	f.checking, f.recheck, f.more = true, false, false
	// A page never exceeds what may be in flight unacked: the next page
	// is read once this one is acked.
	page := min(x.Config.MessagePage, x.Config.MaxUnacked)
	x.Jobs = append(x.Jobs, Job{Kind: JobCheck, UAID: s.uaid, Cursor: s.cursor, Page: page})
}

// checkDone sends what a storage read found.
func (s *Session) checkDone(x *Ctx, r *Result) {
	f := s.flowState()
	f.checking = false
	if r.Err != nil {
		// Nothing is lost: the messages stay stored, and are read again
		// from Tick once storage answers (retry). Without it, a message
		// the endpoint stored while this read failed (it asked for this
		// check) waited for the client's next reconnect.
		x.Log.Warn("storage check failed", "error", r.Err, "uaid", protocol.FormatUAID(s.uaid))
		if f.closeAsked {
			s.closeWith(x, ws.StatusNormalClosure, "")
			return
		}
		f.retry = true
		if !s.pingOut {
			// (A ping's answer deadline stands: Tick retries after it.)
			x.schedule(x.Now().Add(checkRetry))
		}
		return
	}
	f.more = r.More
	now := x.Now()
	if s.overLimit(x, f, r, now) {
		return
	}
	if f.closeAsked {
		// Read for the limit only: the client is leaving, the page stays
		// stored for its next connection.
		s.closeWith(x, ws.StatusNormalClosure, "")
		return
	}
	sentAt := x.monoNanos(now) // the page's writes are back to back: one stamp
	var hdrs [8]protocol.Header
	var transmitted []storage.FateID // the page's tracked messages: one job
	for _, list := range [][]storage.Message{r.Topics, r.Stamps} {
		for i := range list {
			m := &list[i]
			if m.Expired(now) {
				x.Metrics.Expired.Inc()
				continue
			}
			n := notification.FromMessage(m, hdrs[:0])
			s.sendJSON(x, func(b []byte) []byte { return appendNotification(b, &n) })
			f.unacked = append(f.unacked, pending{chid: n.ChannelID, version: m.Version, key: m.Key(), stored: true, sentAt: sentAt, tracked: m.Tracked})
			if m.Tracked {
				transmitted = append(transmitted, storage.NewFateID(m.Version))
			}
			if m.Topic == "" && m.SortKey > f.batchMax {
				f.batchMax = m.SortKey
			}
			x.InFlight.Add(1)
			x.SentStored++
			x.Pending++
		}
	}
	if len(transmitted) > 0 {
		x.Jobs = append(x.Jobs, Job{Kind: JobFate, UAID: s.uaid, Fates: transmitted, State: storage.FateTransmitted})
	}
	s.drained(x)
}

// ack removes acked notifications; stored ones are deleted from storage.
// An ack that matches nothing sent (a repeat, a guess) changes nothing.
func (s *Session) ack(x *Ctx, m *protocol.ClientMessage) {
	f := s.flow
	if f == nil {
		return
	}
	var now int64
	for _, u := range m.Updates {
		i := f.find(u.ChannelID, u.Version)
		if i < 0 {
			continue
		}
		if now == 0 {
			now = x.monoNanos(x.Now())
		}
		p := f.unacked[i]
		f.unacked = append(f.unacked[:i], f.unacked[i+1:]...)
		x.InFlight.Add(-1)
		x.Metrics.Acked.Inc()
		x.Metrics.DeliveryAck.Update(time.Duration(now - p.sentAt).Seconds())
		switch {
		case p.stored:
			// The delete settles a tracked message's fate too.
			f.deleting++
			j := Job{Kind: JobDelete, UAID: s.uaid, Message: p.key, Tracked: p.tracked}
			if p.tracked {
				j.Fate = storage.NewFateID(p.version)
			}
			x.Jobs = append(x.Jobs, j)
		case p.tracked:
			s.fate(x, p.version, storage.FateDelivered)
		}
	}
	s.drained(x)
}

func (f *flow) find(chid, version string) int {
	for i := range f.unacked {
		if f.unacked[i].version == version && f.unacked[i].chid == chid {
			return i
		}
	}
	return -1
}

func (s *Session) deleteDone(x *Ctx) {
	if f := s.flow; f != nil {
		f.deleting--
		if f.closeAsked {
			s.answerClose(x)
			return
		}
		s.drained(x)
	}
}

// leaving reports that the client sent its close frame and the answer
// waits (clientClose): nothing more is written to it but that answer.
func (s *Session) leaving() bool { return s.flow != nil && s.flow.closeAsked }

// clientClose answers the client's close frame once what its acks started
// is done, as the reference finishes an ack before it reads the close:
//   - the deletes of the messages it acked (each bounded by the storage
//     timeout): a client that reconnects once its close is answered, to
//     another node perhaps, must not read back what it acked, and the node
//     that will read for it cannot wait for this one's deletes;
//   - with a msg-limit, the stored page those acks made owed: it is read
//     and counted against the limit (msglimit.go), not sent, so a client
//     cannot escape the limit by closing as soon as it acked.
//
// Meanwhile nothing more is sent to it: deliveries are busy (the endpoint
// stores them) and its input is ignored. Going away (Shutdown) only the
// deletes are waited for.
func (s *Session) clientClose(x *Ctx) {
	if f := s.flow; f != nil && (s.state == stReady || s.state == stGoingAway) {
		f.closeAsked = true
		s.answerClose(x)
		return
	}
	s.closeWith(x, ws.StatusNormalClosure, "")
}

// answerClose answers a held close frame (clientClose) unless something it
// waits for still runs; when the acks owe a page under a msg-limit, it
// reads that page first (checkDone then answers).
func (s *Session) answerClose(x *Ctx) {
	f := s.flow
	if s.state == stGoingAway {
		if f.deleting == 0 {
			s.closeWith(x, ws.StatusNormalClosure, "")
		}
		return
	}
	limit := x.Config.MsgLimit > 0
	switch {
	case f.deleting > 0 || f.dropping || f.checking && limit:
	case limit && len(f.unacked) == 0 && (f.more || f.recheck):
		s.check(x)
	default:
		s.closeWith(x, ws.StatusNormalClosure, "")
	}
}

// drained continues the storage drain once nothing is in flight: move the
// cursor past a fully acked batch, then read the next page if one is owed.
func (s *Session) drained(x *Ctx) {
	f := s.flow
	if f == nil || f.checking || f.deleting > 0 || len(f.unacked) > 0 || s.state != stReady || f.dropping || f.closeAsked {
		return
	}
	// Never past now - CursorLag: a message stamped earlier may still be
	// on its way to storage (engine.Config.CursorLag).
	if f.batchMax > s.cursor {
		if next := min(f.batchMax, uint64(x.Now().Add(-x.Config.CursorLag).UnixNano())); next > s.cursor {
			s.cursor = next
			x.Jobs = append(x.Jobs, Job{Kind: JobCursor, UAID: s.uaid, Cursor: next})
		}
	}
	if f.more || f.recheck {
		s.check(x)
		return
	}
	s.idle()
}

// Close ends the session once the connection closed; unsent is how many
// of the last transition's notifications (Ctx.Pending) were never
// written because that write failed. For a registered session it returns
// the Leave work: unacked direct notifications that were written are kept
// (their sender was told they were delivered); those never written are
// not (their sender is answered NotHere, and it stores them itself).
// Safe to call once; later transitions do nothing.
func (s *Session) Close(e *Env, unsent int) (Leave, bool) {
	if s.asm != nil {
		s.asm.Reset()
		s.asm = nil
	}
	s.state = stClosed
	s.releaseBroadcasts(e)
	var keep []storage.Message
	if f := s.flow; f != nil {
		now := e.Now()
		written := f.unacked[:len(f.unacked)-min(max(unsent, 0), len(f.unacked))]
		for _, p := range written {
			if p.direct != nil && !p.direct.Expired(now) && p.direct.TTL > 0 {
				keep = append(keep, Restamp(*p.direct, now))
			}
		}
		e.InFlight.Add(-int64(len(f.unacked)))
		s.flow = nil
	}
	if !s.registered {
		return Leave{}, false
	}
	return Leave{UAID: s.uaid, ConnectedAt: s.connectedAt, Keep: keep}, true
}

// Restamp gives a direct message about to be stored a new sort key with
// the TTL it has left: its original key may lie behind a cursor that later
// acks already advanced, where no read would ever find it.
func Restamp(m storage.Message, now time.Time) storage.Message {
	left := m.Expiry().Sub(now)
	m.SortKey = storage.NewSortKey()
	m.TTL = max(int64((left+time.Second-1)/time.Second), 1)
	return m
}
