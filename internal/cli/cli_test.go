package cli

import (
	"bytes"
	"testing"

	"github.com/autopush-go/autopush/internal/buildinfo"
)

// TestPrintVersion: only a first argument of version, -version or
// --version is a version request; it prints the build's line.
func TestPrintVersion(t *testing.T) {
	want := "autopush " + buildinfo.Read().String() + "\n"
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}, {"version", "-data-dir", "x"}} {
		var out bytes.Buffer
		if !PrintVersion("autopush", args, &out) || out.String() != want {
			t.Errorf("%q: printed %q, want %q", args, out.String(), want)
		}
	}
	for _, args := range [][]string{nil, {}, {"-data-dir", "version"}, {"-versions"}, {"versions"}, {"-data-dir", "x", "-version"}} {
		var out bytes.Buffer
		if PrintVersion("autopush", args, &out) || out.Len() != 0 {
			t.Errorf("%q taken for a version request (printed %q)", args, out.String())
		}
	}
}
