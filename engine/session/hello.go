package session

import (
	"crypto/rand"
	"errors"
	"sync"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// clientMessages recycles decoded messages: DecodeClient reuses their
// slices, so the inbound path allocates nothing, and no connection keeps
// one while idle.
var clientMessages = sync.Pool{New: func() any { return new(protocol.ClientMessage) }}

// hello registers the connection: a known uaid is kept (a different one
// makes Firefox drop every subscription), an unknown or invalid one is
// replaced. A returning user agent's storage work is a JobHello;
// helloDone finishes it.
func (s *Session) hello(x *Ctx, m *protocol.ClientMessage) {
	if s.state != stHello {
		s.fail(x, "bad_json", ws.StatusPolicyViolation, "hello sent twice")
		return
	}
	x.Metrics.Hellos.Inc()
	if x.StorageDown.Load() {
		// Upgraded before storage was found down: its hello could only
		// fail, so it fails now, as a failed storage call would.
		s.fail(x, "storage", ws.StatusTryAgainLater, "storage unavailable")
		return
	}
	uaid, known := protocol.ParseUAID(m.UAID)
	known = known && m.HasUAID && uaid != [16]byte{}
	now := x.Now()
	s.state = stHelloing
	s.connectedAt = now.UnixMilli()
	x.schedule(now.Add(x.Config.PingInterval))
	if !known {
		// A new user agent: its uaid is made here and its router record
		// written by its first register, as the reference defers it. No
		// storage call: a hello that never registers writes nothing, and
		// nothing can be pushed to a uaid without a channel.
		s.uaid = NewUAID()
		s.helloDone(x, &Result{Job: Job{Kind: JobHello, UAID: s.uaid, ConnectedAt: s.connectedAt, Broadcasts: m.Broadcasts},
			UAID: s.uaid, Fresh: true})
		return
	}
	// Findable before the router record names this connection: a push
	// routed here meanwhile then gets "busy" (and a storage check is owed)
	// rather than "not here", which would make the endpoint clear the
	// node_id this hello is writing and store the push after the hello's
	// check has read (it would wait for the next reconnect). An older
	// local connection is evicted now.
	s.uaid = uaid
	x.Host.Enroll()
	x.Jobs = append(x.Jobs, Job{Kind: JobHello, UAID: uaid, ConnectedAt: s.connectedAt,
		Broadcasts: cloneBroadcasts(m.Broadcasts)})
}

// helloDone answers the hello, registers the session (evicting an older
// local one) and starts the stored-message drain.
func (s *Session) helloDone(x *Ctx, res *Result) {
	if s.state != stHelloing {
		return
	}
	if res.Err != nil {
		// The runner counted the storage failure already (a conflict is
		// not one); fail counts the closed connection in
		// errors_total{kind="storage"}.
		x.Log.Warn("hello failed", "error", res.Err)
		code := ws.StatusCode(ws.StatusTryAgainLater)
		if errors.Is(res.Err, storage.ErrConflict) {
			code = ws.StatusPolicyViolation // a newer connection of this user exists
		}
		s.fail(x, "storage", code, "hello failed")
		return
	}
	if res.Fresh {
		x.Metrics.HelloNewUAID.Inc()
	}
	if res.UAID != s.uaid {
		// Unknown to storage: enrolled under the one it asked for.
		x.Host.Unenroll()
		s.uaid = res.UAID
	}
	if !x.Host.Enroll() {
		// A newer connection of this user agent is here: it wins.
		s.fail(x, "storage", ws.StatusPolicyViolation, "connected elsewhere")
		return
	}
	// A fresh uaid has no router record yet: its first register writes
	// it (recordOwed), and until then its leave has nothing to clear.
	s.cursor, s.state = res.Cursor, stReady
	s.registered, s.recordOwed = !res.Fresh, res.Fresh
	changed, errs := s.subscribeHello(x, res.Job.Broadcasts)
	s.sendJSON(x, func(b []byte) []byte { return protocol.AppendHelloReply(b, s.uaid, 200, changed, errs) })
	// The drain took its list of sessions already: one that finishes its
	// hello afterwards closes itself (after registering, so its leave
	// clears its node_id), or it would hold the drain until its deadline.
	if x.Draining.Load() {
		s.Shutdown(x)
		return
	}
	if res.Fresh {
		// A uaid this hello made: nobody holds an endpoint of it, so
		// storage holds no message and no channel for it. No check, and
		// the channel count is known (0): a new user agent's hello and
		// registers read nothing.
		s.setChans(1)
		if s.flow != nil {
			s.flow.recheck = false
			s.idle()
		}
		return
	}
	s.Check(x)
}

// Evict closes this connection because a newer one of the same user
// agent exists (connectedAt is the newer one's, or the caller's bound).
// Returns Evicted (closing) or NotHere (no such connection here).
func (s *Session) Evict(x *Ctx, connectedAt int64) Outcome {
	if s.state != stReady || s.connectedAt > connectedAt {
		return NotHere
	}
	x.Metrics.Evictions.Inc()
	s.closeWith(x, 4000, "connected elsewhere")
	return Evicted
}

// NewUAID makes a random (version 4) uaid.
func NewUAID() [16]byte {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u
}
