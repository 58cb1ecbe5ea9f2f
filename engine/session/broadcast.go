package session

import (
	"strings"

	"github.com/autopush-go/autopush/internal/protocol"
)

// Broadcasts (megaphone), with the reference's semantics: a client names
// the broadcast ids it follows and the version it has of each, in hello or
// broadcast_subscribe; it is answered with the ids whose version differs
// (their current version) and, under "errors", the ids the node does not
// know (protocol.BroadcastNotFound; those are not subscribed). When a
// version changes later, each subscribed client gets one "broadcast"
// message with it. The subscription itself is the node's (an interned
// broadcast.Sub in Session.bsub), so it costs a client 4 bytes.

// subscribeHello subscribes the ids the hello named (Job.Broadcasts) and
// returns what the hello reply lists. Called once the hello is done, so
// the versions it compares with are those current when the client is
// registered: a change published after that reaches it through the
// fan-out (Broadcast), one published before through this reply.
func (s *Session) subscribeHello(x *Ctx, req []protocol.Broadcast) (changed, errs []protocol.Broadcast) {
	if len(req) == 0 {
		return nil, nil
	}
	if x.Broadcasts == nil {
		return nil, x.notFound(req)
	}
	s.bsub, x.bc, x.bcErr = x.Broadcasts.Subscribe(s.bsub, req, x.bc[:0], x.bcErr[:0])
	return x.bc, x.bcErr
}

// broadcastSubscribe adds ids; a "broadcast" message answers with what
// changed and what is unknown, and nothing at all when neither.
func (s *Session) broadcastSubscribe(x *Ctx, m *protocol.ClientMessage) {
	if x.Broadcasts == nil {
		s.sendBroadcast(x, nil, x.notFound(m.Broadcasts))
		return
	}
	s.bsub, x.bc, x.bcErr = x.Broadcasts.Subscribe(s.bsub, m.Broadcasts, x.bc[:0], x.bcErr[:0])
	s.sendBroadcast(x, x.bc, x.bcErr)
}

// Broadcast brings the client up to date with the node's broadcast
// versions: the ids it follows that changed since it was last told are
// sent in one "broadcast" message. The node calls it for every registered
// session when a version changes (paced over each loop), and Tick does it
// too; a session that is current sends nothing, so a second call never
// repeats a version.
func (s *Session) Broadcast(x *Ctx) {
	if s.state != stReady || s.bsub == 0 || x.Broadcasts == nil || s.leaving() {
		return
	}
	s.bsub, x.bc = x.Broadcasts.CatchUp(s.bsub, x.bc[:0])
	s.sendBroadcast(x, x.bc, nil)
}

func (s *Session) sendBroadcast(x *Ctx, changed, errs []protocol.Broadcast) {
	if len(changed)+len(errs) == 0 {
		return
	}
	x.Metrics.Broadcasts.Inc()
	s.sendJSON(x, func(b []byte) []byte { return protocol.AppendBroadcast(b, changed, errs) })
}

// releaseBroadcasts gives the subscription back when the session ends.
func (s *Session) releaseBroadcasts(e *Env) {
	if s.bsub != 0 && e.Broadcasts != nil {
		e.Broadcasts.Release(s.bsub)
	}
	s.bsub = 0
}

// notFound lists every id of req as unknown (a node without broadcasts).
func (x *Ctx) notFound(req []protocol.Broadcast) []protocol.Broadcast {
	x.bcErr = x.bcErr[:0]
	for _, b := range req {
		x.bcErr = append(x.bcErr, protocol.Broadcast{ID: b.ID, Version: protocol.BroadcastNotFound})
	}
	return x.bcErr
}

// cloneBroadcasts copies a decoded list (whose strings alias the loop's
// buffer) for a job, in two allocations.
func cloneBroadcasts(bs []protocol.Broadcast) []protocol.Broadcast {
	if len(bs) == 0 {
		return nil
	}
	n := 0
	for _, b := range bs {
		n += len(b.ID) + len(b.Version)
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, b := range bs {
		sb.WriteString(b.ID)
		sb.WriteString(b.Version)
	}
	all := sb.String()
	out := make([]protocol.Broadcast, len(bs))
	for i, b := range bs {
		out[i] = protocol.Broadcast{ID: all[:len(b.ID)], Version: all[len(b.ID) : len(b.ID)+len(b.Version)]}
		all = all[len(b.ID)+len(b.Version):]
	}
	return out
}
