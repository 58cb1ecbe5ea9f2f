package protocol

// The websocket protocol between a user agent (Firefox) and a connection
// node: the messages the client sends (decoded by DecodeClient into a
// ClientMessage), the replies and pushes the server sends (Append* in
// encode.go), and the Notification the API tier hands the engine
// over the internal node API (whose body codec is internal/nodeapi's).
//
// Wire facts this follows (autopush 1.33 manual, autopush-rs, Firefox):
//   - every client message is one JSON object tagged by "messageType";
//     the bare object {} is a ping;
//   - unknown keys are ignored, keys are case sensitive, last duplicate wins;
//   - the server answers ping with {} and never answers ack or nack.

import (
	"errors"
	"strconv"
	"unsafe"

	"github.com/autopush-go/autopush/internal/jsonscan"
)

// MessageType says which client message a ClientMessage holds.
type MessageType uint8

const (
	MsgUnknown            MessageType = iota // zero value; never returned by a successful decode
	MsgHello                                 // "hello": first message, identifies the user agent
	MsgRegister                              // "register": subscribe a channel
	MsgUnregister                            // "unregister": drop a channel
	MsgAck                                   // "ack": notifications received (no reply)
	MsgNack                                  // "nack": a notification failed in the client (no reply)
	MsgPing                                  // "ping" or {}: keepalive, answered with {}
	MsgBroadcastSubscribe                    // "broadcast_subscribe": add broadcast (megaphone) ids
)

var typeNames = [...]string{
	MsgUnknown:            "",
	MsgHello:              "hello",
	MsgRegister:           "register",
	MsgUnregister:         "unregister",
	MsgAck:                "ack",
	MsgNack:               "nack",
	MsgPing:               "ping",
	MsgBroadcastSubscribe: "broadcast_subscribe",
}

// String returns the wire name ("hello", ...); "" for MsgUnknown.
func (t MessageType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "MessageType(" + strconv.Itoa(int(t)) + ")"
}

// Limits DecodeClient enforces. A message past any of them fails with
// ErrLimit, so one client cannot make the node do unbounded work.
const (
	// MaxClientMessageSize bounds a whole client message in bytes. Firefox's
	// largest message is a hello listing legacy channelIDs (about 40 bytes
	// each); 64 KiB leaves room for 1,500 of them.
	MaxClientMessageSize = 64 << 10
	// MaxDepth bounds nesting of objects and arrays, the top level counting 1
	// (the scanner's limit, jsonscan.MaxDepth).
	MaxDepth = jsonscan.MaxDepth
	// MaxAckUpdates bounds the updates of one ack.
	MaxAckUpdates = 1024
	// MaxBroadcasts bounds the broadcast ids of one hello or
	// broadcast_subscribe (duplicates are merged with a linear scan).
	MaxBroadcasts = 128
)

// Ack codes (manual §4 "ACK codes"). An ack without a code means 100.
const (
	AckDelivered      = 100 // handed to the application
	AckDecryptFailed  = 101 // received, but decryption failed
	AckNotDelivered   = 102 // not delivered (expired subscription, client error, ...)
	NackPushHandler   = 301 // the push handler threw
	NackWaitUntil     = 302 // the promise passed to waitUntil rejected
	NackOther         = 303 // another error while dispatching the event
	UnregisterManual  = 200 // unsubscribe() or history cleared
	UnregisterQuota   = 201 // quota exceeded
	UnregisterRevoked = 202 // permission revoked
)

// BroadcastNotFound is the version autopush-rs reports, under "errors",
// for a broadcast id the server does not know.
const BroadcastNotFound = "Broadcast not found"

// AckUpdate is one entry of an ack's "updates".
type AckUpdate struct {
	ChannelID string // as sent; check with ParseChannelID
	Version   string
	Code      int  // 0..65535 when HasCode
	HasCode   bool // false: the client sent no code (means AckDelivered)
}

// Broadcast is one broadcast id and its version, in either direction. In
// server messages an error entry carries the error text as Version.
type Broadcast struct {
	ID      string
	Version string
}

// ClientMessage is one decoded client message. It is flat: Type says which
// fields carry meaning; DecodeClient zeroes the fields other types use.
//
// Lifetime: DecodeClient does not copy. Every string field (and every
// string inside Updates and Broadcasts) points into the buffer passed to
// DecodeClient, so it is valid only until that buffer is reused. Call Own
// before keeping any of it longer (in a map, a queue, another goroutine).
//
// Allocation: DecodeClient appends Updates and Broadcasts into the slices m
// already holds, so a ClientMessage reused for every message (one per event
// loop, say) decodes without allocating once it has seen an ack. A fresh
// ClientMessage on the stack stays there (DecodeClient does not leak it) and
// allocates only the Updates or Broadcasts slice, when the message has one.
// (Inline arrays inside ClientMessage would avoid even that, but a struct
// pointing into itself always escapes to the heap, costing more than the
// slice.) The next DecodeClient into m reuses those slices' arrays, so a
// copy of m made earlier must not rely on them. Not safe for concurrent use.
type ClientMessage struct {
	Type MessageType

	// hello
	UAID       string // as sent (may be "" or invalid: treat as a new user); check with ParseUAID
	HasUAID    bool   // the "uaid" key was present and a string (Firefox omits it on first use)
	UseWebPush bool   // informational; the server always speaks webpush

	// hello (optional) and broadcast_subscribe (required): the client's
	// broadcast ids and the versions it has, duplicates merged (last wins).
	// Empty (possibly non-nil) when there are none.
	Broadcasts    []Broadcast
	HasBroadcasts bool // "broadcasts" was present and an object

	// register, unregister
	ChannelID string // as sent; register requires ValidChannelID (see there)
	Key       string // register: VAPID public key, base64url, padding as sent; "" if none

	// unregister (0..2^32-1), nack (-2^31..2^31-1); range checked per type
	Code    int64
	HasCode bool

	// nack
	Version string

	// ack; empty (possibly non-nil) for other types
	Updates []AckUpdate
}

// Own copies every string m holds into one fresh allocation, so m no longer
// refers to the buffer it was decoded from. The Updates and Broadcasts
// arrays are not copied: the next DecodeClient into m still reuses them.
func (m *ClientMessage) Own() {
	n := len(m.UAID) + len(m.ChannelID) + len(m.Key) + len(m.Version)
	for i := range m.Updates {
		n += len(m.Updates[i].ChannelID) + len(m.Updates[i].Version)
	}
	for i := range m.Broadcasts {
		n += len(m.Broadcasts[i].ID) + len(m.Broadcasts[i].Version)
	}
	if n == 0 {
		return
	}
	a := arena(make([]byte, 0, n))
	m.UAID = a.copy(m.UAID)
	m.ChannelID = a.copy(m.ChannelID)
	m.Key = a.copy(m.Key)
	m.Version = a.copy(m.Version)
	for i := range m.Updates {
		m.Updates[i].ChannelID = a.copy(m.Updates[i].ChannelID)
		m.Updates[i].Version = a.copy(m.Updates[i].Version)
	}
	for i := range m.Broadcasts {
		m.Broadcasts[i].ID = a.copy(m.Broadcasts[i].ID)
		m.Broadcasts[i].Version = a.copy(m.Broadcasts[i].Version)
	}
}

// arena hands out strings backed by one preallocated byte slice. It
// never grows: callers size it exactly, so earlier strings stay valid.
type arena []byte

func (a *arena) copy(s string) string {
	if s == "" {
		return ""
	}
	start := len(*a)
	*a = append(*a, s...)
	return unsafe.String(&(*a)[start], len(s))
}

// Header is one HTTP header of a notification that the client needs to
// decrypt it (encoding, and for aesgcm: encryption, crypto_key,
// encryption_key). Names are lower case as autopush sends them.
type Header struct {
	Name  string
	Value string
}

// Notification is one push message on its way to a user agent.
//
// The API tier sends it to the engine as the body of PUT /push/{uaid}
// (nodeapi.AppendNotification / nodeapi.DecodeNotification, schema in
// internal/nodeapi/codec.go); the engine forwards it to the client as a
// "notification" message (AppendNotification), which carries only
// channelID, version, data and headers, and for a tracked one
// reliability_id (AppendTrackedNotification).
//
// A Notification filled by nodeapi.DecodeNotification points into the
// decoded buffer; Clone it before keeping it. Copying by value is safe.
type Notification struct {
	ChannelID string   // lower-case dashed UUID
	Version   string   // message id the client acks with (opaque to the engine)
	TTL       int64    // seconds the message may be stored; 0: deliver now or drop
	Topic     string   // "" when none; replaces a stored message with the same topic
	Timestamp int64    // seconds since the epoch when the API tier accepted it
	SortKey   uint64   // storage sort key: receipt time in ns (storage.NewSortKey), also versions topic messages
	Data      string   // encrypted payload, base64url without padding; "" when none
	Headers   []Header // crypto headers; only sent along with Data
	// Tracked: a fate record follows the message (storage.FateStore): its
	// node reports its transmission and ack. The client sees its fate id
	// as reliability_id (AppendTrackedNotification), not this flag.
	Tracked bool
}

// Clone returns a copy of n that shares no memory with n (one allocation
// for the strings, one for Headers).
func (n *Notification) Clone() Notification {
	c := *n
	size := len(n.ChannelID) + len(n.Version) + len(n.Topic) + len(n.Data)
	for _, h := range n.Headers {
		size += len(h.Name) + len(h.Value)
	}
	a := arena(make([]byte, 0, size))
	c.ChannelID = a.copy(n.ChannelID)
	c.Version = a.copy(n.Version)
	c.Topic = a.copy(n.Topic)
	c.Data = a.copy(n.Data)
	if n.Headers != nil {
		c.Headers = make([]Header, len(n.Headers))
		for i, h := range n.Headers {
			c.Headers[i] = Header{a.copy(h.Name), a.copy(h.Value)}
		}
	}
	return c
}

// Decode error categories; every error DecodeClient and
// nodeapi.DecodeNotification return is a *DecodeError wrapping one of them
// (test with errors.Is). ErrSyntax and ErrLimit are the scanner's own
// (jsonscan's, the same values). The engine closes the connection on any of
// them, as autopush-rs does. The texts reach clients (the websocket close
// reason, the node API's 400 body): they are wire behaviour, "webpush: "
// prefix included.
var (
	ErrSyntax       = jsonscan.ErrSyntax // "webpush: malformed JSON"
	ErrUnknownType  = errors.New("webpush: missing or unknown messageType")
	ErrInvalidField = errors.New("webpush: missing or invalid field")
	ErrLimit        = jsonscan.ErrLimit // "webpush: message exceeds a limit"
)

// DecodeError says where and why a message was rejected: Offset, Reason,
// and Err, the category (ErrSyntax, ErrUnknownType, ErrInvalidField or
// ErrLimit). It is the scanner's error type, jsonscan.DecodeError.
type DecodeError = jsonscan.DecodeError
