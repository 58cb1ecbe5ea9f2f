package dockerflow

import (
	"encoding/json"
	"os"

	"github.com/autopush-go/autopush/internal/buildinfo"
)

// Version returns the version.json at path for /__version__ (the images
// write one from their build arguments), or, when there is none, the
// same fields from the build info Go embedded in the binary: a source
// build or a package then names its version and commit.
func Version(path string) []byte {
	if path != "" {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
	}
	return buildinfo.Read().Document()
}

// VersionString is the "version" of a version.json document, "unknown"
// when it has none (what /status and /health report).
func VersionString(doc []byte) string {
	var v struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(doc, &v) != nil || v.Version == "" {
		return "unknown"
	}
	return v.Version
}
