package dockerflow

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestVersion(t *testing.T) {
	var dev map[string]string
	if err := json.Unmarshal(Version(""), &dev); err != nil || dev["version"] != "dev" {
		t.Fatalf("dev version %q %v", Version(""), err)
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
