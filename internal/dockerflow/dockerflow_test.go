package dockerflow

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/autopush-go/autopush/internal/buildinfo"
)

// TestVersion: a version.json file wins; without one (none given, or
// none at the path) the document comes from the binary's build info.
func TestVersion(t *testing.T) {
	want := buildinfo.Read().Document()
	for _, path := range []string{"", filepath.Join(t.TempDir(), "absent.json")} {
		var doc map[string]string
		if err := json.Unmarshal(Version(path), &doc); err != nil || string(Version(path)) != string(want) || doc["version"] == "" || doc["commit"] == "" {
			t.Fatalf("Version(%q) = %s (%v), want the build's %s", path, Version(path), err, want)
		}
	}
	p := filepath.Join(t.TempDir(), "version.json")
	os.WriteFile(p, []byte(`{"version":"1.2.3"}`), 0o600)
	if string(Version(p)) != `{"version":"1.2.3"}` {
		t.Fatalf("file version %q", Version(p))
	}
}

func TestVersionString(t *testing.T) {
	for doc, want := range map[string]string{`{"version":"1.2.3"}`: "1.2.3", `{}`: "unknown", `not json`: "unknown", ``: "unknown"} {
		if got := VersionString([]byte(doc)); got != want {
			t.Errorf("VersionString(%q) = %q, want %q", doc, got, want)
		}
	}
}
