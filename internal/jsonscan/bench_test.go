package jsonscan

import "testing"

// benchScan runs fn on a fresh Scanner over a copy of in, b.N times (the
// copy is measured too: strings are unescaped in place).
func benchScan(b *testing.B, in string, fn func(s *Scanner) error) {
	src := []byte(in)
	buf := make([]byte, len(src))
	s := new(Scanner) // fn is not known here: a Scanner it is given escapes
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		copy(buf, src)
		*s = New(buf)
		if err := fn(s); err != nil {
			b.Fatal(err)
		}
	}
}

func readString(s *Scanner) error { _, err := s.ReadString(); return err }
func skipValue(s *Scanner) error  { return s.SkipValue(1) }

// A version as the engine hands it out: plain base64url, the common case.
func BenchmarkReadString(b *testing.B) {
	benchScan(b, `"gAAAAABmX2Z0aWxlX3ZlcnNpb24tbG9uZ2VyLXRoYW4tdGhpcw"`, readString)
}

func BenchmarkReadStringEscaped(b *testing.B) {
	benchScan(b, `"\"remote-settings\/monitor_changes\" \u00e9\ud83d\ude00 \"1234\""`, readString)
}

func BenchmarkSkipValue(b *testing.B) {
	benchScan(b, `{"x":{"a":[1,-2.5e+3,true,false,null,"some string",{}],"b":[]},"y":0.0}`, skipValue)
}

func BenchmarkAppendString(b *testing.B) {
	const s = "gAAAAABmX2Z0aWxlX3ZlcnNpb24tbG9uZ2VyLXRoYW4tdGhpcw"
	dst := make([]byte, 0, 128)
	b.ReportAllocs()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		dst = AppendString(dst[:0], s)
	}
}
