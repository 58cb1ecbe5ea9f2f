package session

import (
	"strings"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/vapid"
)

// register subscribes a channel and answers with its push endpoint. A bad
// key gets status 400 and the socket stays open. A channelID that is not
// a lower-case dashed UUID, or is the nil UUID (no store takes it), closes
// with 1003.
//
// The channel limit (Config.MaxChannels): the first register of a
// connection has the worker count the user's channels (up to the limit)
// before adding; from then on the session keeps the count, and a register
// past the limit gets status 429 without a storage call. So do registers
// beyond maxRegsInFlight waiting for their replies; registers in flight
// count against the limit, so a client that pipelines its registers
// passes the limit by at most maxRegsInFlight, while the first count is
// out.
func (s *Session) register(x *Ctx, m *protocol.ClientMessage) {
	chid, ok := protocol.ParseChannelID(m.ChannelID)
	if !ok || !protocol.ValidChannelID(m.ChannelID) || chid == ([16]byte{}) {
		s.fail(x, "bad_channel", ws.StatusUnsupportedData, "invalid channelID")
		return
	}
	var key []byte
	if m.Key != "" {
		raw, err := vapid.DecodeKey(m.Key)
		if err != nil {
			x.Metrics.fail("bad_key")
			s.sendJSON(x, func(b []byte) []byte { return protocol.AppendRegisterReply(b, m.ChannelID, 400, "") })
			return
		}
		key = raw
	}
	limit, chans, regs := x.Config.MaxChannels, s.chans(), s.regs()
	if regs >= maxRegsInFlight || limit > 0 && chans > 0 && chans-1+regs >= limit {
		x.Metrics.fail("too_many_channels")
		s.sendJSON(x, func(b []byte) []byte {
			return protocol.AppendRegisterReply(b, m.ChannelID, StatusTooManyChannels, "")
		})
		return
	}
	x.Metrics.Registers.Inc()
	s.setRegs(regs + 1)
	// m aliases the loop's buffer: the job keeps a copy.
	j := Job{Kind: JobRegister, UAID: s.uaid, CHID: chid, ChannelID: strings.Clone(m.ChannelID), Key: key,
		NewUser: s.recordOwed, ConnectedAt: s.connectedAt}
	if limit > 0 && chans == 0 {
		j.MaxChannels = limit
	}
	x.Jobs = append(x.Jobs, j)
}

// StatusTooManyChannels is the register reply's status when the user
// agent has max-channels channels (or too many registers in flight).
const StatusTooManyChannels = 429

// maxRegsInFlight bounds the registers of one connection waiting for
// storage.
const maxRegsInFlight = 16

// MaxChannelLimit is the largest Config.MaxChannels the session can
// count to (24 bits).
const MaxChannelLimit = 1<<24 - 2

func (s *Session) chans() int { return int(s.chanRegs & (1<<24 - 1)) }
func (s *Session) regs() int  { return int(s.chanRegs >> 24) }

func (s *Session) setChans(n int) {
	s.chanRegs = s.chanRegs&^(1<<24-1) | uint32(min(n, MaxChannelLimit+1))
}

func (s *Session) setRegs(n int) { s.chanRegs = s.chanRegs&(1<<24-1) | uint32(n)<<24 }

func (s *Session) registerDone(x *Ctx, r *Result) {
	if regs := s.regs(); regs > 0 {
		s.setRegs(regs - 1)
	}
	if r.Job.MaxChannels > 0 && r.Err == nil {
		// The worker counted before adding (and, Full, did not add).
		s.setChans(r.Channels + 1)
	}
	status, endpoint := 200, r.Endpoint
	if r.Job.NewUser && r.Err == nil && s.recordOwed {
		// The router record is written: it names this connection now.
		s.recordOwed, s.registered = false, true
	}
	switch {
	case r.Err != nil:
		status, endpoint = 500, ""
		x.Log.Warn("register failed", "error", r.Err)
	case r.Full:
		status, endpoint = StatusTooManyChannels, ""
		x.Metrics.fail("too_many_channels")
	case s.chans() > 0:
		s.setChans(s.chans() + 1) // the channel just added
	}
	s.sendJSON(x, func(b []byte) []byte { return protocol.AppendRegisterReply(b, r.Job.ChannelID, status, endpoint) })
}

func (s *Session) unregister(x *Ctx, m *protocol.ClientMessage) {
	chid, ok := protocol.ParseChannelID(m.ChannelID)
	if !ok || chid == ([16]byte{}) {
		s.fail(x, "bad_channel", ws.StatusUnsupportedData, "invalid channelID")
		return
	}
	x.Metrics.Unregisters.Inc()
	s.unsubscribed = true
	x.Jobs = append(x.Jobs, Job{Kind: JobUnregister, UAID: s.uaid, CHID: chid, ChannelID: strings.Clone(m.ChannelID)})
}

func (s *Session) unregisterDone(x *Ctx, r *Result) {
	status := 200
	if r.Err != nil {
		status = 500
	} else if n := s.chans(); n > 1 {
		// Removing a channel that was not there lowers the count too: it
		// errs towards allowing, and the next connection counts again.
		s.setChans(n - 1)
	}
	s.sendJSON(x, func(b []byte) []byte { return protocol.AppendUnregisterReply(b, r.Job.ChannelID, status) })
}
