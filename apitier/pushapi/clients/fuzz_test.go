package clients

import (
	"reflect"
	"testing"
)

// FuzzParse: the clients file parser never panics, and what it accepts
// is valid and survives Entry and Parse again.
func FuzzParse(f *testing.F) {
	f.Add([]byte("clients:\n" + Entry(marketing())))
	f.Add([]byte("clients:\n  a: {key_sha256: " + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff" + ", scopes: [admin], rate: 0.5}\n"))
	f.Add([]byte("clients: {}\n"))
	f.Add([]byte(""))
	f.Add([]byte("clients:\n"))
	f.Add([]byte("clients:\n  a: &x {scopes: [send]}\n  b: *x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := Parse(b)
		if err != nil {
			return
		}
		text := "clients:\n"
		for _, c := range cs {
			if !ValidName(c.Name) || len(c.Scopes) == 0 || c.Rate < 0 || c.Rate > MaxRate || c.Outstanding < 0 || c.Outstanding > MaxOutstanding {
				t.Fatalf("accepted %+v", c)
			}
			text += Entry(c)
		}
		if len(cs) == 0 {
			text = "clients: {}\n"
		}
		again, err := Parse([]byte(text))
		if err != nil || len(cs) > 0 && !reflect.DeepEqual(again, cs) {
			t.Fatalf("Entry then Parse: %+v %v, want %+v", again, err, cs)
		}
	})
}
