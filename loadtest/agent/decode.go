package agent

import "github.com/autopush-go/autopush/internal/jsonscan"

// Why not encoding/json: a user agent decodes every notification, and at
// 10,000 pushes/s reflection and a map per message were an eighth of the
// load generator's CPU on the same two cores as the server it measures.

// broadcastValue is one entry of a message's "broadcasts" object, its
// value still JSON.
type broadcastValue struct {
	id  string
	raw []byte
}

// decodeServerMsg reads one server message into m. The strings alias
// payload, which it modifies (escapes are undone in place): they are
// valid until the message has been handled, and what a user agent keeps
// it copies. It accepts what encoding/json would decode into serverMsg
// with exact keys: unknown keys are skipped, a known key with a value of
// another type (null aside) is an error.
func decodeServerMsg(payload []byte, m *serverMsg) error {
	s := jsonscan.New(payload)
	if s.Next() != '{' {
		return s.Fail(jsonscan.ErrSyntax, "expected an object")
	}
	err := s.Object(func(key string) error {
		switch key {
		case "messageType":
			return readString(&s, &m.MessageType)
		case "uaid":
			return readString(&s, &m.UAID)
		case "channelID":
			return readString(&s, &m.ChannelID)
		case "pushEndpoint":
			return readString(&s, &m.PushEndpoint)
		case "version":
			return readString(&s, &m.Version)
		case "data":
			return readString(&s, &m.Data)
		case "status":
			at := s.Pos()
			v, ok, present, err := s.ReadInt(2)
			if err != nil || !present {
				return err
			}
			if !ok {
				return s.FailAt(at, jsonscan.ErrSyntax, "status is not an integer")
			}
			m.Status = int(v)
			return nil
		case "headers":
			return readObject(&s, func(k string) error {
				var v string
				if err := readString(&s, &v); err != nil {
					return err
				}
				if k == "encoding" {
					m.Encoding = v
				}
				return nil
			})
		case "broadcasts":
			return readObject(&s, func(k string) error {
				start := s.Pos()
				if err := s.SkipValue(3); err != nil {
					return err
				}
				m.Broadcasts = append(m.Broadcasts, broadcastValue{id: k, raw: payload[start:s.Pos()]})
				return nil
			})
		}
		return s.SkipValue(2)
	})
	if err != nil {
		return err
	}
	if !s.AtEnd() {
		return s.Fail(jsonscan.ErrSyntax, "data after the message")
	}
	return nil
}

// readString reads a string or null (leaving *dst as it was).
func readString(s *jsonscan.Scanner, dst *string) error {
	switch s.Peek() {
	case '"':
		v, err := s.ReadString()
		*dst = v
		return err
	case 'n':
		if s.ReadNull() {
			return nil
		}
	}
	return s.Fail(jsonscan.ErrSyntax, "expected a string")
}

// readObject walks an object (or skips null), fn consuming each value.
func readObject(s *jsonscan.Scanner, fn func(key string) error) error {
	switch s.Peek() {
	case '{':
		return s.Object(fn)
	case 'n':
		if s.ReadNull() {
			return nil
		}
	}
	return s.Fail(jsonscan.ErrSyntax, "expected an object")
}
