package ws

import (
	"testing"
	"unicode/utf8"
)

func TestValidUTF8Prefix(t *testing.T) {
	tests := []struct {
		in       string
		complete int
		ok       bool
	}{
		{"", 0, true},
		{"abc", 3, true},
		{"a€", 4, true},
		{"a\xe2", 1, true},
		{"a\xe2\x82", 1, true},
		{"\xf0\x9f\x98", 0, true},
		{"\xf0\x9f\x98\x80", 4, true},
		{"\xff", 0, false},
		{"a\xc0", 0, false},    // overlong lead byte
		{"\xe0\x80", 0, false}, // overlong 3-byte start
		{"\xed\xa0", 0, false}, // surrogate start
		{"\xf4\x90", 0, false}, // above U+10FFFF
		{"\xf5", 0, false},     // invalid lead
		{"\x80", 0, false},     // stray continuation
		{"a\x80\x80\x80\x80", 0, false},
		{"\xe2\x82\xac\x80", 0, false},
	}
	for _, tt := range tests {
		complete, ok := validUTF8Prefix([]byte(tt.in))
		if complete != tt.complete || ok != tt.ok {
			t.Errorf("%q: (%d, %v), want (%d, %v)", tt.in, complete, ok, tt.complete, tt.ok)
		}
	}
}

// Splitting any byte string in two and checking the pieces incrementally
// must agree with utf8.Valid on the whole.
func TestValidUTF8PrefixSplits(t *testing.T) {
	alphabet := []byte{'a', 0x80, 0x9f, 0xa0, 0xbf, 0xc2, 0xdf, 0xe0, 0xe2, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff}
	var inputs [][]byte
	var gen func(prefix []byte, depth int)
	gen = func(prefix []byte, depth int) {
		inputs = append(inputs, append([]byte(nil), prefix...))
		if depth == 0 {
			return
		}
		for _, c := range alphabet {
			gen(append(prefix, c), depth-1)
		}
	}
	gen(nil, 4)
	for _, in := range inputs {
		want := utf8.Valid(in)
		for k := 0; k <= len(in); k++ {
			c1, ok := validUTF8Prefix(in[:k])
			got := ok
			if ok {
				c2, ok2 := validUTF8Prefix(in[c1:])
				got = ok2 && c1+c2 == len(in)
			}
			if got != want {
				t.Fatalf("%q split at %d: %v, utf8.Valid says %v", in, k, got, want)
			}
		}
	}
}
