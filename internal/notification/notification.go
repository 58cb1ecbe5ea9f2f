package notification

import (
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// ToMessage is the storage form of n, the one conversion both tiers use
// (the endpoint stores what no node took, the engine stores what a
// leaving client left unacked). It shares n's strings: Clone a
// notification that points into a buffer before keeping the result. A
// notification without a sort key (a sender that set none, as the
// reference's topic messages) gets one: storing needs it.
func ToMessage(n *protocol.Notification) storage.Message {
	chid, _ := protocol.ParseChannelID(n.ChannelID)
	m := storage.Message{CHID: chid, Version: n.Version, Topic: n.Topic, SortKey: n.SortKey, TTL: n.TTL, Data: n.Data, Tracked: n.Tracked}
	if m.SortKey == 0 {
		m.SortKey = storage.NewSortKey()
	}
	if len(n.Headers) > 0 {
		m.Headers = make(map[string]string, len(n.Headers))
		for _, h := range n.Headers {
			m.Headers[h.Name] = h.Value
		}
	}
	return m
}

// FromMessage is the wire form of a stored message; its headers are
// appended to hdrs (scratch the caller may reuse).
func FromMessage(m *storage.Message, hdrs []protocol.Header) protocol.Notification {
	for k, v := range m.Headers {
		hdrs = append(hdrs, protocol.Header{Name: k, Value: v})
	}
	return protocol.Notification{ChannelID: m.CHID.String(), Version: m.Version, TTL: m.TTL, Topic: m.Topic,
		Timestamp: m.Received().Unix(), SortKey: m.SortKey, Data: m.Data, Headers: hdrs, Tracked: m.Tracked}
}
