package webpush

// A hand-written JSON scanner for client messages. encoding/json would
// allocate for every message (reflection, a map or struct per message, a
// string per field); a connection node decodes an ack or ping from every
// client every few minutes, so this one allocates nothing when strings
// carry no escapes, and unescapes in place when they do.

import (
	"math"
	"math/bits"
	"unicode/utf8"
	"unsafe"
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
	d := protoClientDecoder{
		s:   protoScanner{buf: buf},
		ups: protoReuse(m.Updates),
		bcs: protoReuse(m.Broadcasts),
	}
	*m = ClientMessage{Updates: d.ups, Broadcasts: d.bcs}
	if len(buf) > MaxClientMessageSize {
		return &DecodeError{Offset: MaxClientMessageSize, Reason: "message too large", Err: ErrLimit}
	}
	return d.decode(m)
}

// protoKeepCap bounds the Updates or Broadcasts capacity kept across
// decodes: one huge ack must not pin a large array to a long-lived message.
const protoKeepCap = 64

// protoReuse returns s emptied for reuse, with the strings it held cleared
// so that they do not keep an old buffer alive.
func protoReuse[T any](s []T) []T {
	if cap(s) > protoKeepCap {
		return nil
	}
	clear(s[:cap(s)])
	return s[:0]
}

// Fields of a client message, as bits; per message type, protoTypeFields
// says which are kept, which must be well typed, which are required.
const (
	protoFUAID uint16 = 1 << iota
	protoFWebPush
	protoFBroadcasts
	protoFChannelID
	protoFKey
	protoFCode
	protoFVersion
	protoFUpdates
	protoFieldCount = iota
)

var protoFieldNames = [protoFieldCount]string{
	"uaid", "use_webpush", "broadcasts", "channelID", "key", "code", "version", "updates",
}

type protoTypeRule struct {
	keep, strict, required uint16
}

var protoTypeFields = [...]protoTypeRule{
	// use_webpush is kept but not strict: autopush-rs ignores it entirely.
	MsgHello:              {protoFUAID | protoFWebPush | protoFBroadcasts, protoFUAID | protoFBroadcasts, 0},
	MsgRegister:           {protoFChannelID | protoFKey, protoFChannelID | protoFKey, protoFChannelID},
	MsgUnregister:         {protoFChannelID | protoFCode, protoFChannelID | protoFCode, protoFChannelID},
	MsgAck:                {protoFUpdates, protoFUpdates, protoFUpdates},
	MsgNack:               {protoFVersion | protoFCode, protoFVersion | protoFCode, protoFVersion},
	MsgPing:               {0, 0, 0},
	MsgBroadcastSubscribe: {protoFBroadcasts, protoFBroadcasts, protoFBroadcasts},
}

func protoLookupType(s string) MessageType {
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

// protoClientDecoder is the state of one DecodeClient. The message is
// passed to its methods rather than held in it: escape analysis does not
// tell struct fields apart, and the strings taken from buf (held here)
// legitimately flow into the message, which would make the message itself
// escape if it were a field too.
type protoClientDecoder struct {
	s       protoScanner
	ups     []AckUpdate // Updates being built
	bcs     []Broadcast // Broadcasts being built
	seen    uint16      // fields present with a usable value
	bad     uint16      // fields whose last value had the wrong type or range
	badAt   [protoFieldCount]int32
	typ     string
	typAt   int
	hasType bool
	codeAt  int
}

func (d *protoClientDecoder) decode(m *ClientMessage) error {
	s := &d.s
	if s.next() != '{' {
		return s.fail(ErrSyntax, "message is not a JSON object")
	}
	s.pos++
	nkeys := 0
	if s.next() == '}' {
		s.pos++
	} else {
		for {
			if s.next() != '"' {
				return s.fail(ErrSyntax, "expected an object key")
			}
			key, err := s.readString()
			if err != nil {
				return err
			}
			if s.next() != ':' {
				return s.fail(ErrSyntax, "expected ':' after an object key")
			}
			s.pos++
			s.skipSpace()
			if err := d.field(m, key); err != nil {
				return err
			}
			nkeys++
			c := s.next()
			s.pos++
			if c == '}' {
				break
			}
			if c != ',' {
				s.pos--
				return s.fail(ErrSyntax, "expected ',' or '}' in object")
			}
		}
	}
	if s.skipSpace(); s.pos != len(s.buf) {
		return s.fail(ErrSyntax, "data after the JSON object")
	}
	return d.finish(m, nkeys)
}

// field decodes the value of one top-level key; s.pos is at the value.
func (d *protoClientDecoder) field(m *ClientMessage, key string) error {
	s := &d.s
	switch key {
	case "messageType":
		if s.peek() != '"' {
			return s.fail(ErrUnknownType, "messageType is not a string")
		}
		d.typAt = s.pos
		v, err := s.readString()
		d.typ, d.hasType = v, true
		return err
	case "uaid":
		return d.stringField(protoFUAID, &m.UAID)
	case "channelID":
		return d.stringField(protoFChannelID, &m.ChannelID)
	case "key":
		return d.stringField(protoFKey, &m.Key)
	case "version":
		return d.stringField(protoFVersion, &m.Version)
	case "use_webpush":
		switch s.peek() {
		case 't', 'f', 'n':
			v, isBool, err := s.readLiteral()
			if err != nil {
				return err
			}
			m.UseWebPush = v && isBool
			if isBool {
				d.set(protoFWebPush)
			} else {
				d.unset(protoFWebPush)
			}
			return nil
		}
		d.markBad(protoFWebPush, s.pos)
		return s.skipValue(2)
	case "code":
		d.codeAt = s.pos
		v, ok, present, err := s.readInt(2)
		if err != nil {
			return err
		}
		m.Code, m.HasCode = v, ok
		switch {
		case ok:
			d.set(protoFCode)
		case present:
			d.markBad(protoFCode, d.codeAt)
		default:
			d.unset(protoFCode)
		}
		return nil
	case "broadcasts":
		return d.broadcasts()
	case "updates":
		return d.updates()
	}
	return s.skipValue(2)
}

func (d *protoClientDecoder) set(f uint16)   { d.seen |= f; d.bad &^= f }
func (d *protoClientDecoder) unset(f uint16) { d.seen &^= f; d.bad &^= f }

// markBad records that f's value, at offset at, has the wrong type or range.
func (d *protoClientDecoder) markBad(f uint16, at int) {
	d.seen &^= f
	d.bad |= f
	d.badAt[bits.TrailingZeros16(f)] = int32(at)
}

// stringField reads a string or null into *dst; any other type marks f bad.
func (d *protoClientDecoder) stringField(f uint16, dst *string) error {
	s := &d.s
	*dst = ""
	switch s.peek() {
	case '"':
		v, err := s.readString()
		*dst = v
		d.set(f)
		return err
	case 'n':
		if s.readNull() {
			d.unset(f)
			return nil
		}
	}
	d.markBad(f, s.pos)
	return s.skipValue(2)
}

// broadcasts reads {"id": "version", ...}; duplicate ids: last wins.
func (d *protoClientDecoder) broadcasts() error {
	s := &d.s
	d.bcs = d.bcs[:0]
	switch s.peek() {
	case '{':
	case 'n':
		if s.readNull() {
			d.unset(protoFBroadcasts)
			return nil
		}
		fallthrough
	default:
		d.markBad(protoFBroadcasts, s.pos)
		return s.skipValue(2)
	}
	start := s.pos
	bad := false
	err := s.object(func(key string) error {
		if s.peek() != '"' {
			bad = true
			return s.skipValue(3)
		}
		v, err := s.readString()
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
			return s.fail(ErrLimit, "too many broadcasts")
		}
		d.bcs = append(d.bcs, Broadcast{ID: key, Version: v})
		return nil
	})
	if err != nil {
		return err
	}
	if bad {
		d.markBad(protoFBroadcasts, start)
		return nil
	}
	d.set(protoFBroadcasts)
	return nil
}

// updates reads [{"channelID": "...", "version": "...", "code": 100}, ...].
func (d *protoClientDecoder) updates() error {
	s := &d.s
	d.ups = d.ups[:0]
	switch s.peek() {
	case '[':
	case 'n':
		if s.readNull() {
			d.unset(protoFUpdates)
			return nil
		}
		fallthrough
	default:
		d.markBad(protoFUpdates, s.pos)
		return s.skipValue(2)
	}
	s.pos++
	badAt := -1
	if s.next() == ']' {
		s.pos++
	} else {
		for {
			if len(d.ups) == MaxAckUpdates {
				return s.fail(ErrLimit, "too many ack updates")
			}
			at := s.pos
			u, ok, err := d.update()
			if err != nil {
				return err
			}
			if ok {
				d.ups = append(d.ups, u)
			} else if badAt < 0 {
				badAt = at
			}
			c := s.next()
			s.pos++
			if c == ']' {
				break
			}
			if c != ',' {
				s.pos--
				return s.fail(ErrSyntax, "expected ',' or ']' in array")
			}
		}
	}
	if badAt >= 0 {
		d.markBad(protoFUpdates, badAt)
		return nil
	}
	d.set(protoFUpdates)
	return nil
}

// update reads one element of updates; ok is false if it is not a well
// typed update (it is skipped, and the message fails if it is an ack).
func (d *protoClientDecoder) update() (u AckUpdate, ok bool, err error) {
	s := &d.s
	if s.peek() != '{' {
		return u, false, s.skipValue(3)
	}
	var haveChannel, haveVersion bool
	ok = true
	err = s.object(func(key string) error {
		switch key {
		case "channelID", "version":
			var v string
			var good bool
			switch s.peek() {
			case '"':
				var err error
				v, err = s.readString()
				if err != nil {
					return err
				}
				good = true
			case 'n':
				if !s.readNull() {
					ok = false
					return s.skipValue(4)
				}
			default:
				ok = false
				return s.skipValue(4)
			}
			if key == "channelID" {
				u.ChannelID, haveChannel = v, good
			} else {
				u.Version, haveVersion = v, good
			}
		case "code":
			v, isInt, present, err := s.readInt(4)
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
			return s.skipValue(4)
		}
		return nil
	})
	return u, ok && haveChannel && haveVersion, err
}

// finish maps messageType, checks the fields that type needs and zeroes
// the others, so a ClientMessage never shows stale or foreign fields.
func (d *protoClientDecoder) finish(m *ClientMessage, nkeys int) error {
	if !d.hasType {
		if nkeys == 0 {
			m.Type = MsgPing
			return nil
		}
		return &DecodeError{Offset: 0, Reason: "no messageType", Err: ErrUnknownType}
	}
	t := protoLookupType(d.typ)
	if t == MsgUnknown {
		return &DecodeError{Offset: d.typAt, Reason: "unknown messageType", Err: ErrUnknownType}
	}
	rule := protoTypeFields[t]
	if b := d.bad & rule.strict; b != 0 {
		i := bits.TrailingZeros16(b)
		return &DecodeError{Offset: int(d.badAt[i]), Reason: t.String() + ": invalid " + protoFieldNames[i], Err: ErrInvalidField}
	}
	if b := rule.required &^ d.seen; b != 0 {
		i := bits.TrailingZeros16(b)
		return &DecodeError{Offset: d.typAt, Reason: t.String() + ": missing " + protoFieldNames[i], Err: ErrInvalidField}
	}
	keep := rule.keep
	if m.HasCode && keep&protoFCode != 0 {
		lo, hi := int64(0), int64(math.MaxUint32)
		if t == MsgNack {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		if m.Code < lo || m.Code > hi {
			return &DecodeError{Offset: d.codeAt, Reason: t.String() + ": code out of range", Err: ErrInvalidField}
		}
	}
	m.Type = t
	m.HasUAID = keep&d.seen&protoFUAID != 0
	m.HasBroadcasts = keep&d.seen&protoFBroadcasts != 0
	m.Updates, m.Broadcasts = d.ups[:0], d.bcs[:0]
	if keep&protoFUpdates != 0 {
		m.Updates = d.ups
	}
	if keep&protoFBroadcasts != 0 {
		m.Broadcasts = d.bcs
	}
	if keep&protoFUAID == 0 {
		m.UAID = ""
	}
	if keep&protoFWebPush == 0 {
		m.UseWebPush = false
	}
	if keep&protoFChannelID == 0 {
		m.ChannelID = ""
	}
	if keep&protoFKey == 0 {
		m.Key = ""
	}
	if keep&protoFCode == 0 {
		m.Code, m.HasCode = 0, false
	}
	if keep&protoFVersion == 0 {
		m.Version = ""
	}
	return nil
}

// DecodeNotification decodes the internal node API body (the schema is in
// AppendNotificationJSON) into n. Headers are appended to n.Headers[:0], so
// reusing n avoids allocating; everything else allocates nothing. Like
// DecodeClient it unescapes in place in buf and n's strings point into buf.
// Unknown keys are skipped; channelID and version are required; a wrong type
// or a negative number is an error.
func DecodeNotification(buf []byte, n *Notification) error {
	hdrs := n.Headers[:0]
	clear(hdrs[:cap(hdrs)])
	*n = Notification{}
	s := &protoScanner{buf: buf}
	if s.next() != '{' {
		return s.fail(ErrSyntax, "notification is not a JSON object")
	}
	var have uint8
	err := s.object(func(key string) error {
		switch key {
		case "channelID":
			have |= 1
			return s.wantString(&n.ChannelID, key)
		case "version":
			have |= 2
			return s.wantString(&n.Version, key)
		case "topic":
			return s.optString(&n.Topic, key)
		case "data":
			return s.optString(&n.Data, key)
		case "ttl":
			return s.wantUint(&n.TTL, key)
		case "timestamp":
			return s.wantUint(&n.Timestamp, key)
		case "sortkey_timestamp":
			if s.peek() == 'n' && s.readNull() {
				n.SortKey = 0
				return nil
			}
			at := s.pos
			mag, neg, integral, overflow, err := s.readNumber()
			if err != nil {
				return err
			}
			if neg && mag != 0 || !integral || overflow {
				s.pos = at
				return s.fail(ErrInvalidField, "sortkey_timestamp is not an unsigned 64-bit integer")
			}
			n.SortKey = mag
			return nil
		case "headers":
			var err error
			hdrs, err = s.headers(hdrs[:0])
			return err
		}
		return s.skipValue(2)
	})
	if err != nil {
		return err
	}
	if s.skipSpace(); s.pos != len(s.buf) {
		return s.fail(ErrSyntax, "data after the JSON object")
	}
	if have != 3 {
		return &DecodeError{Offset: 0, Reason: "notification needs channelID and version", Err: ErrInvalidField}
	}
	n.Headers = hdrs
	return nil
}

// protoMaxHeaders bounds the headers of a notification; autopush sends at
// most four (encoding, encryption, crypto_key, encryption_key).
const protoMaxHeaders = 16

func (s *protoScanner) headers(hdrs []Header) ([]Header, error) {
	if s.peek() == 'n' && s.readNull() {
		return hdrs, nil
	}
	if s.peek() != '{' {
		return hdrs, s.fail(ErrInvalidField, "headers is not an object")
	}
	err := s.object(func(key string) error {
		if s.peek() != '"' {
			return s.fail(ErrInvalidField, "header value is not a string")
		}
		v, err := s.readString()
		if err != nil {
			return err
		}
		for i := range hdrs {
			if hdrs[i].Name == key {
				hdrs[i].Value = v
				return nil
			}
		}
		if len(hdrs) == protoMaxHeaders {
			return s.fail(ErrLimit, "too many headers")
		}
		hdrs = append(hdrs, Header{Name: key, Value: v})
		return nil
	})
	return hdrs, err
}

func (s *protoScanner) wantString(dst *string, key string) error {
	if s.peek() != '"' {
		return s.fail(ErrInvalidField, key+" is not a string")
	}
	v, err := s.readString()
	*dst = v
	return err
}

func (s *protoScanner) optString(dst *string, key string) error {
	if s.peek() == 'n' && s.readNull() {
		*dst = ""
		return nil
	}
	return s.wantString(dst, key)
}

func (s *protoScanner) wantUint(dst *int64, key string) error {
	if s.peek() == 'n' && s.readNull() {
		*dst = 0
		return nil
	}
	v, ok, _, err := s.readInt(2)
	if err != nil {
		return err
	}
	if !ok || v < 0 {
		return s.fail(ErrInvalidField, key+" is not a non-negative integer")
	}
	*dst = v
	return nil
}

// protoScanner walks a JSON document in buf. Every method leaves pos at
// the first byte it did not consume; errors carry pos as their offset.
type protoScanner struct {
	buf []byte
	pos int
}

func (s *protoScanner) fail(cat error, reason string) error {
	return &DecodeError{Offset: s.pos, Reason: reason, Err: cat}
}

func (s *protoScanner) skipSpace() {
	for s.pos < len(s.buf) {
		switch s.buf[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// next skips whitespace and returns the byte there, 0 at the end (a NUL in
// the input is invalid wherever next is used, so 0 is never ambiguous).
func (s *protoScanner) next() byte {
	s.skipSpace()
	return s.peek()
}

func (s *protoScanner) peek() byte {
	if s.pos < len(s.buf) {
		return s.buf[s.pos]
	}
	return 0
}

// object walks an object at pos (which must be '{'), calling fn for every
// key with pos at its value; fn must consume the value. Objects given to
// object are at depth 2 or 3, well inside MaxDepth.
func (s *protoScanner) object(fn func(key string) error) error {
	s.pos++ // '{'
	if s.next() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.next() != '"' {
			return s.fail(ErrSyntax, "expected an object key")
		}
		key, err := s.readString()
		if err != nil {
			return err
		}
		if s.next() != ':' {
			return s.fail(ErrSyntax, "expected ':' after an object key")
		}
		s.pos++
		s.skipSpace()
		if err := fn(key); err != nil {
			return err
		}
		c := s.next()
		s.pos++
		if c == '}' {
			return nil
		}
		if c != ',' {
			s.pos--
			return s.fail(ErrSyntax, "expected ',' or '}' in object")
		}
	}
}

// protoStr returns b as a string without copying: the string aliases buf.
func protoStr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Strings are scanned 8 bytes at a time until one of the bytes that need
// a closer look: a quote, a backslash, a control character or a non-ASCII
// byte. IDs, versions and base64 payloads have none, so the common string
// costs one load and a few ALU operations per 8 bytes.
const (
	protoOnes  = 0x0101010101010101
	protoHighs = 0x8080808080808080
)

// protoStop8 reports whether one of the 8 bytes in x (little endian) is a
// quote, a backslash, below 0x20 or at least 0x80 (the classic "has zero
// byte" and "has byte less than" bit tricks; exact, no false positives).
func protoStop8(x uint64) bool {
	q := x ^ (protoOnes * '"')
	b := x ^ (protoOnes * '\\')
	return ((q-protoOnes)&^q|(b-protoOnes)&^b|(x-protoOnes*0x20)&^x|x)&protoHighs != 0
}

// protoLoad8 loads s[i:i+8] little endian (the compiler merges the loads).
func protoLoad8(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// protoSkipPlain returns the first index at or after i, in steps of 8,
// from which fewer than 8 bytes remain or the next 8 contain a stop byte.
func protoSkipPlain(s string, i int) int {
	for i+8 <= len(s) && !protoStop8(protoLoad8(s, i)) {
		i += 8
	}
	return i
}

// readString reads the string at pos (which must be '"'). Escapes are
// decoded in place; the result aliases buf.
func (s *protoScanner) readString() (string, error) {
	buf := s.buf
	start := s.pos + 1
	high := false
	for i := protoSkipPlain(protoStr(buf), start); i < len(buf); i++ {
		c := buf[i]
		switch {
		case c == '"':
			s.pos = i + 1
			if high && !utf8.Valid(buf[start:i]) {
				s.pos = start
				return "", s.fail(ErrSyntax, "invalid UTF-8 in string")
			}
			return protoStr(buf[start:i]), nil
		case c == '\\':
			return s.readEscaped(start, i, high)
		case c < 0x20:
			s.pos = i
			return "", s.fail(ErrSyntax, "control character in string")
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	s.pos = len(buf)
	return "", s.fail(ErrSyntax, "unterminated string")
}

// readEscaped continues readString from the first backslash at r, writing
// the decoded string to buf[start:w]. w never passes r: every escape is
// longer than what it decodes to.
func (s *protoScanner) readEscaped(start, r int, high bool) (string, error) {
	buf := s.buf
	w := r
	for r < len(buf) {
		c := buf[r]
		switch {
		case c == '"':
			s.pos = r + 1
			if high && !utf8.Valid(buf[start:w]) {
				s.pos = start
				return "", s.fail(ErrSyntax, "invalid UTF-8 in string")
			}
			return protoStr(buf[start:w]), nil
		case c == '\\':
			if r+1 >= len(buf) {
				s.pos = r
				return "", s.fail(ErrSyntax, "unterminated string")
			}
			e := buf[r+1]
			if e == 'u' {
				cp, n := protoDecodeU(buf, r)
				if n == 0 {
					s.pos = r
					return "", s.fail(ErrSyntax, "invalid \\u escape")
				}
				r += n
				w += utf8.EncodeRune(buf[w:], cp)
				continue
			}
			d := protoUnescape[e]
			if d == 0 {
				s.pos = r
				return "", s.fail(ErrSyntax, "invalid escape")
			}
			buf[w] = d
			w++
			r += 2
		case c < 0x20:
			s.pos = r
			return "", s.fail(ErrSyntax, "control character in string")
		default:
			if c >= utf8.RuneSelf {
				high = true
			}
			buf[w] = c
			w++
			r++
		}
	}
	s.pos = len(buf)
	return "", s.fail(ErrSyntax, "unterminated string")
}

var protoUnescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// protoDecodeU decodes \uXXXX at buf[r:], joining a surrogate pair. It
// returns the code point and the bytes consumed, 0 if invalid. A lone
// surrogate is invalid: it cannot be UTF-8, and no client sends one.
func protoDecodeU(buf []byte, r int) (rune, int) {
	cp, ok := protoHex4(buf, r+2)
	if !ok {
		return 0, 0
	}
	switch {
	case cp < 0xD800 || cp > 0xDFFF:
		return cp, 6
	case cp >= 0xDC00:
		return 0, 0
	}
	if r+7 >= len(buf) || buf[r+6] != '\\' || buf[r+7] != 'u' {
		return 0, 0
	}
	lo, ok := protoHex4(buf, r+8)
	if !ok || lo < 0xDC00 || lo > 0xDFFF {
		return 0, 0
	}
	return 0x10000 + (cp-0xD800)<<10 + (lo - 0xDC00), 12
}

func protoHex4(buf []byte, i int) (rune, bool) {
	if i+4 > len(buf) {
		return 0, false
	}
	var v rune
	for _, c := range buf[i : i+4] {
		d, ok := protoUnhex(c)
		if !ok {
			return 0, false
		}
		v = v<<4 | rune(d)
	}
	return v, true
}

// skipString checks the string at pos without decoding it.
func (s *protoScanner) skipString() error {
	buf := s.buf
	start := s.pos + 1
	high := false
	for i := protoSkipPlain(protoStr(buf), start); i < len(buf); i++ {
		c := buf[i]
		switch {
		case c == '"':
			s.pos = i + 1
			if high && !utf8.Valid(buf[start:i]) {
				s.pos = start
				return s.fail(ErrSyntax, "invalid UTF-8 in string")
			}
			return nil
		case c == '\\':
			if i+1 >= len(buf) {
				break
			}
			if buf[i+1] == 'u' {
				if _, ok := protoHex4(buf, i+2); !ok {
					s.pos = i
					return s.fail(ErrSyntax, "invalid \\u escape")
				}
				i += 5
			} else if protoUnescape[buf[i+1]] == 0 {
				s.pos = i
				return s.fail(ErrSyntax, "invalid escape")
			} else {
				i++
			}
		case c < 0x20:
			s.pos = i
			return s.fail(ErrSyntax, "control character in string")
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	s.pos = len(buf)
	return s.fail(ErrSyntax, "unterminated string")
}

// skipValue checks and skips any JSON value at pos. depth is the depth an
// object or array starting here would have.
func (s *protoScanner) skipValue(depth int) error {
	switch c := s.next(); c {
	case '"':
		return s.skipString()
	case '{', '[':
		if depth > MaxDepth {
			return s.fail(ErrLimit, "nested too deeply")
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		s.pos++
		if s.next() == closing {
			s.pos++
			return nil
		}
		for {
			if c == '{' {
				if s.next() != '"' {
					return s.fail(ErrSyntax, "expected an object key")
				}
				if err := s.skipString(); err != nil {
					return err
				}
				if s.next() != ':' {
					return s.fail(ErrSyntax, "expected ':' after an object key")
				}
				s.pos++
			}
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			switch s.next() {
			case ',':
				s.pos++
			case closing:
				s.pos++
				return nil
			default:
				return s.fail(ErrSyntax, "expected ',' or the end of the object or array")
			}
		}
	case 't', 'f', 'n':
		_, _, err := s.readLiteral()
		return err
	}
	_, _, _, _, err := s.readNumber()
	return err
}

// readLiteral reads true, false or null: value is true only for true,
// isBool is false for null.
func (s *protoScanner) readLiteral() (value, isBool bool, err error) {
	rest := s.buf[s.pos:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		s.pos += 4
		return true, true, nil
	case len(rest) >= 5 && string(rest[:5]) == "false":
		s.pos += 5
		return false, true, nil
	case len(rest) >= 4 && string(rest[:4]) == "null":
		s.pos += 4
		return false, false, nil
	}
	return false, false, s.fail(ErrSyntax, "invalid literal")
}

// readNull consumes null at pos and reports whether it was there.
func (s *protoScanner) readNull() bool {
	if len(s.buf)-s.pos >= 4 && string(s.buf[s.pos:s.pos+4]) == "null" {
		s.pos += 4
		return true
	}
	return false
}

// readInt reads an optional integer: ok when pos holds an integer that fits
// in int64, present when pos held something other than null (when present
// but not ok the value, of any type, has been skipped; depth as skipValue).
func (s *protoScanner) readInt(depth int) (v int64, ok, present bool, err error) {
	switch c := s.peek(); {
	case c == 'n' && s.readNull():
		return 0, false, false, nil
	case c != '-' && (c < '0' || c > '9'):
		return 0, false, true, s.skipValue(depth)
	}
	mag, neg, integral, overflow, err := s.readNumber()
	if err != nil || !integral || overflow {
		return 0, false, true, err
	}
	switch {
	case !neg && mag <= math.MaxInt64:
		return int64(mag), true, true, nil
	case neg && mag <= 1<<63:
		return int64(-mag), true, true, nil // -(1<<63) wraps to MinInt64
	}
	return 0, false, true, nil
}

// readNumber reads a JSON number: its magnitude if it is an integer,
// whether it is negative, integral (no fraction or exponent) and too big
// for 64 bits.
func (s *protoScanner) readNumber() (mag uint64, neg, integral, overflow bool, err error) {
	buf, i := s.buf, s.pos
	if i < len(buf) && buf[i] == '-' {
		neg = true
		i++
	}
	switch {
	case i >= len(buf) || buf[i] < '0' || buf[i] > '9':
		s.pos = i
		return 0, false, false, false, s.fail(ErrSyntax, "invalid value")
	case buf[i] == '0':
		i++
	default:
		for ; i < len(buf) && '0' <= buf[i] && buf[i] <= '9'; i++ {
			d := uint64(buf[i] - '0')
			if mag > (math.MaxUint64-d)/10 {
				overflow = true
			}
			mag = mag*10 + d
		}
	}
	integral = true
	if i < len(buf) && buf[i] == '.' {
		integral = false
		i++
		if i >= len(buf) || buf[i] < '0' || buf[i] > '9' {
			s.pos = i
			return 0, false, false, false, s.fail(ErrSyntax, "invalid number")
		}
		for i < len(buf) && '0' <= buf[i] && buf[i] <= '9' {
			i++
		}
	}
	if i < len(buf) && (buf[i] == 'e' || buf[i] == 'E') {
		integral = false
		i++
		if i < len(buf) && (buf[i] == '+' || buf[i] == '-') {
			i++
		}
		if i >= len(buf) || buf[i] < '0' || buf[i] > '9' {
			s.pos = i
			return 0, false, false, false, s.fail(ErrSyntax, "invalid number")
		}
		for i < len(buf) && '0' <= buf[i] && buf[i] <= '9' {
			i++
		}
	}
	s.pos = i
	return mag, neg, integral, overflow, nil
}
