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
