package ws

import "unicode/utf8"

// validUTF8Prefix checks p, which may end in the middle of a character
// because a fragment boundary split it. It returns ok == false as soon as p
// cannot be the start of valid UTF-8, and otherwise the length of the prefix
// made of whole valid characters; the rest (at most 3 bytes) is a valid
// start of a character awaiting its continuation bytes.
//
// Checking each fragment as it arrives fails a bad text message at the
// first bad fragment instead of after buffering the whole message.
func validUTF8Prefix(p []byte) (complete int, ok bool) {
	cut := len(p)
	// Find the last character start among the final 3 bytes; if it does
	// not hold a full character, set it aside. utf8.FullRune reports an
	// invalid sequence as full, so what is set aside is always a valid
	// incomplete prefix and anything invalid is left to utf8.Valid.
	for i := len(p) - 1; i >= 0 && i >= len(p)-3; i-- {
		if !utf8.RuneStart(p[i]) {
			continue
		}
		if !utf8.FullRune(p[i:]) {
			cut = i
		}
		break
	}
	if !utf8.Valid(p[:cut]) {
		return 0, false
	}
	return cut, true
}
