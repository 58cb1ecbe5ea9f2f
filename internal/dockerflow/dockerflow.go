package dockerflow

import (
	"encoding/json"
	"os"
)

// devVersion is served when no version.json was baked into the image.
const devVersion = `{"source":"https://github.com/autopush-go/autopush","version":"dev","commit":"unknown","build":"unknown"}`

// Version returns the version.json at path for /__version__, or a "dev"
// document when there is none (a local build).
func Version(path string) []byte {
	if path != "" {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
	}
	return []byte(devVersion)
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
