package jsonscan

import (
	"errors"
	"strings"
	"testing"
)

// scan returns a Scanner over a fresh copy of in (strings are unescaped
// in place, so a test input must not be shared).
func scan(in string) *Scanner {
	s := New([]byte(in))
	return &s
}

// checkErr fails unless err is a *DecodeError of category cat at offset
// (offset -1: not checked).
func checkErr(t *testing.T, what string, err, cat error, offset int) {
	t.Helper()
	var de *DecodeError
	if !errors.Is(err, cat) || !errors.As(err, &de) {
		t.Errorf("%s: error %v, want %v", what, err, cat)
		return
	}
	if offset >= 0 && de.Offset != offset {
		t.Errorf("%s: offset %d, want %d (%v)", what, de.Offset, offset, err)
	}
	if de.Reason == "" || !strings.HasPrefix(err.Error(), cat.Error()+" at offset ") {
		t.Errorf("%s: error text %q", what, err)
	}
}

func TestReadString(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		end      int // position after the string
	}{
		{`""`, "", 2},
		{`"abc"x`, "abc", 5},
		{`"a longer plain string, past 8 bytes"`, "a longer plain string, past 8 bytes", 37},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t", 22},
		{`"\u00e9\u20AC\ud83d\ude00z"`, "é€😀z", 27},
		{`"é€😀"`, "é€😀", 11},
		{`"plain for eight\n then more"`, "plain for eight\n then more", 29},
		{`"\u0000"`, "\x00", 8},
	} {
		s := scan(tt.in)
		got, err := s.ReadString()
		if err != nil || got != tt.want || s.Pos() != tt.end {
			t.Errorf("ReadString(%s) = %q, %v at %d; want %q at %d", tt.in, got, err, s.Pos(), tt.want, tt.end)
		}
	}
	for _, tt := range []struct {
		in     string
		offset int
	}{
		{`"abc`, 4},
		{`"abc\`, 4},
		{"\"a\nb\"", 2},
		{"\"escaped\\n then \x01\"", 16},
		{`"\x"`, 1},
		{`"\u12"`, 1},
		{`"\u12g4"`, 1},
		{`"\ud83d"`, 1},
		{`"\ude00"`, 1},
		{`"\ud83d\u0041"`, 1},
		{"\"\xff\"", 1},
		{"\"\\n\xc3\"", 1},
		{"\"\xed\xa0\x80\"", 1}, // a surrogate encoded as UTF-8
	} {
		_, err := scan(tt.in).ReadString()
		checkErr(t, "ReadString("+tt.in+")", err, ErrSyntax, tt.offset)
	}
}

func TestSkipValue(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, in := range []string{
		`"s"`, `"\u00e9\n"`, `0`, `-0`, `12`, `-2.5e+3`, `1E-2`, `0.0`, `true`, `false`, `null`,
		`[]`, `{}`, ` [ 1 , "a" , { "b" : [ null ] } ] `, `{"a":{"b":{}},"c":[[],[{}]]}`,
		deep(MaxDepth), deepObj(MaxDepth),
	} {
		s := scan(in)
		if err := s.SkipValue(1); err != nil || !s.AtEnd() {
			t.Errorf("SkipValue(%s): %v, at %d", in, err, s.Pos())
		}
	}
	for _, tt := range []struct {
		in     string
		cat    error
		offset int
	}{
		{``, ErrSyntax, 0},
		{`]`, ErrSyntax, 0},
		{`-`, ErrSyntax, 1},
		{`1.`, ErrSyntax, 2},
		{`1e`, ErrSyntax, 2},
		{`+1`, ErrSyntax, 0},
		{`tru`, ErrSyntax, 0},
		{`[1 2]`, ErrSyntax, 3},
		{`[1,]`, ErrSyntax, 3},
		{`{"a" 1}`, ErrSyntax, 5},
		{`{a:1}`, ErrSyntax, 1},
		{`{"a":1,}`, ErrSyntax, 7},
		{`["\q"]`, ErrSyntax, 2},
		{`["\u12"]`, ErrSyntax, 2},
		{"[\"\t\"]", ErrSyntax, 2},
		{"[\"\xff\"]", ErrSyntax, 2},
		{`["abc`, ErrSyntax, 5},
		{deep(MaxDepth + 1), ErrLimit, MaxDepth},
		{deepObj(MaxDepth + 1), ErrLimit, -1},
	} {
		err := scan(tt.in).SkipValue(1)
		checkErr(t, "SkipValue("+tt.in+")", err, tt.cat, tt.offset)
	}
	// A leading zero ends the number: the caller finds the 1.
	if s := scan(`01`); s.SkipValue(1) != nil || s.Pos() != 1 {
		t.Errorf("SkipValue(01) should stop after 0")
	}
	// depth counts from what the caller passes.
	if err := scan(deep(2)).SkipValue(MaxDepth - 1); err != nil {
		t.Errorf("depth %d: %v", MaxDepth, err)
	}
	checkErr(t, "depth past MaxDepth", scan(deep(2)).SkipValue(MaxDepth), ErrLimit, 1)
}

func TestReadNumberAndInt(t *testing.T) {
	for _, tt := range []struct {
		in                      string
		mag                     uint64
		neg, integral, overflow bool
		v                       int64
		ok                      bool
	}{
		{"0", 0, false, true, false, 0, true},
		{"-0", 0, true, true, false, 0, true},
		{"42", 42, false, true, false, 42, true},
		{"-42", 42, true, true, false, -42, true},
		{"9223372036854775807", 1<<63 - 1, false, true, false, 1<<63 - 1, true},
		{"9223372036854775808", 1 << 63, false, true, false, 0, false},
		{"-9223372036854775808", 1 << 63, true, true, false, -1 << 63, true},
		{"-9223372036854775809", 1<<63 + 1, true, true, false, 0, false},
		{"18446744073709551615", 1<<64 - 1, false, true, false, 0, false},
		{"18446744073709551616", 0, false, true, true, 0, false},
		{"1.5", 1, false, false, false, 0, false},
		{"2e2", 2, false, false, false, 0, false},
	} {
		s := scan(tt.in)
		mag, neg, integral, overflow, err := s.ReadNumber()
		if err != nil || neg != tt.neg || integral != tt.integral || overflow != tt.overflow || !tt.overflow && mag != tt.mag || !s.AtEnd() {
			t.Errorf("ReadNumber(%s) = %d %v %v %v %v", tt.in, mag, neg, integral, overflow, err)
		}
		v, ok, present, err := scan(tt.in).ReadInt(1)
		if err != nil || ok != tt.ok || !present || ok && v != tt.v {
			t.Errorf("ReadInt(%s) = %d %v %v %v", tt.in, v, ok, present, err)
		}
	}
	// ReadInt: null is absent; another type is present, not ok, and skipped.
	if v, ok, present, err := scan("null").ReadInt(1); v != 0 || ok || present || err != nil {
		t.Errorf("ReadInt(null) = %d %v %v %v", v, ok, present, err)
	}
	s := scan(`{"a":[1]} `)
	if _, ok, present, err := s.ReadInt(1); ok || !present || err != nil || !s.AtEnd() {
		t.Errorf("ReadInt(object) = %v %v %v, at %d", ok, present, err, s.Pos())
	}
	_, _, _, err := scan(`"1`).ReadInt(1)
	checkErr(t, "ReadInt of a broken string", err, ErrSyntax, 2)
	_, _, _, err = scan(`[[1]]`).ReadInt(MaxDepth)
	checkErr(t, "ReadInt too deep", err, ErrLimit, 1)
}

func TestLiterals(t *testing.T) {
	for in, want := range map[string][2]bool{"true": {true, true}, "false": {false, true}, "null": {false, false}} {
		s := scan(in + ",")
		v, isBool, err := s.ReadLiteral()
		if err != nil || v != want[0] || isBool != want[1] || s.Peek() != ',' {
			t.Errorf("ReadLiteral(%s) = %v %v %v", in, v, isBool, err)
		}
	}
	for _, in := range []string{"tru", "nul", "f", "True", ""} {
		_, _, err := scan(in).ReadLiteral()
		checkErr(t, "ReadLiteral("+in+")", err, ErrSyntax, 0)
	}
	if s := scan("null}"); !s.ReadNull() || s.Peek() != '}' {
		t.Error("ReadNull(null)")
	}
	if s := scan("nul"); s.ReadNull() || s.Pos() != 0 {
		t.Error("ReadNull(nul)")
	}
}

func TestObject(t *testing.T) {
	s := scan(` { "a" : 1 , "b\u0063" : "x" , "d" : [ 2 ] } `)
	if s.Next() != '{' {
		t.Fatal("Next")
	}
	var keys []string
	err := s.Object(func(key string) error {
		keys = append(keys, key)
		return s.SkipValue(2)
	})
	if err != nil || strings.Join(keys, ",") != "a,bc,d" || !s.AtEnd() {
		t.Fatalf("Object: %v %q at %d", err, keys, s.Pos())
	}
	if err := scan(`{}`).Object(func(string) error { return errors.New("called") }); err != nil {
		t.Errorf("empty object: %v", err)
	}
	stop := errors.New("stop")
	if err := scan(`{"a":1}`).Object(func(string) error { return stop }); err != stop {
		t.Errorf("fn's error: %v", err)
	}
	for _, tt := range []struct {
		in     string
		offset int
	}{
		{`{`, 1}, {`{"a"}`, 4}, {`{"a":1,}`, 7}, {`{"a":1 "b":2}`, 7}, {`{'a':1}`, 1}, {`{"a":1`, 6}, {`{"\x":1}`, 2},
	} {
		s := scan(tt.in)
		err := s.Object(func(string) error { return s.SkipValue(2) })
		checkErr(t, "Object("+tt.in+")", err, ErrSyntax, tt.offset)
	}
}

func TestPositionAndFail(t *testing.T) {
	s := scan(" \t\r\n x")
	if s.Peek() != ' ' || s.Next() != 'x' || s.Pos() != 5 || s.AtEnd() {
		t.Fatalf("Next/Peek/Pos at %d", s.Pos())
	}
	s.Advance()
	if s.Peek() != 0 || s.Next() != 0 || !s.AtEnd() {
		t.Error("end of input")
	}
	cat := errors.New("webpush: test category")
	checkErr(t, "Fail", s.Fail(cat, "why"), cat, 6)
	checkErr(t, "FailAt", s.FailAt(2, cat, "why"), cat, 2)
	if got := s.FailAt(2, cat, "why").Error(); got != "webpush: test category at offset 2: why" {
		t.Errorf("error text %q", got)
	}
	var zero Scanner
	if zero.Next() != 0 || !zero.AtEnd() {
		t.Error("zero Scanner")
	}
}

// TestZeroAlloc: scanning a well-formed object allocates nothing, escapes
// included.
func TestZeroAlloc(t *testing.T) {
	src := []byte(`{"messageType":"ack","key":"a\"b\u00e9","n":-12,"x":[true,null,{"y":1.5e3}],"z":false}`)
	buf := make([]byte, len(src))
	allocs := testing.AllocsPerRun(100, func() {
		copy(buf, src)
		s := New(buf)
		s.Next()
		err := s.Object(func(key string) error {
			switch key {
			case "messageType", "key":
				_, err := s.ReadString()
				return err
			case "n":
				_, _, _, err := s.ReadInt(2)
				return err
			}
			return s.SkipValue(2)
		})
		if err != nil || !s.AtEnd() {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocs, want 0", allocs)
	}
}
