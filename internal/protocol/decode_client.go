package protocol

// Client messages: DecodeClient reads one websocket text frame into a
// ClientMessage, using internal/jsonscan's scanner, and checks the fields
// each message type needs.

import (
	"math"
	"math/bits"

	"github.com/autopush-go/autopush/internal/jsonscan"
)

// DecodeClient decodes one client message (a websocket text frame) into m,
// overwriting everything m held.
//
// It does not allocate, except to grow m.Updates or m.Broadcasts beyond the
// capacity m already has (see ClientMessage), and m does not escape.
//
// buf belongs to the caller but is modified: strings with escapes are
// unescaped in place, so buf cannot be decoded twice. The strings in m point
// into buf; see ClientMessage for how long they stay valid.
//
// What it accepts: one JSON object (RFC 8259, valid UTF-8, at most
// MaxClientMessageSize bytes and MaxDepth deep), optionally surrounded by
// whitespace. Keys are matched exactly; unknown keys are skipped (but must
// be valid JSON); the last of duplicate keys wins. The object {} is a ping.
// A known key holding the wrong JSON type, or a required key missing, is an
// error only when the key matters to the messageType (autopush-rs ignores
// keys a message type does not have); null counts as missing. Codes must be
// integers (no fraction or exponent) in the range autopush-rs accepts:
// ack 0..65535, unregister 0..2^32-1, nack -2^31..2^31-1. Channel IDs and
// UAIDs are not checked here: use ValidChannelID, ParseChannelID, ParseUAID.
//
// Errors are *DecodeError wrapping ErrSyntax, ErrUnknownType,
// ErrInvalidField or ErrLimit.
func DecodeClient(buf []byte, m *ClientMessage) error {
	d := clientDecoder{
		s:   jsonscan.New(buf),
		ups: reuse(m.Updates),
		bcs: reuse(m.Broadcasts),
	}
	*m = ClientMessage{Updates: d.ups, Broadcasts: d.bcs}
	if len(buf) > MaxClientMessageSize {
		return &DecodeError{Offset: MaxClientMessageSize, Reason: "message too large", Err: ErrLimit}
	}
	return d.decode(m)
}

// keepCap bounds the Updates or Broadcasts capacity kept across
// decodes: one huge ack must not pin a large array to a long-lived message.
const keepCap = 64

// reuse returns s emptied for reuse, with the strings it held cleared
// so that they do not keep an old buffer alive.
func reuse[T any](s []T) []T {
	if cap(s) > keepCap {
		return nil
	}
	clear(s[:cap(s)])
	return s[:0]
}

// Fields of a client message, as bits; per message type, typeFields
// says which are kept, which must be well typed, which are required.
const (
	fieldUAID uint16 = 1 << iota
	fieldWebPush
	fieldBroadcasts
	fieldChannelID
	fieldKey
	fieldCode
	fieldVersion
	fieldUpdates
	fieldCount = iota
)

var fieldNames = [fieldCount]string{
	"uaid", "use_webpush", "broadcasts", "channelID", "key", "code", "version", "updates",
}

type typeRule struct {
	keep, strict, required uint16
}

var typeFields = [...]typeRule{
	// use_webpush is kept but not strict: autopush-rs ignores it entirely.
	MsgHello:              {fieldUAID | fieldWebPush | fieldBroadcasts, fieldUAID | fieldBroadcasts, 0},
	MsgRegister:           {fieldChannelID | fieldKey, fieldChannelID | fieldKey, fieldChannelID},
	MsgUnregister:         {fieldChannelID | fieldCode, fieldChannelID | fieldCode, fieldChannelID},
	MsgAck:                {fieldUpdates, fieldUpdates, fieldUpdates},
	MsgNack:               {fieldVersion | fieldCode, fieldVersion | fieldCode, fieldVersion},
	MsgPing:               {0, 0, 0},
	MsgBroadcastSubscribe: {fieldBroadcasts, fieldBroadcasts, fieldBroadcasts},
}

func lookupType(s string) MessageType {
	switch s {
	case "hello":
		return MsgHello
	case "register":
		return MsgRegister
	case "unregister":
		return MsgUnregister
	case "ack":
		return MsgAck
	case "nack":
		return MsgNack
	case "ping":
		return MsgPing
	case "broadcast_subscribe":
		return MsgBroadcastSubscribe
	}
	return MsgUnknown
}

// clientDecoder is the state of one DecodeClient. The message is
// passed to its methods rather than held in it: escape analysis does not
// tell struct fields apart, and the strings taken from buf (held here)
// legitimately flow into the message, which would make the message itself
// escape if it were a field too.
type clientDecoder struct {
	s       jsonscan.Scanner
	ups     []AckUpdate // Updates being built
	bcs     []Broadcast // Broadcasts being built
	seen    uint16      // fields present with a usable value
	bad     uint16      // fields whose last value had the wrong type or range
	badAt   [fieldCount]int32
	typ     string
	typAt   int
	hasType bool
	codeAt  int
}

func (d *clientDecoder) decode(m *ClientMessage) error {
	s := &d.s
	if s.Next() != '{' {
		return s.Fail(ErrSyntax, "message is not a JSON object")
	}
	s.Advance()
	nkeys := 0
	if s.Next() == '}' {
		s.Advance()
	} else {
		for {
			if s.Next() != '"' {
				return s.Fail(ErrSyntax, "expected an object key")
			}
			key, err := s.ReadString()
			if err != nil {
				return err
			}
			if s.Next() != ':' {
				return s.Fail(ErrSyntax, "expected ':' after an object key")
			}
			s.Advance()
			s.SkipSpace()
			if err := d.field(m, key); err != nil {
				return err
			}
			nkeys++
			c := s.Next()
			if c == '}' {
				s.Advance()
				break
			}
			if c != ',' {
				return s.Fail(ErrSyntax, "expected ',' or '}' in object")
			}
			s.Advance()
		}
	}
	if !s.AtEnd() {
		return s.Fail(ErrSyntax, "data after the JSON object")
	}
	return d.finish(m, nkeys)
}

// field decodes the value of one top-level key; the scanner is at the value.
func (d *clientDecoder) field(m *ClientMessage, key string) error {
	s := &d.s
	switch key {
	case "messageType":
		if s.Peek() != '"' {
			return s.Fail(ErrUnknownType, "messageType is not a string")
		}
		d.typAt = s.Pos()
		v, err := s.ReadString()
		d.typ, d.hasType = v, true
		return err
	case "uaid":
		return d.stringField(fieldUAID, &m.UAID)
	case "channelID":
		return d.stringField(fieldChannelID, &m.ChannelID)
	case "key":
		return d.stringField(fieldKey, &m.Key)
	case "version":
		return d.stringField(fieldVersion, &m.Version)
	case "use_webpush":
		switch s.Peek() {
		case 't', 'f', 'n':
			v, isBool, err := s.ReadLiteral()
			if err != nil {
				return err
			}
			m.UseWebPush = v && isBool
			if isBool {
				d.set(fieldWebPush)
			} else {
				d.unset(fieldWebPush)
			}
			return nil
		}
		d.markBad(fieldWebPush, s.Pos())
		return s.SkipValue(2)
	case "code":
		d.codeAt = s.Pos()
		v, ok, present, err := s.ReadInt(2)
		if err != nil {
			return err
		}
		m.Code, m.HasCode = v, ok
		switch {
		case ok:
			d.set(fieldCode)
		case present:
			d.markBad(fieldCode, d.codeAt)
		default:
			d.unset(fieldCode)
		}
		return nil
	case "broadcasts":
		return d.broadcasts()
	case "updates":
		return d.updates()
	}
	return s.SkipValue(2)
}

func (d *clientDecoder) set(f uint16)   { d.seen |= f; d.bad &^= f }
func (d *clientDecoder) unset(f uint16) { d.seen &^= f; d.bad &^= f }

// markBad records that f's value, at offset at, has the wrong type or range.
func (d *clientDecoder) markBad(f uint16, at int) {
	d.seen &^= f
	d.bad |= f
	d.badAt[bits.TrailingZeros16(f)] = int32(at)
}

// stringField reads a string or null into *dst; any other type marks f bad.
func (d *clientDecoder) stringField(f uint16, dst *string) error {
	s := &d.s
	*dst = ""
	switch s.Peek() {
	case '"':
		v, err := s.ReadString()
		*dst = v
		d.set(f)
		return err
	case 'n':
		if s.ReadNull() {
			d.unset(f)
			return nil
		}
	}
	d.markBad(f, s.Pos())
	return s.SkipValue(2)
}

// broadcasts reads {"id": "version", ...}; duplicate ids: last wins.
func (d *clientDecoder) broadcasts() error {
	s := &d.s
	d.bcs = d.bcs[:0]
	switch s.Peek() {
	case '{':
	case 'n':
		if s.ReadNull() {
			d.unset(fieldBroadcasts)
			return nil
		}
		fallthrough
	default:
		d.markBad(fieldBroadcasts, s.Pos())
		return s.SkipValue(2)
	}
	start := s.Pos()
	bad := false
	err := s.Object(func(key string) error {
		if s.Peek() != '"' {
			bad = true
			return s.SkipValue(3)
		}
		v, err := s.ReadString()
		if err != nil {
			return err
		}
		for i := range d.bcs {
			if d.bcs[i].ID == key {
				d.bcs[i].Version = v
				return nil
			}
		}
		if len(d.bcs) == MaxBroadcasts {
			return s.Fail(ErrLimit, "too many broadcasts")
		}
		d.bcs = append(d.bcs, Broadcast{ID: key, Version: v})
		return nil
	})
	if err != nil {
		return err
	}
	if bad {
		d.markBad(fieldBroadcasts, start)
		return nil
	}
	d.set(fieldBroadcasts)
	return nil
}

// updates reads [{"channelID": "...", "version": "...", "code": 100}, ...].
func (d *clientDecoder) updates() error {
	s := &d.s
	d.ups = d.ups[:0]
	switch s.Peek() {
	case '[':
	case 'n':
		if s.ReadNull() {
			d.unset(fieldUpdates)
			return nil
		}
		fallthrough
	default:
		d.markBad(fieldUpdates, s.Pos())
		return s.SkipValue(2)
	}
	s.Advance()
	badAt := -1
	if s.Next() == ']' {
		s.Advance()
	} else {
		for {
			if len(d.ups) == MaxAckUpdates {
				return s.Fail(ErrLimit, "too many ack updates")
			}
			at := s.Pos()
			u, ok, err := d.update()
			if err != nil {
				return err
			}
			if ok {
				d.ups = append(d.ups, u)
			} else if badAt < 0 {
				badAt = at
			}
			c := s.Next()
			if c == ']' {
				s.Advance()
				break
			}
			if c != ',' {
				return s.Fail(ErrSyntax, "expected ',' or ']' in array")
			}
			s.Advance()
		}
	}
	if badAt >= 0 {
		d.markBad(fieldUpdates, badAt)
		return nil
	}
	d.set(fieldUpdates)
	return nil
}

// update reads one element of updates; ok is false if it is not a well
// typed update (it is skipped, and the message fails if it is an ack).
func (d *clientDecoder) update() (u AckUpdate, ok bool, err error) {
	s := &d.s
	if s.Peek() != '{' {
		return u, false, s.SkipValue(3)
	}
	var haveChannel, haveVersion bool
	ok = true
	err = s.Object(func(key string) error {
		switch key {
		case "channelID", "version":
			var v string
			var good bool
			switch s.Peek() {
			case '"':
				var err error
				v, err = s.ReadString()
				if err != nil {
					return err
				}
				good = true
			case 'n':
				if !s.ReadNull() {
					ok = false
					return s.SkipValue(4)
				}
			default:
				ok = false
				return s.SkipValue(4)
			}
			if key == "channelID" {
				u.ChannelID, haveChannel = v, good
			} else {
				u.Version, haveVersion = v, good
			}
		case "code":
			v, isInt, present, err := s.ReadInt(4)
			if err != nil {
				return err
			}
			switch {
			case isInt && v >= 0 && v <= math.MaxUint16:
				u.Code, u.HasCode = int(v), true
			case present:
				ok = false
			default:
				u.Code, u.HasCode = 0, false
			}
		default:
			return s.SkipValue(4)
		}
		return nil
	})
	return u, ok && haveChannel && haveVersion, err
}

// finish maps messageType, checks the fields that type needs and zeroes
// the others, so a ClientMessage never shows stale or foreign fields.
func (d *clientDecoder) finish(m *ClientMessage, nkeys int) error {
	if !d.hasType {
		if nkeys == 0 {
			m.Type = MsgPing
			return nil
		}
		return &DecodeError{Offset: 0, Reason: "no messageType", Err: ErrUnknownType}
	}
	t := lookupType(d.typ)
	if t == MsgUnknown {
		return &DecodeError{Offset: d.typAt, Reason: "unknown messageType", Err: ErrUnknownType}
	}
	rule := typeFields[t]
	if b := d.bad & rule.strict; b != 0 {
		i := bits.TrailingZeros16(b)
		return &DecodeError{Offset: int(d.badAt[i]), Reason: t.String() + ": invalid " + fieldNames[i], Err: ErrInvalidField}
	}
	if b := rule.required &^ d.seen; b != 0 {
		i := bits.TrailingZeros16(b)
		return &DecodeError{Offset: d.typAt, Reason: t.String() + ": missing " + fieldNames[i], Err: ErrInvalidField}
	}
	keep := rule.keep
	if m.HasCode && keep&fieldCode != 0 {
		lo, hi := int64(0), int64(math.MaxUint32)
		if t == MsgNack {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		if m.Code < lo || m.Code > hi {
			return &DecodeError{Offset: d.codeAt, Reason: t.String() + ": code out of range", Err: ErrInvalidField}
		}
	}
	m.Type = t
	m.HasUAID = keep&d.seen&fieldUAID != 0
	m.HasBroadcasts = keep&d.seen&fieldBroadcasts != 0
	m.Updates, m.Broadcasts = d.ups[:0], d.bcs[:0]
	if keep&fieldUpdates != 0 {
		m.Updates = d.ups
	}
	if keep&fieldBroadcasts != 0 {
		m.Broadcasts = d.bcs
	}
	if keep&fieldUAID == 0 {
		m.UAID = ""
	}
	if keep&fieldWebPush == 0 {
		m.UseWebPush = false
	}
	if keep&fieldChannelID == 0 {
		m.ChannelID = ""
	}
	if keep&fieldKey == 0 {
		m.Key = ""
	}
	if keep&fieldCode == 0 {
		m.Code, m.HasCode = 0, false
	}
	if keep&fieldVersion == 0 {
		m.Version = ""
	}
	return nil
}
