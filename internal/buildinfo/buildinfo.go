package buildinfo

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
)

// Set at link time by make dist (-ldflags "-X
// github.com/autopush-go/autopush/internal/buildinfo.Version=..."), each
// in place of what Go recorded. Version names the release as the
// packages do (git describe), which Go's pseudo-version does not match;
// the others are what Go records itself in a clone, but not in a git
// worktree (its .git is a file Go does not follow) nor with
// -buildvcs=false.
var (
	Version  string
	Revision string
	Time     string
	Modified string // "true" or "false"
)

// Source is the repository every build comes from (version.json's
// "source").
const Source = "https://github.com/autopush-go/autopush"

// Info is what a binary knows of its build. The VCS fields are empty
// when the build recorded none (-buildvcs=false, a copy of the source
// without .git, go run, go test).
type Info struct {
	// Version is the stamped Version, else the main module's version:
	// a tag (v1.2.3), a pseudo-version naming the commit
	// (v0.0.0-20261207050000-abcdef123456, +dirty when modified), or
	// "(devel)" when Go knew none.
	Version   string
	Revision  string // vcs.revision: the full commit hash
	Time      string // vcs.time: the commit's time, RFC 3339
	Modified  bool   // vcs.modified: uncommitted changes were built
	GoVersion string
}

// Read returns the running binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	return parse(bi).stamped(Version, Revision, Time, Modified)
}

// parse reads Info out of Go's build info.
func parse(bi *debug.BuildInfo) Info {
	i := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// stamped is i with each value set at link time in place of Go's.
func (i Info) stamped(version, revision, time, modified string) Info {
	for _, f := range []struct {
		dst *string
		v   string
	}{{&i.Version, version}, {&i.Revision, revision}, {&i.Time, time}} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
	if modified != "" {
		i.Modified = modified == "true"
	}
	return i
}

// ShortRevision is the commit's first 12 hex digits (as a Go
// pseudo-version shows it), "" when unknown.
func (i Info) ShortRevision() string {
	if len(i.Revision) > 12 {
		return i.Revision[:12]
	}
	return i.Revision
}

// String is the version line every binary prints for `version`:
// "v1.2.3 (commit abcdef123456, 2026-12-07T05:00:00Z, modified, go1.26.8)".
func (i Info) String() string {
	if i.Revision == "" {
		return fmt.Sprintf("%s (no commit recorded: built with -buildvcs=false or outside a git checkout, %s)", i.Version, i.GoVersion)
	}
	s := i.Version + " (commit " + i.ShortRevision()
	if i.Time != "" {
		s += ", " + i.Time
	}
	if i.Modified {
		s += ", modified"
	}
	return s + ", " + i.GoVersion + ")"
}

// Document is the version.json /__version__ serves when no file was
// given: Mozilla's dockerflow fields, from the build. "commit" stays a
// bare hash (a modified build says so in its version: Go's +dirty, git
// describe's -dirty); it and "build" (the commit's time) are "unknown"
// when the build recorded no VCS information.
func (i Info) Document() []byte {
	b, _ := json.Marshal(struct {
		Source  string `json:"source"`
		Version string `json:"version"`
		Commit  string `json:"commit"`
		Build   string `json:"build"`
	}{Source, i.Version, orUnknown(i.Revision), orUnknown(i.Time)})
	return b
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
