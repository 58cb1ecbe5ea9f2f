package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/internal/token"
)

func TestPrintsAKeyThatParses(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(nil, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	line := out.String()
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") || errOut.Len() != 0 {
		t.Fatalf("output %q, stderr %q", line, errOut.String())
	}
	key := strings.TrimSuffix(line, "\n")
	keys, err := token.ParseKeys(key)
	if err != nil || keys.Len() != 1 {
		t.Fatalf("%q: %v", key, err)
	}
	// Usable: an endpoint made with it parses back.
	var uaid, chid [16]byte
	uaid[0], chid[0] = 1, 2
	u, err := keys.MakeEndpoint("https://push.example.com/", uaid, chid, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := keys.ParseToken("v1", u[strings.LastIndexByte(u, '/')+1:])
	if err != nil || e.UAID != uaid || e.CHID != chid {
		t.Fatalf("%+v %v", e, err)
	}
	// A new key each run.
	var again bytes.Buffer
	_ = run(nil, &again, &errOut)
	if again.String() == line {
		t.Fatal("same key twice")
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		var out, errOut bytes.Buffer
		if err := run([]string{arg}, &out, &errOut); err != flag.ErrHelp {
			t.Fatalf("%s: %v", arg, err)
		}
		if out.Len() != 0 || !strings.Contains(errOut.String(), "CRYPTO_KEY=NEWKEY,OLDKEY") {
			t.Fatalf("%s: stdout %q stderr %q", arg, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"extra"}, &out, &errOut); err == nil || out.Len() != 0 {
		t.Fatal("extra argument accepted")
	}
}
