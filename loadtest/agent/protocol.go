package agent

import (
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/autopush-go/autopush/loadtest/ledger"
)

// The push protocol as Firefox speaks it, one JSON message at a time:
// hello, register, notification and ack. Messages are built in the loop's
// scratch buffer, never through encoding/json (a register or an ack is a
// few appends).

// serverMsg is every field of the server messages a user agent reads
// (decodeServerMsg).
type serverMsg struct {
	MessageType  string
	UAID         string
	Status       int
	ChannelID    string
	PushEndpoint string
	Version      string
	Data         string
	// Encoding is headers.encoding, the one header a user agent reads.
	Encoding string
	// hello and broadcast: id -> version, and "errors" -> {id: error}
	Broadcasts []broadcastValue
}

// message handles one protocol message (JSON text).
func (u *ua) message(payload []byte) {
	var m serverMsg
	if err := decodeServerMsg(payload, &m); err != nil {
		u.broken("bad json")
		return
	}
	switch m.MessageType {
	case "hello":
		u.helloReply(&m)
	case "register":
		u.registerReply(&m)
	case "notification":
		u.notification(&m)
	case "broadcast":
		u.noteBroadcasts(m.Broadcasts, true)
	case "", "ping":
		// "{}" answers our ping.
		if u.pingOut {
			u.pingOut = false
			u.l.s.pingReplies.Add(1)
		}
	case "unregister":
	default:
		u.l.s.reason("unexpected message " + m.MessageType)
	}
}

func (u *ua) hello() {
	u.setState(stHelloing)
	b := append(u.l.scratch(), `{"messageType":"hello","use_webpush":true,`...)
	b = u.appendHelloBroadcasts(b)
	if u.hasUAID {
		b = append(b, `,"uaid":"`...)
		b = hex.AppendEncode(b, u.uaid[:])
		b = append(b, '"')
	}
	u.sendText(append(b, '}'))
}

func (u *ua) helloReply(m *serverMsg) {
	if u.state != stHelloing {
		u.broken("hello reply out of turn")
		return
	}
	if m.Status != 200 {
		u.broken("hello status " + strconv.Itoa(m.Status))
		return
	}
	id, ok := parseUAID(m.UAID)
	if !ok {
		u.broken("hello: bad uaid")
		return
	}
	if u.hasUAID && id != u.uaid {
		// The server forgot the user: its subscriptions are gone.
		u.l.s.reason("hello: uaid changed")
		u.registered = false
	}
	u.uaid, u.hasUAID = id, true
	u.noteBroadcasts(m.Broadcasts, false)
	if u.registered {
		u.ready()
		return
	}
	u.setState(stRegistering)
	u.regs = uint16(len(u.chids))
	u.eps = make([]string, len(u.chids))
	for i := range u.chids {
		b := append(u.l.scratch(), `{"messageType":"register","channelID":"`...)
		b = appendUUID(b, u.chids[i])
		b = append(b, '"')
		if u.keys != nil {
			b = append(b, `,"key":"`...)
			b = append(b, u.l.s.cfg.VAPIDPublic...)
			b = append(b, '"')
		}
		u.sendText(append(b, '}'))
		if u.fd < 0 {
			return
		}
	}
}

func (u *ua) registerReply(m *serverMsg) {
	if u.state != stRegistering {
		u.broken("register reply out of turn")
		return
	}
	if m.Status != 200 || m.PushEndpoint == "" {
		u.broken("register status " + strconv.Itoa(m.Status))
		return
	}
	i := u.channelIndex(m.ChannelID)
	if i < 0 {
		u.broken("register reply for an unknown channel")
		return
	}
	u.eps[i] = strings.Clone(m.PushEndpoint) // m aliases the frame
	if u.regs--; u.regs == 0 {
		u.registered = true
		u.l.s.publish(u)
		u.eps = nil
		u.ready()
	}
}

func (u *ua) channelIndex(s string) int {
	var want [36]byte
	for i, c := range u.chids {
		if string(appendUUID(want[:0], c)) == s {
			return i
		}
	}
	return -1
}

// notification decrypts, checks, accounts and acks one push.
func (u *ua) notification(m *serverMsg) {
	l, s := u.l, u.l.s
	now := l.now
	s.received.Add(1)
	if u.state == stReady {
		// Ack whatever it is, so a bad push cannot hold a flow-control slot.
		defer u.ack(m)
	}
	if u.keys == nil || m.Encoding != "aes128gcm" {
		s.badContent.Add(1)
		s.reason("push without aes128gcm payload")
		return
	}
	body, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(m.Data, "="))
	if err == nil {
		body, err = u.keys.decrypt(body)
	}
	if err != nil {
		s.badContent.Add(1)
		s.reason("push does not decrypt")
		return
	}
	id, err := ledger.ParsePayload(body, s.cfg.PayloadSize)
	if err != nil {
		s.badContent.Add(1)
		s.reason("push content differs")
		return
	}
	if id.Run != s.cfg.Run || id.Worker != uint32(s.cfg.Worker) {
		s.unknown.Add(1)
		s.reason("push from another run or worker")
		return
	}
	if id.UA != uint32(u.idx) {
		s.misrouted.Add(1)
		s.reason("push reached the wrong user agent")
		return
	}
	kind := s.env.Ledger.Receive(id.Seq, u.idx, u.conn)
	s.tracef("ua %d conn %d recv seq %d version %s kind %d state %s", u.gid, u.conn, id.Seq, m.Version, kind, stateNames[u.state])
	switch kind {
	case ledger.First:
		s.env.Latency.Record(id.At, now)
		s.lastRecv.Store(time.Now().UnixNano())
	case ledger.AgainUnacked:
		s.redelivUnacked.Add(1)
	case ledger.AgainAckUnverified:
		s.redelivUnverified.Add(1)
	case ledger.AfterAck:
		s.dupAfterAck.Add(1)
		s.env.Logf("DUPLICATE AFTER ACK: ua %d (uaid %x) seq %d version %s on connection %d", u.gid, u.uaid, id.Seq, m.Version, u.conn)
	case ledger.Unknown:
		s.unknown.Add(1)
		return
	}
	if u.state == stReady {
		s.env.Ledger.Ack(id.Seq, u.conn)
		u.acks = append(u.acks, id.Seq)
	}
}

func (u *ua) ack(m *serverMsg) {
	if u.fd < 0 || u.state != stReady {
		return
	}
	b := append(u.l.scratch(), `{"messageType":"ack","updates":[{"channelID":`...)
	b = appendJSONString(b, m.ChannelID)
	b = append(b, `,"version":`...)
	b = appendJSONString(b, m.Version)
	u.sendText(append(b, `,"code":100}]}`...))
	u.l.s.acked.Add(1)
}

// parseUAID reads a uaid in either form (32 hex digits, or dashed).
func parseUAID(s string) ([16]byte, bool) {
	var id [16]byte
	s = strings.ReplaceAll(s, "-", "")
	if len(s) != 32 {
		return id, false
	}
	_, err := hex.Decode(id[:], []byte(s))
	return id, err == nil
}

// appendUUID appends u in the dashed, lower-case form.
func appendUUID(dst []byte, u [16]byte) []byte {
	dst = hex.AppendEncode(dst, u[0:4])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[4:6])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[6:8])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[8:10])
	dst = append(dst, '-')
	return hex.AppendEncode(dst, u[10:16])
}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, `\u00`...)
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
