package protocol

// UAIDs and channel IDs: the UUID forms the protocol accepts and sends.

// ValidChannelID reports whether s is a channel ID in the only form the
// register message accepts: a dashed UUID (8-4-4-4-12) in lower-case hex.
// Upper case is rejected on purpose: autopush-rs refuses a register whose
// channelID is not exactly its lower-case dashed form, Firefox always sends
// that form, and the ID is echoed back and stored verbatim, so one spelling
// per channel keeps acks and unregisters matching.
func ValidChannelID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// ParseChannelID parses a UUID as ack and unregister accept it (like
// autopush-rs, which parses these with a lenient UUID parser): dashed or
// 32 hex digits, either case. Compare the bytes, not the strings.
func ParseChannelID(s string) ([16]byte, bool) { return parseUUID(s) }

// ParseUAID parses a UAID as hello carries it: 32 hex digits (the form the
// server hands out), or a dashed UUID; either case. A false result means
// the client gets a new UAID, as in autopush-rs.
func ParseUAID(s string) ([16]byte, bool) { return parseUUID(s) }

// FormatUAID returns the 32 lower-case hex digits form, the one sent in the
// hello reply. AppendUAID is the allocation-free variant.
func FormatUAID(u [16]byte) string { return string(AppendUAID(nil, u)) }

// AppendUAID appends u as 32 lower-case hex digits.
func AppendUAID(dst []byte, u [16]byte) []byte {
	for _, b := range u {
		dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
	}
	return dst
}

// AppendChannelID appends u as a lower-case dashed UUID.
func AppendChannelID(dst []byte, u [16]byte) []byte {
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
	}
	return dst
}

const hexDigits = "0123456789abcdef"

func parseUUID(s string) (u [16]byte, ok bool) {
	switch len(s) {
	case 32:
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return u, false
		}
	default:
		return u, false
	}
	dashed := len(s) == 36
	j := 0
	for i := 0; i < 16; i++ {
		if dashed && (i == 4 || i == 6 || i == 8 || i == 10) {
			j++ // the dash, checked above
		}
		hi, ok1 := unhex(s[j])
		lo, ok2 := unhex(s[j+1])
		if !ok1 || !ok2 {
			return [16]byte{}, false
		}
		u[i] = hi<<4 | lo
		j += 2
	}
	return u, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
