package jsonscan

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

func TestAppendStringExact(t *testing.T) {
	for in, want := range map[string]string{
		"":                         `""`,
		"plain base64url_-ZGF0YQ":  `"plain base64url_-ZGF0YQ"`,
		"q\"b\\s/":                 `"q\"b\\s/"`,
		"\n\r\t\x00\x1f\x7f":       `"\n\r\t\u0000\u001f` + "\x7f" + `"`,
		"é€😀":                      `"é€😀"`,
		"\u2028\u2029":             `"\u2028\u2029"`,
		"a\xffb\xc3":               `"a\ufffdb\ufffd"`,
		"\xed\xa0\x80":             `"\ufffd\ufffd\ufffd"`,
		"eight ok\"eight ok\"tail": `"eight ok\"eight ok\"tail"`,
	} {
		if got := string(AppendString([]byte("x"), in)); got != "x"+want {
			t.Errorf("AppendString(%q) = %s, want x%s", in, got, want)
		}
	}
}

// stringPieces are what string escaping has to get right.
var stringPieces = []string{"a", "Z", "0", "-", "\"", "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "€", "😀",
	"\u2028", "\u2029", "\ufffd", "\xff", "\xc3", "\xed\xa0\x80", "<", "&", " ", "plain run", "ZGF0YQZGF0YQ"}

// TestStringRoundTrip: for random strings, encoding/json reads from
// AppendString's output what it reads from its own (invalid UTF-8 bytes
// replaced one by one), and ReadString reads the same.
func TestStringRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var b []byte
	for i := 0; i < 5000; i++ {
		b = b[:0]
		for n := rng.IntN(12); n > 0; n-- {
			b = append(b, stringPieces[rng.IntN(len(stringPieces))]...)
		}
		checkStringRoundTrip(t, string(b))
	}
}

func FuzzStringRoundTrip(f *testing.F) {
	for _, p := range stringPieces {
		f.Add(p + "abcdefgh" + p)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1024 {
			return // escaping bugs show on short strings; long ones only slow the fuzzer
		}
		checkStringRoundTrip(t, s)
	})
}

func checkStringRoundTrip(t *testing.T, s string) {
	t.Helper()
	out := AppendString(nil, s)
	ref, _ := json.Marshal(s)
	var want, got string
	if !utf8.Valid(out) || json.Unmarshal(ref, &want) != nil || json.Unmarshal(out, &got) != nil || got != want {
		t.Fatalf("AppendString(%q) = %s; encoding/json reads %q from it, %q from %s", s, out, got, want, ref)
	}
	sc := New(out)
	read, err := sc.ReadString()
	if err != nil || read != want || !sc.AtEnd() {
		t.Fatalf("ReadString(%s) = %q, %v; want %q", out, read, err, want)
	}
}

// FuzzScan: on any input, SkipValue and ReadString never panic or read
// past len; errors are *DecodeError inside the input; what SkipValue
// accepts as a whole input encoding/json accepts too, and a string
// ReadString accepts reads as encoding/json reads it.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"messageType":"ack","updates":[{"channelID":"c","version":"v","code":100}]}`,
		`{"x":{"a":[1,-2.5e+3,true,false,null,"s",{}],"b":[]},"y":0.0}`,
		`"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00z"`, "\"\xff\"", `"\ud83d"`, `[01]`, `{"a" 1}`, `-`, `1e+`,
	} {
		for i := 0; i <= len(s); i++ {
			f.Add([]byte(s[:i]))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// cap == len: a read past len panics. Padded: bytes past len that
		// would change the result if they were read.
		exact := bytes.Clone(in)[:len(in):len(in)]
		padded := append(make([]byte, 0, len(in)+8), in...)
		padded = append(padded, `"}]:,"1 `...)[:len(in)]
		s1, s2 := New(exact), New(padded)
		err1, err2 := s1.SkipValue(1), s2.SkipValue(1)
		if !sameResult(err1, err2) || s1.Pos() != s2.Pos() {
			t.Fatalf("SkipValue depends on bytes past len: %v / %v", err1, err2)
		}
		checkFuzzErr(t, err1, len(in))
		if err1 == nil && s1.AtEnd() && !json.Valid(in) {
			t.Fatalf("SkipValue accepted %q, encoding/json does not", in)
		}
		r1, r2 := New(bytes.Clone(exact)[:len(in):len(in)]), New(padded)
		str1, err1 := r1.ReadString()
		str2, err2 := r2.ReadString()
		if !sameResult(err1, err2) || str1 != str2 || r1.Pos() != r2.Pos() {
			t.Fatalf("ReadString depends on bytes past len: %v / %v", err1, err2)
		}
		checkFuzzErr(t, err1, len(in))
		if len(in) == 0 || in[0] != '"' || err1 != nil {
			return
		}
		var want string
		if err := json.Unmarshal(in[:r1.Pos()], &want); err != nil || want != str1 {
			t.Fatalf("ReadString(%q) = %q; encoding/json: %q, %v", in, str1, want, err)
		}
		if s := New(bytes.Clone(in)); s.SkipValue(1) != nil || s.Pos() != r1.Pos() {
			t.Fatalf("SkipValue and ReadString disagree on %q", in)
		}
	})
}

func sameResult(a, b error) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error())
}

func checkFuzzErr(t *testing.T, err error, n int) {
	t.Helper()
	if err == nil {
		return
	}
	de, ok := err.(*DecodeError)
	if !ok || de.Err != ErrSyntax && de.Err != ErrLimit || de.Offset < 0 || de.Offset > n {
		t.Fatalf("error %T %v (input of %d bytes)", err, err, n)
	}
}
