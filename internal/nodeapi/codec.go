package nodeapi

// The PUT /push/{uaid} body: a notification as JSON, written and read
// without allocating (the decoder uses internal/jsonscan's scanner).

import (
	"strconv"

	"github.com/autopush-go/autopush/internal/jsonscan"
	"github.com/autopush-go/autopush/internal/protocol"
)

// AppendNotification appends n as the body of PUT /push/{uaid} (API tier
// or another connection node → connection node). The schema, compatible
// with what autopush-rs's autoendpoint sends its autoconnect:
//
//	{
//	  "channelID": "<lower-case dashed uuid>",   required
//	  "version": "<message id>",                 required
//	  "ttl": <seconds, integer >= 0>,            0 when absent
//	  "topic": "<topic>",                        left out when none; null accepted
//	  "timestamp": <seconds since epoch>,        0 when absent
//	  "sortkey_timestamp": <uint64 ns>,          the storage sort key (storage.NewSortKey:
//	                                             receipt time in ns); left out when 0; null accepted
//	  "tracked": true,                           a fate follows it (storage.FateStore);
//	                                             left out when false; null accepted
//	  "data": "<base64url payload>",             left out when none; null accepted
//	  "headers": {"encoding": "aes128gcm", ...}  only with data; null accepted
//	}
//
// DecodeNotification reads it back; it skips keys it does not know (such as
// autopush-rs's reliability_id).
func AppendNotification(dst []byte, n *protocol.Notification) []byte {
	dst = append(dst, `{"channelID":`...)
	dst = jsonscan.AppendString(dst, n.ChannelID)
	dst = append(dst, `,"version":`...)
	dst = jsonscan.AppendString(dst, n.Version)
	dst = append(dst, `,"ttl":`...)
	dst = strconv.AppendInt(dst, n.TTL, 10)
	if n.Topic != "" {
		dst = append(dst, `,"topic":`...)
		dst = jsonscan.AppendString(dst, n.Topic)
	}
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, n.Timestamp, 10)
	if n.SortKey != 0 {
		dst = append(dst, `,"sortkey_timestamp":`...)
		dst = strconv.AppendUint(dst, n.SortKey, 10)
	}
	if n.Tracked {
		dst = append(dst, `,"tracked":true`...)
	}
	dst = protocol.AppendPayload(dst, n)
	return append(dst, '}')
}

// DecodeNotification decodes a PUT /push/{uaid} body (the schema is in
// AppendNotification) into n. Headers are appended to n.Headers[:0], so
// reusing n avoids allocating; everything else allocates nothing. Like
// protocol.DecodeClient it unescapes in place in buf and n's strings point
// into buf. Unknown keys are skipped; channelID and version are required; a
// wrong type or a negative number is an error.
//
// Errors are *protocol.DecodeError wrapping protocol.ErrSyntax,
// ErrInvalidField or ErrLimit; their text is the 400 body Routes answers.
func DecodeNotification(buf []byte, n *protocol.Notification) error {
	hdrs := n.Headers[:0]
	clear(hdrs[:cap(hdrs)])
	*n = protocol.Notification{}
	s := jsonscan.New(buf)
	if s.Next() != '{' {
		return s.Fail(protocol.ErrSyntax, "notification is not a JSON object")
	}
	var have uint8
	err := s.Object(func(key string) error {
		switch key {
		case "channelID":
			have |= 1
			return wantString(&s, &n.ChannelID, key)
		case "version":
			have |= 2
			return wantString(&s, &n.Version, key)
		case "topic":
			return optString(&s, &n.Topic, key)
		case "data":
			return optString(&s, &n.Data, key)
		case "ttl":
			return wantUint(&s, &n.TTL, key)
		case "timestamp":
			return wantUint(&s, &n.Timestamp, key)
		case "sortkey_timestamp":
			return wantUint64(&s, &n.SortKey)
		case "tracked":
			var err error
			n.Tracked, _, err = s.ReadLiteral() // null: false
			return err
		case "headers":
			var err error
			hdrs, err = headers(&s, hdrs[:0])
			return err
		}
		return s.SkipValue(2)
	})
	if err != nil {
		return err
	}
	if !s.AtEnd() {
		return s.Fail(protocol.ErrSyntax, "data after the JSON object")
	}
	if have != 3 {
		return &protocol.DecodeError{Offset: 0, Reason: "notification needs channelID and version", Err: protocol.ErrInvalidField}
	}
	n.Headers = hdrs
	return nil
}

// CheckNotification refuses what a node must never deliver although it
// decodes: an empty version (the client could not ack it) or a channelID
// that is not a UUID, or is the nil UUID (never a registered channel).
// Whether the user agent registered the channel is the API tier's check
// (docs/engine.md, "Who may deliver").
func CheckNotification(n *protocol.Notification) error {
	if n.Version == "" {
		return &protocol.DecodeError{Reason: "version is empty", Err: protocol.ErrInvalidField}
	}
	if chid, ok := protocol.ParseChannelID(n.ChannelID); !ok || chid == ([16]byte{}) {
		return &protocol.DecodeError{Reason: "channelID is not a UUID (or is the nil UUID)", Err: protocol.ErrInvalidField}
	}
	return nil
}

// maxHeaders bounds the headers of a notification; autopush sends at
// most four (encoding, encryption, crypto_key, encryption_key).
const maxHeaders = 16

// headers reads the headers object (or null) into hdrs; a duplicate name
// replaces the earlier value.
func headers(s *jsonscan.Scanner, hdrs []protocol.Header) ([]protocol.Header, error) {
	if s.Peek() == 'n' && s.ReadNull() {
		return hdrs, nil
	}
	if s.Peek() != '{' {
		return hdrs, s.Fail(protocol.ErrInvalidField, "headers is not an object")
	}
	err := s.Object(func(key string) error {
		if s.Peek() != '"' {
			return s.Fail(protocol.ErrInvalidField, "header value is not a string")
		}
		v, err := s.ReadString()
		if err != nil {
			return err
		}
		for i := range hdrs {
			if hdrs[i].Name == key {
				hdrs[i].Value = v
				return nil
			}
		}
		if len(hdrs) == maxHeaders {
			return s.Fail(protocol.ErrLimit, "too many headers")
		}
		hdrs = append(hdrs, protocol.Header{Name: key, Value: v})
		return nil
	})
	return hdrs, err
}

func wantString(s *jsonscan.Scanner, dst *string, key string) error {
	if s.Peek() != '"' {
		return s.Fail(protocol.ErrInvalidField, key+" is not a string")
	}
	v, err := s.ReadString()
	*dst = v
	return err
}

func optString(s *jsonscan.Scanner, dst *string, key string) error {
	if s.Peek() == 'n' && s.ReadNull() {
		*dst = ""
		return nil
	}
	return wantString(s, dst, key)
}

func wantUint(s *jsonscan.Scanner, dst *int64, key string) error {
	if s.Peek() == 'n' && s.ReadNull() {
		*dst = 0
		return nil
	}
	v, ok, _, err := s.ReadInt(2)
	if err != nil {
		return err
	}
	if !ok || v < 0 {
		return s.Fail(protocol.ErrInvalidField, key+" is not a non-negative integer")
	}
	*dst = v
	return nil
}

// wantUint64 reads sortkey_timestamp: an unsigned 64-bit integer, or null
// (0).
func wantUint64(s *jsonscan.Scanner, dst *uint64) error {
	if s.Peek() == 'n' && s.ReadNull() {
		*dst = 0
		return nil
	}
	at := s.Pos()
	mag, neg, integral, overflow, err := s.ReadNumber()
	if err != nil {
		return err
	}
	if neg && mag != 0 || !integral || overflow {
		return s.FailAt(at, protocol.ErrInvalidField, "sortkey_timestamp is not an unsigned 64-bit integer")
	}
	*dst = mag
	return nil
}
