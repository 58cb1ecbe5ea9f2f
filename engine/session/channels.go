package session

import (
	"strings"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/vapid"
)

// register subscribes a channel and answers with its push endpoint. A bad
// key gets status 400 and the socket stays open.
func (s *Session) register(x *Ctx, m *protocol.ClientMessage) {
	chid, ok := protocol.ParseChannelID(m.ChannelID)
	if !ok || !protocol.ValidChannelID(m.ChannelID) {
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
	x.Metrics.Registers.Inc()
	// m aliases the loop's buffer: the job keeps a copy.
	x.Jobs = append(x.Jobs, Job{Kind: JobRegister, UAID: s.uaid, CHID: chid, ChannelID: strings.Clone(m.ChannelID), Key: key})
}

func (s *Session) registerDone(x *Ctx, r *Result) {
	status, endpoint := 200, r.Endpoint
	if r.Err != nil {
		status, endpoint = 500, ""
		x.Log.Warn("register failed", "error", r.Err)
	}
	s.sendJSON(x, func(b []byte) []byte { return protocol.AppendRegisterReply(b, r.Job.ChannelID, status, endpoint) })
}

func (s *Session) unregister(x *Ctx, m *protocol.ClientMessage) {
	chid, ok := protocol.ParseChannelID(m.ChannelID)
	if !ok {
		s.fail(x, "bad_channel", ws.StatusUnsupportedData, "invalid channelID")
		return
	}
	x.Metrics.Unregisters.Inc()
	x.Jobs = append(x.Jobs, Job{Kind: JobUnregister, UAID: s.uaid, CHID: chid, ChannelID: strings.Clone(m.ChannelID)})
}

func (s *Session) unregisterDone(x *Ctx, r *Result) {
	status := 200
	if r.Err != nil {
		status = 500
	}
	s.sendJSON(x, func(b []byte) []byte { return protocol.AppendUnregisterReply(b, r.Job.ChannelID, status) })
}
