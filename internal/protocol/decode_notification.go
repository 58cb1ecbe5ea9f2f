package protocol

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
	s := &scanner{buf: buf}
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

// maxHeaders bounds the headers of a notification; autopush sends at
// most four (encoding, encryption, crypto_key, encryption_key).
const maxHeaders = 16

func (s *scanner) headers(hdrs []Header) ([]Header, error) {
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
		if len(hdrs) == maxHeaders {
			return s.fail(ErrLimit, "too many headers")
		}
		hdrs = append(hdrs, Header{Name: key, Value: v})
		return nil
	})
	return hdrs, err
}

func (s *scanner) wantString(dst *string, key string) error {
	if s.peek() != '"' {
		return s.fail(ErrInvalidField, key+" is not a string")
	}
	v, err := s.readString()
	*dst = v
	return err
}

func (s *scanner) optString(dst *string, key string) error {
	if s.peek() == 'n' && s.readNull() {
		*dst = ""
		return nil
	}
	return s.wantString(dst, key)
}

func (s *scanner) wantUint(dst *int64, key string) error {
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
