package protocol

// A hand-written JSON scanner for client messages. encoding/json would
// allocate for every message (reflection, a map or struct per message, a
// string per field); a connection node decodes an ack or ping from every
// client every few minutes, so this one allocates nothing when strings
// carry no escapes, and unescapes in place when they do.

import (
	"math"
	"unicode/utf8"
	"unsafe"
)

// scanner walks a JSON document in buf. Every method leaves pos at
// the first byte it did not consume; errors carry pos as their offset.
type scanner struct {
	buf []byte
	pos int
}

func (s *scanner) fail(cat error, reason string) error {
	return &DecodeError{Offset: s.pos, Reason: reason, Err: cat}
}

func (s *scanner) skipSpace() {
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
func (s *scanner) next() byte {
	s.skipSpace()
	return s.peek()
}

func (s *scanner) peek() byte {
	if s.pos < len(s.buf) {
		return s.buf[s.pos]
	}
	return 0
}

// object walks an object at pos (which must be '{'), calling fn for every
// key with pos at its value; fn must consume the value. Objects given to
// object are at depth 2 or 3, well inside MaxDepth.
func (s *scanner) object(fn func(key string) error) error {
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

// aliasString returns b as a string without copying: the string aliases buf.
func aliasString(b []byte) string {
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
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// stop8 reports whether one of the 8 bytes in x (little endian) is a
// quote, a backslash, below 0x20 or at least 0x80 (the classic "has zero
// byte" and "has byte less than" bit tricks; exact, no false positives).
func stop8(x uint64) bool {
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return ((q-ones)&^q|(b-ones)&^b|(x-ones*0x20)&^x|x)&highs != 0
}

// load8 loads s[i:i+8] little endian (the compiler merges the loads).
func load8(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// skipPlain returns the first index at or after i, in steps of 8,
// from which fewer than 8 bytes remain or the next 8 contain a stop byte.
func skipPlain(s string, i int) int {
	for i+8 <= len(s) && !stop8(load8(s, i)) {
		i += 8
	}
	return i
}

// readString reads the string at pos (which must be '"'). Escapes are
// decoded in place; the result aliases buf.
func (s *scanner) readString() (string, error) {
	buf := s.buf
	start := s.pos + 1
	high := false
	for i := skipPlain(aliasString(buf), start); i < len(buf); i++ {
		c := buf[i]
		switch {
		case c == '"':
			s.pos = i + 1
			if high && !utf8.Valid(buf[start:i]) {
				s.pos = start
				return "", s.fail(ErrSyntax, "invalid UTF-8 in string")
			}
			return aliasString(buf[start:i]), nil
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
func (s *scanner) readEscaped(start, r int, high bool) (string, error) {
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
			return aliasString(buf[start:w]), nil
		case c == '\\':
			if r+1 >= len(buf) {
				s.pos = r
				return "", s.fail(ErrSyntax, "unterminated string")
			}
			e := buf[r+1]
			if e == 'u' {
				cp, n := decodeU(buf, r)
				if n == 0 {
					s.pos = r
					return "", s.fail(ErrSyntax, "invalid \\u escape")
				}
				r += n
				w += utf8.EncodeRune(buf[w:], cp)
				continue
			}
			d := unescapes[e]
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

var unescapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// decodeU decodes \uXXXX at buf[r:], joining a surrogate pair. It
// returns the code point and the bytes consumed, 0 if invalid. A lone
// surrogate is invalid: it cannot be UTF-8, and no client sends one.
func decodeU(buf []byte, r int) (rune, int) {
	cp, ok := hex4(buf, r+2)
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
	lo, ok := hex4(buf, r+8)
	if !ok || lo < 0xDC00 || lo > 0xDFFF {
		return 0, 0
	}
	return 0x10000 + (cp-0xD800)<<10 + (lo - 0xDC00), 12
}

func hex4(buf []byte, i int) (rune, bool) {
	if i+4 > len(buf) {
		return 0, false
	}
	var v rune
	for _, c := range buf[i : i+4] {
		d, ok := unhex(c)
		if !ok {
			return 0, false
		}
		v = v<<4 | rune(d)
	}
	return v, true
}

// skipString checks the string at pos without decoding it.
func (s *scanner) skipString() error {
	buf := s.buf
	start := s.pos + 1
	high := false
	for i := skipPlain(aliasString(buf), start); i < len(buf); i++ {
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
				if _, ok := hex4(buf, i+2); !ok {
					s.pos = i
					return s.fail(ErrSyntax, "invalid \\u escape")
				}
				i += 5
			} else if unescapes[buf[i+1]] == 0 {
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
func (s *scanner) skipValue(depth int) error {
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
func (s *scanner) readLiteral() (value, isBool bool, err error) {
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
func (s *scanner) readNull() bool {
	if len(s.buf)-s.pos >= 4 && string(s.buf[s.pos:s.pos+4]) == "null" {
		s.pos += 4
		return true
	}
	return false
}

// readInt reads an optional integer: ok when pos holds an integer that fits
// in int64, present when pos held something other than null (when present
// but not ok the value, of any type, has been skipped; depth as skipValue).
func (s *scanner) readInt(depth int) (v int64, ok, present bool, err error) {
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
func (s *scanner) readNumber() (mag uint64, neg, integral, overflow bool, err error) {
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
