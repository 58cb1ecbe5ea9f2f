package jsonscan

// Strings, both ways: ReadString unescapes in place, AppendString escapes
// into a caller's buffer. Both skip plain bytes 8 at a time.

import (
	"unicode/utf8"
	"unsafe"
)

// aliasString returns b as a string without copying: the string aliases b.
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

// ReadString reads the string at the position (which must be '"').
// Escapes are decoded in place; the result aliases the buffer. Invalid
// UTF-8, control characters, invalid escapes and lone surrogates are
// ErrSyntax.
func (s *Scanner) ReadString() (string, error) {
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
				return "", s.Fail(ErrSyntax, "invalid UTF-8 in string")
			}
			return aliasString(buf[start:i]), nil
		case c == '\\':
			return s.readEscaped(start, i, high)
		case c < 0x20:
			s.pos = i
			return "", s.Fail(ErrSyntax, "control character in string")
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	s.pos = len(buf)
	return "", s.Fail(ErrSyntax, "unterminated string")
}

// readEscaped continues ReadString from the first backslash at r, writing
// the decoded string to buf[start:w]. w never passes r: every escape is
// longer than what it decodes to.
func (s *Scanner) readEscaped(start, r int, high bool) (string, error) {
	buf := s.buf
	w := r
	for r < len(buf) {
		c := buf[r]
		switch {
		case c == '"':
			s.pos = r + 1
			if high && !utf8.Valid(buf[start:w]) {
				s.pos = start
				return "", s.Fail(ErrSyntax, "invalid UTF-8 in string")
			}
			return aliasString(buf[start:w]), nil
		case c == '\\':
			if r+1 >= len(buf) {
				s.pos = r
				return "", s.Fail(ErrSyntax, "unterminated string")
			}
			e := buf[r+1]
			if e == 'u' {
				cp, n := decodeU(buf, r)
				if n == 0 {
					s.pos = r
					return "", s.Fail(ErrSyntax, "invalid \\u escape")
				}
				r += n
				w += utf8.EncodeRune(buf[w:], cp)
				continue
			}
			d := unescapes[e]
			if d == 0 {
				s.pos = r
				return "", s.Fail(ErrSyntax, "invalid escape")
			}
			buf[w] = d
			w++
			r += 2
		case c < 0x20:
			s.pos = r
			return "", s.Fail(ErrSyntax, "control character in string")
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
	return "", s.Fail(ErrSyntax, "unterminated string")
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

// hex4 reads the 4 hex digits (either case) at buf[i:].
func hex4(buf []byte, i int) (rune, bool) {
	if i+4 > len(buf) {
		return 0, false
	}
	var v rune
	for _, c := range buf[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | rune(c)
	}
	return v, true
}

// skipString checks the string at the position without decoding it.
func (s *Scanner) skipString() error {
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
				return s.Fail(ErrSyntax, "invalid UTF-8 in string")
			}
			return nil
		case c == '\\':
			if i+1 >= len(buf) {
				break
			}
			if buf[i+1] == 'u' {
				if _, ok := hex4(buf, i+2); !ok {
					s.pos = i
					return s.Fail(ErrSyntax, "invalid \\u escape")
				}
				i += 5
			} else if unescapes[buf[i+1]] == 0 {
				s.pos = i
				return s.Fail(ErrSyntax, "invalid escape")
			} else {
				i++
			}
		case c < 0x20:
			s.pos = i
			return s.Fail(ErrSyntax, "control character in string")
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	s.pos = len(buf)
	return s.Fail(ErrSyntax, "unterminated string")
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Quotes, backslashes and
// control characters are escaped; every byte of invalid UTF-8 becomes
// \ufffd (as encoding/json does), so the output is always valid JSON and
// valid UTF-8. U+2028 and U+2029 are escaped too, for JavaScript consumers.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := skipPlain(s, 0); i < len(s); i = skipPlain(s, i) {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&15])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
