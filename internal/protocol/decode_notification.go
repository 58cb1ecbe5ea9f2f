package protocol

import "github.com/autopush-go/autopush/internal/jsonscan"

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
	s := jsonscan.New(buf)
	if s.Next() != '{' {
		return s.Fail(ErrSyntax, "notification is not a JSON object")
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
			if s.Peek() == 'n' && s.ReadNull() {
				n.SortKey = 0
				return nil
			}
			at := s.Pos()
			mag, neg, integral, overflow, err := s.ReadNumber()
			if err != nil {
				return err
			}
			if neg && mag != 0 || !integral || overflow {
				return s.FailAt(at, ErrInvalidField, "sortkey_timestamp is not an unsigned 64-bit integer")
			}
			n.SortKey = mag
			return nil
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
		return s.Fail(ErrSyntax, "data after the JSON object")
	}
	if have != 3 {
		return &DecodeError{Offset: 0, Reason: "notification needs channelID and version", Err: ErrInvalidField}
	}
	n.Headers = hdrs
	return nil
}

// maxHeaders bounds the headers of a notification; autopush sends at
// most four (encoding, encryption, crypto_key, encryption_key).
const maxHeaders = 16

// headers reads the headers object (or null) into hdrs; a duplicate name
// replaces the earlier value.
func headers(s *jsonscan.Scanner, hdrs []Header) ([]Header, error) {
	if s.Peek() == 'n' && s.ReadNull() {
		return hdrs, nil
	}
	if s.Peek() != '{' {
		return hdrs, s.Fail(ErrInvalidField, "headers is not an object")
	}
	err := s.Object(func(key string) error {
		if s.Peek() != '"' {
			return s.Fail(ErrInvalidField, "header value is not a string")
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
			return s.Fail(ErrLimit, "too many headers")
		}
		hdrs = append(hdrs, Header{Name: key, Value: v})
		return nil
	})
	return hdrs, err
}

func wantString(s *jsonscan.Scanner, dst *string, key string) error {
	if s.Peek() != '"' {
		return s.Fail(ErrInvalidField, key+" is not a string")
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
		return s.Fail(ErrInvalidField, key+" is not a non-negative integer")
	}
	*dst = v
	return nil
}
