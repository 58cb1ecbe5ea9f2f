package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/internal/buildinfo"
	"github.com/autopush-go/autopush/internal/token"
)

// TestVersion: version, -version and --version print the build's
// version and exit 0 without starting, before any setting is read (a bad
// one does not stop it); without a version file /__version__ serves the
// same version from the build info.
func TestVersion(t *testing.T) {
	bin := binary(t)
	var printed string
	for _, arg := range []string{"version", "-version", "--version"} {
		dir := t.TempDir()
		cmd := exec.Command(bin, arg)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "AUTOPUSH__CRYPTO_KEY=not-a-key", "AUTOPUSH__DATA_DIR="+filepath.Join(dir, "store"))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("autopush %s: %v\n%s", arg, err, out)
		}
		f := strings.Fields(string(out))
		if len(f) < 3 || f[0] != "autopush" || !strings.HasPrefix(f[2], "(") {
			t.Fatalf("autopush %s printed %q, want autopush VERSION (...)", arg, out)
		}
		if printed = f[1]; printed == "" {
			t.Fatal("no version")
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("autopush %s started something: %v left in its directory", arg, left)
		}
	}
	vals := minimal(t, t.TempDir())
	vals["crypto-key"], vals["version-file"] = token.GenerateKey(), filepath.Join(t.TempDir(), "absent.json")
	start(t, fromFlags, vals)
	code, body := get(t, vals["endpoint-url"]+"/__version__", "")
	var doc map[string]string
	if err := json.Unmarshal([]byte(body), &doc); code != 200 || err != nil {
		t.Fatalf("/__version__: %d %s %v", code, body, err)
	}
	if doc["version"] != printed || doc["source"] != buildinfo.Source || doc["commit"] == "" || doc["build"] == "" {
		t.Errorf("/__version__ without a version file: %s, want version %s (what `autopush version` says)", body, printed)
	}
}
