package engine

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/storage"
)

// flow is a session's delivery state while anything is in flight; nil
// when idle, so idle connections carry none of it.
//
// Ordering rules it keeps (DESIGN.md §2):
//   - at most MaxUnacked notifications unacked; beyond, deliveries get 503
//     and a storage check is owed (recheck);
//   - a storage read never starts while acked messages are still being
//     deleted, so an acked message is never read back and redelivered;
//   - the cursor moves only past timestamp messages that were all acked,
//     and never closer to now than Config.CursorLag.
type flow struct {
	unacked  []pending
	checking bool   // a storage read is running
	recheck  bool   // storage must be read again once idle
	more     bool   // the last page was full
	deleting int    // acked messages whose delete is still running
	batchMax uint64 // largest SortKey of stored timestamp messages sent
}

// pending is a notification sent and not yet acked.
type pending struct {
	chid    string
	version string
	key     storage.MessageKey // stored: what the ack deletes
	stored  bool
	direct  *storage.Message // direct: what to store if the client leaves first
	sentAt  int64            // monoNanos when written: the ack latency's start
}

// monoBase anchors monoNanos: 8 bytes per pending instead of a
// time.Time's 24, still on the monotonic clock (a wall-clock step would
// skew the ack latency).
var monoBase = time.Now()

func monoNanos() int64 { return int64(time.Since(monoBase)) }

func (s *session) flowState() *flow {
	if s.flow == nil {
		s.flow = &flow{}
	}
	return s.flow
}

// idle drops the flow once nothing is in flight.
func (s *session) idle() {
	f := s.flow
	if f != nil && len(f.unacked) == 0 && !f.checking && !f.recheck && !f.more && f.deleting == 0 {
		s.flow = nil
	}
}

// submit runs job on a worker; an overloaded node closes the connection
// rather than queue without bound (the client reconnects elsewhere).
func (s *session) submit(job func()) bool {
	if s.srv.workers.submit(job) {
		return true
	}
	s.srv.metrics.overloaded.Inc()
	s.fail("storage", ws.StatusTryAgainLater, "server overloaded")
	return false
}

func (srv *Server) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), srv.cfg.StorageTimeout)
}

// register subscribes a channel and answers with its push endpoint. A bad
// key gets status 400 and the socket stays open.
func (s *session) register(m *protocol.ClientMessage) {
	chid, ok := protocol.ParseChannelID(m.ChannelID)
	if !ok || !protocol.ValidChannelID(m.ChannelID) {
		s.fail("bad_channel", ws.StatusUnsupportedData, "invalid channelID")
		return
	}
	chidText := strings.Clone(m.ChannelID) // m aliases the loop buffer
	var key []byte
	if m.Key != "" {
		raw, err := vapid.DecodeKey(m.Key)
		if err != nil {
			s.srv.metrics.fail("bad_key")
			s.sendJSON(func(b []byte) []byte { return protocol.AppendRegisterReply(b, chidText, 400, "") })
			return
		}
		key = raw
	}
	s.srv.metrics.registers.Inc()
	uaid := s.uaid
	s.submit(func() {
		ctx, cancel := s.srv.ctx()
		defer cancel()
		endpoint, err := s.srv.keys.MakeEndpoint(s.srv.cfg.EndpointURL, uaid, chid, key)
		if err == nil {
			err = s.srv.timed(func() error { return s.srv.store.AddChannel(ctx, uaid, chid) })
		}
		s.onLoop(func() {
			status := 200
			if err != nil {
				status, endpoint = 500, ""
				s.srv.log.Warn("register failed", "error", err)
			}
			s.sendJSON(func(b []byte) []byte { return protocol.AppendRegisterReply(b, chidText, status, endpoint) })
		})
	})
}

func (s *session) unregister(m *protocol.ClientMessage) {
	chid, ok := protocol.ParseChannelID(m.ChannelID)
	if !ok {
		s.fail("bad_channel", ws.StatusUnsupportedData, "invalid channelID")
		return
	}
	s.srv.metrics.unregisters.Inc()
	chidText, uaid := strings.Clone(m.ChannelID), s.uaid
	s.submit(func() {
		ctx, cancel := s.srv.ctx()
		defer cancel()
		err := s.srv.timed(func() error { return s.srv.store.RemoveChannel(ctx, uaid, chid) })
		s.onLoop(func() {
			status := 200
			if err != nil {
				status = 500
			}
			s.sendJSON(func(b []byte) []byte { return protocol.AppendUnregisterReply(b, chidText, status) })
		})
	})
}

// deliverDirect sends a notification the endpoint tier routed here.
// Returns the node API status: 200 written to the socket, 503 busy (the
// endpoint stores it and asks for a check, which is now owed), 404 gone.
func (s *session) deliverDirect(n *protocol.Notification) int {
	switch {
	case s.state == stHelloing:
		// Answering 404 would make the endpoint clear the node_id this
		// hello just wrote: busy instead, and the hello's check finds it.
		s.flowState().recheck = true
		s.srv.metrics.directBusy.Inc()
		return http.StatusServiceUnavailable
	case s.state != stReady:
		s.srv.metrics.directMiss.Inc()
		return http.StatusNotFound
	case s.srv.draining.Load():
		s.srv.metrics.directBusy.Inc()
		return http.StatusServiceUnavailable
	}
	f := s.flowState()
	if f.checking || f.deleting > 0 || len(f.unacked) >= s.srv.cfg.MaxUnacked {
		f.recheck = true
		s.srv.metrics.directBusy.Inc()
		return http.StatusServiceUnavailable
	}
	s.sendJSON(func(b []byte) []byte { return protocol.AppendNotification(b, n) })
	if s.closed() {
		// The write failed and closed the connection (leave has run): the
		// endpoint stores the message instead.
		s.srv.metrics.directMiss.Inc()
		return http.StatusNotFound
	}
	m := toMessage(n)
	f.unacked = append(f.unacked, pending{chid: m.CHID.String(), version: m.Version, direct: &m, sentAt: monoNanos()})
	s.srv.inFlight.Add(1)
	s.srv.metrics.sent.Inc()
	s.srv.metrics.directOK.Inc()
	return http.StatusOK
}

// toMessage copies a notification into the storage form, owning its bytes.
func toMessage(n *protocol.Notification) storage.Message {
	c := n.Clone()
	chid, _ := protocol.ParseChannelID(c.ChannelID)
	m := storage.Message{CHID: chid, Version: c.Version, Topic: c.Topic, SortKey: c.SortKey, TTL: c.TTL, Data: c.Data}
	if m.SortKey == 0 {
		// A sender that set no sort key (the reference's topic messages):
		// storing it on close needs one.
		m.SortKey = storage.NewSortKey()
	}
	if len(c.Headers) > 0 {
		m.Headers = make(map[string]string, len(c.Headers))
		for _, h := range c.Headers {
			m.Headers[h.Name] = h.Value
		}
	}
	return m
}

// restamp gives a direct message about to be stored a new sort key with
// the TTL it has left: its original key may lie behind a cursor that later
// acks already advanced, where no read would ever find it.
func restamp(m storage.Message, now time.Time) storage.Message {
	left := m.Expiry().Sub(now)
	m.SortKey = storage.NewSortKey()
	m.TTL = max(int64((left+time.Second-1)/time.Second), 1)
	return m
}

// toNotification is the wire form of a stored message.
func toNotification(m *storage.Message, hdrs []protocol.Header) protocol.Notification {
	for k, v := range m.Headers {
		hdrs = append(hdrs, protocol.Header{Name: k, Value: v})
	}
	return protocol.Notification{ChannelID: m.CHID.String(), Version: m.Version, TTL: m.TTL, Topic: m.Topic,
		Timestamp: m.Received().Unix(), SortKey: m.SortKey, Data: m.Data, Headers: hdrs}
}

// requestCheck asks for a storage read: now when idle (200), or once what
// is in flight has drained (202). Runs on the loop.
func (s *session) requestCheck() int {
	switch s.state {
	case stHelloing:
		s.flowState().recheck = true
		return http.StatusAccepted
	case stReady:
	default:
		return http.StatusNotFound
	}
	f := s.flowState()
	if f.checking || f.deleting > 0 || len(f.unacked) > 0 {
		f.recheck = true
		return http.StatusAccepted
	}
	s.check()
	return http.StatusOK
}

// check reads one page of stored messages on a worker and sends them.
func (s *session) check() {
	f := s.flowState()
	f.checking, f.recheck, f.more = true, false, false
	// A page never exceeds what may be in flight unacked: the next page
	// is read once this one is acked.
	uaid, cursor := s.uaid, s.cursor
	page := min(s.srv.cfg.MessagePage, s.srv.cfg.MaxUnacked)
	ok := s.submit(func() {
		ctx, cancel := s.srv.ctx()
		defer cancel()
		var topics, stamps []storage.Message
		// A previous connection of this user on this node may still be
		// deleting what its client acked: read after those deletes land.
		s.srv.deletes.wait(ctx, uaid)
		err := s.srv.timed(func() (err error) {
			// Topic messages first (seed 000), then what fits after them.
			if topics, err = s.srv.store.TopicMessages(ctx, uaid, page); err != nil || len(topics) == page {
				return err
			}
			stamps, err = s.srv.store.TimestampMessages(ctx, uaid, cursor, page-len(topics))
			return err
		})
		more := len(topics)+len(stamps) == page
		s.onLoop(func() { s.checked(topics, stamps, more, err) })
	})
	if !ok {
		f.checking = false
	}
}

// checked sends what a storage read found.
func (s *session) checked(topics, stamps []storage.Message, more bool, err error) {
	f := s.flowState()
	f.checking = false
	if err != nil {
		// Nothing is lost: the messages stay stored for the next check.
		s.srv.log.Warn("storage check failed", "error", err, "uaid", protocol.FormatUAID(s.uaid))
		s.idle()
		return
	}
	f.more = more
	now := time.Now()
	sentAt := monoNanos() // the page's writes are back to back: one stamp
	var hdrs [8]protocol.Header
	for _, list := range [][]storage.Message{topics, stamps} {
		for i := range list {
			m := &list[i]
			if m.Expired(now) {
				s.srv.metrics.expired.Inc()
				continue
			}
			n := toNotification(m, hdrs[:0])
			s.sendJSON(func(b []byte) []byte { return protocol.AppendNotification(b, &n) })
			if s.closed() {
				return // leave has run; the rest stays stored
			}
			f.unacked = append(f.unacked, pending{chid: n.ChannelID, version: m.Version, key: m.Key(), stored: true, sentAt: sentAt})
			if m.Topic == "" && m.SortKey > f.batchMax {
				f.batchMax = m.SortKey
			}
			s.srv.inFlight.Add(1)
			s.srv.metrics.sentStored.Inc()
		}
	}
	s.drained()
}

// ack removes acked notifications; stored ones are deleted from storage.
func (s *session) ack(m *protocol.ClientMessage) {
	f := s.flow
	if f == nil {
		return
	}
	now := monoNanos()
	for _, u := range m.Updates {
		i := f.find(u.ChannelID, u.Version)
		if i < 0 {
			continue
		}
		p := f.unacked[i]
		f.unacked = append(f.unacked[:i], f.unacked[i+1:]...)
		s.srv.inFlight.Add(-1)
		s.srv.metrics.acked.Inc()
		s.srv.metrics.deliveryAck.Update(time.Duration(now - p.sentAt).Seconds())
		if p.stored {
			s.deleteAcked(p.key)
		}
	}
	s.drained()
}

func (f *flow) find(chid, version string) int {
	for i := range f.unacked {
		if f.unacked[i].version == version && f.unacked[i].chid == chid {
			return i
		}
	}
	return -1
}

// deleteAcked removes an acked stored message; reads wait for it.
func (s *session) deleteAcked(k storage.MessageKey) {
	f := s.flow
	f.deleting++
	uaid := s.uaid
	s.srv.deletes.add(uaid)
	s.submit(func() {
		ctx, cancel := s.srv.ctx()
		defer cancel()
		defer s.srv.deletes.done(uaid)
		err := s.srv.timed(func() error { return s.srv.store.DeleteMessage(ctx, uaid, k) })
		if err != nil {
			s.srv.log.Warn("delete acked message failed", "error", err)
		}
		s.onLoop(func() {
			s.flow.deleting--
			s.drained()
		})
	})
}

// drained continues the storage drain once nothing is in flight: move the
// cursor past a fully acked batch, then read the next page if one is owed.
func (s *session) drained() {
	f := s.flow
	if f == nil || f.checking || f.deleting > 0 || len(f.unacked) > 0 || s.state != stReady {
		return
	}
	// Never past now - CursorLag: a message stamped earlier may still be
	// on its way to storage (Config.CursorLag).
	if f.batchMax > s.cursor {
		if next := min(f.batchMax, uint64(time.Now().Add(-s.srv.cfg.CursorLag).UnixNano())); next > s.cursor {
			s.cursor = next
			uaid, cursor := s.uaid, s.cursor
			s.submit(func() {
				ctx, cancel := s.srv.ctx()
				defer cancel()
				s.srv.timed(func() error { return s.srv.store.AdvanceCursor(ctx, uaid, cursor) })
			})
		}
	}
	if f.more || f.recheck {
		s.check()
		return
	}
	s.idle()
}

// leave runs after the connection closed: unacked direct notifications
// are stored (their sender was told 201), node_id is cleared if it is
// still this connection's, and a node that now holds the user is told to
// check storage.
func (s *session) leave() {
	var keep []storage.Message
	if s.flow != nil {
		now := time.Now()
		for _, p := range s.flow.unacked {
			if p.direct != nil && !p.direct.Expired(now) && p.direct.TTL > 0 {
				keep = append(keep, restamp(*p.direct, now))
			}
		}
		s.srv.inFlight.Add(-int64(len(s.flow.unacked)))
		s.flow = nil
	}
	srv, uaid, connectedAt := s.srv, s.uaid, s.connectedAt
	job := func() {
		ctx, cancel := srv.ctx()
		defer cancel()
		for i := range keep {
			if err := srv.timed(func() error { return srv.store.SaveMessage(ctx, uaid, keep[i]) }); err != nil {
				srv.log.Error("storing unacked notification on close failed", "error", err, "uaid", protocol.FormatUAID(uaid))
				continue
			}
			srv.metrics.storedOut.Inc()
		}
		srv.timed(func() error { return srv.store.ClearNode(ctx, uaid, connectedAt) })
		if len(keep) > 0 {
			srv.notifyHolder(ctx, uaid)
		}
	}
	if !srv.workers.submit(job) {
		// Overloaded or stopping: notifications answered 201 are never
		// dropped, so this one job gets its own goroutine.
		srv.leaving.Add(1)
		go func() {
			defer srv.leaving.Done()
			job()
		}()
	}
}
