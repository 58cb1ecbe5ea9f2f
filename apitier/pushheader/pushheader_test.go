package pushheader

import "testing"

func TestStripHeader(t *testing.T) {
	for in, want := range map[string]string{
		`salt="foo"`:                     "salt=foo",
		`keyid="p256dh";dh="deadbeef=="`: "keyid=p256dh;dh=deadbeef",
		"a==,b=;c":                       "a,b;c",
		"x==y==":                         "x==y",
		"==,":                            "==,",
		"dh=abc= ;x":                     "dh=abc= ;x",
		"salt=abc":                       "salt=abc",
	} {
		if got := stripHeader([]byte(in)); got != want {
			t.Errorf("stripHeader(%q) = %q, want %q", in, got, want)
		}
	}
}
