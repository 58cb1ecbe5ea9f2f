package jsonscan

// Why hand-written: encoding/json would allocate for every input
// (reflection, a map or struct per message, a string per field), and a
// connection node decodes an ack or ping from every client every few
// minutes. This scanner allocates nothing when strings carry no escapes,
// and unescapes in place when they do.

import "math"

// Scanner walks a JSON document in a buffer. Every method leaves the
// position at the first byte it did not consume; errors carry the position
// as their offset. The zero Scanner scans an empty buffer; use New.
//
// A Scanner is a small value meant to live on the stack or inside a
// caller's decoder; its methods are small enough to inline where it
// matters (Next, Peek, SkipSpace, Advance, ReadNull, Fail).
type Scanner struct {
	buf []byte
	pos int
}

// New returns a Scanner at the start of buf. buf is modified (strings
// with escapes are unescaped in place) and the strings read alias it.
func New(buf []byte) Scanner { return Scanner{buf: buf} }

// Pos returns the offset of the next byte to be read.
func (s *Scanner) Pos() int { return s.pos }

// Fail returns a *DecodeError of category cat at the current position.
func (s *Scanner) Fail(cat error, reason string) error {
	return &DecodeError{Offset: s.pos, Reason: reason, Err: cat}
}

// FailAt returns a *DecodeError of category cat at offset pos (where a
// value that turned out to be wrong started, say).
func (s *Scanner) FailAt(pos int, cat error, reason string) error {
	return &DecodeError{Offset: pos, Reason: reason, Err: cat}
}

// SkipSpace skips JSON whitespace.
func (s *Scanner) SkipSpace() {
	for s.pos < len(s.buf) {
		switch s.buf[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// Next skips whitespace and returns the byte there, 0 at the end (a NUL in
// the input is invalid wherever Next is used, so 0 is never ambiguous).
func (s *Scanner) Next() byte {
	s.SkipSpace()
	return s.Peek()
}

// Peek returns the byte at the position, 0 at the end.
func (s *Scanner) Peek() byte {
	if s.pos < len(s.buf) {
		return s.buf[s.pos]
	}
	return 0
}

// Advance consumes the byte Next or Peek returned; only call it when that
// was not 0.
func (s *Scanner) Advance() { s.pos++ }

// AtEnd skips whitespace and reports whether the input is used up (call it
// after the top-level value: anything else there is an error).
func (s *Scanner) AtEnd() bool {
	s.SkipSpace()
	return s.pos == len(s.buf)
}

// Object walks an object at the position (which must be '{'), calling fn
// for every key with the position at its value; fn must consume the value
// (read it or SkipValue it). Keys are unescaped and alias the buffer.
// Object does not count depth: the caller knows how deep the object is and
// passes that on to SkipValue.
func (s *Scanner) Object(fn func(key string) error) error {
	s.pos++ // '{'
	if s.Next() == '}' {
		s.pos++
		return nil
	}
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
		s.pos++
		s.SkipSpace()
		if err := fn(key); err != nil {
			return err
		}
		c := s.Next()
		s.pos++
		if c == '}' {
			return nil
		}
		if c != ',' {
			s.pos--
			return s.Fail(ErrSyntax, "expected ',' or '}' in object")
		}
	}
}

// SkipValue checks and skips any JSON value at the position. depth is the
// depth an object or array starting here would have (the top level is 1);
// one deeper than MaxDepth fails with ErrLimit.
func (s *Scanner) SkipValue(depth int) error {
	switch c := s.Next(); c {
	case '"':
		return s.skipString()
	case '{', '[':
		if depth > MaxDepth {
			return s.Fail(ErrLimit, "nested too deeply")
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		s.pos++
		if s.Next() == closing {
			s.pos++
			return nil
		}
		for {
			if c == '{' {
				if s.Next() != '"' {
					return s.Fail(ErrSyntax, "expected an object key")
				}
				if err := s.skipString(); err != nil {
					return err
				}
				if s.Next() != ':' {
					return s.Fail(ErrSyntax, "expected ':' after an object key")
				}
				s.pos++
			}
			if err := s.SkipValue(depth + 1); err != nil {
				return err
			}
			switch s.Next() {
			case ',':
				s.pos++
			case closing:
				s.pos++
				return nil
			default:
				return s.Fail(ErrSyntax, "expected ',' or the end of the object or array")
			}
		}
	case 't', 'f', 'n':
		_, _, err := s.ReadLiteral()
		return err
	}
	_, _, _, _, err := s.ReadNumber()
	return err
}

// ReadLiteral reads true, false or null: value is true only for true,
// isBool is false for null.
func (s *Scanner) ReadLiteral() (value, isBool bool, err error) {
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
	return false, false, s.Fail(ErrSyntax, "invalid literal")
}

// ReadNull consumes null at the position and reports whether it was there.
// It does not check what follows: "nullx" fails at the x, later.
func (s *Scanner) ReadNull() bool {
	if len(s.buf)-s.pos >= 4 && string(s.buf[s.pos:s.pos+4]) == "null" {
		s.pos += 4
		return true
	}
	return false
}

// ReadInt reads an optional integer: ok when the position holds an
// integer that fits in int64, present when it held something other than
// null (when present but not ok the value, of any type, has been skipped;
// depth as SkipValue). Only a malformed value is an error.
func (s *Scanner) ReadInt(depth int) (v int64, ok, present bool, err error) {
	switch c := s.Peek(); {
	case c == 'n' && s.ReadNull():
		return 0, false, false, nil
	case c != '-' && (c < '0' || c > '9'):
		return 0, false, true, s.SkipValue(depth)
	}
	mag, neg, integral, overflow, err := s.ReadNumber()
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

// ReadNumber reads a JSON number: its magnitude if it is an integer,
// whether it is negative, integral (no fraction or exponent) and too big
// for 64 bits (mag is then meaningless).
func (s *Scanner) ReadNumber() (mag uint64, neg, integral, overflow bool, err error) {
	buf, i := s.buf, s.pos
	if i < len(buf) && buf[i] == '-' {
		neg = true
		i++
	}
	switch {
	case i >= len(buf) || buf[i] < '0' || buf[i] > '9':
		s.pos = i
		return 0, false, false, false, s.Fail(ErrSyntax, "invalid value")
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
			return 0, false, false, false, s.Fail(ErrSyntax, "invalid number")
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
			return 0, false, false, false, s.Fail(ErrSyntax, "invalid number")
		}
		for i < len(buf) && '0' <= buf[i] && buf[i] <= '9' {
			i++
		}
	}
	s.pos = i
	return mag, neg, integral, overflow, nil
}
