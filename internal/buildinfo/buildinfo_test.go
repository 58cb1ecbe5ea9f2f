package buildinfo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

const rev = "5bea7e4c52edd5f53da3adb96ff4cf53aa0c83da"

func vcsBuild(modified string) *debug.BuildInfo {
	return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261207053521-5bea7e4c52ed"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-12-07T05:35:21Z"}, {Key: "vcs.modified", Value: modified}}}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		info Info
		want string
	}{
		{parse(vcsBuild("false")), "v0.0.0-20261207053521-5bea7e4c52ed (commit 5bea7e4c52ed, 2026-12-07T05:35:21Z, go1.26.8)"},
		{parse(vcsBuild("true")), "v0.0.0-20261207053521-5bea7e4c52ed (commit 5bea7e4c52ed, 2026-12-07T05:35:21Z, modified, go1.26.8)"},
		{parse(&debug.BuildInfo{GoVersion: "go1.26.8"}), "(devel) (no commit recorded: built with -buildvcs=false or outside a git checkout, go1.26.8)"},
		// make dist's stamp wins over Go's record, field by field.
		{parse(vcsBuild("true")).stamped("v1.2.3-dirty", "", "", "false"), "v1.2.3-dirty (commit 5bea7e4c52ed, 2026-12-07T05:35:21Z, go1.26.8)"},
		{parse(&debug.BuildInfo{GoVersion: "go1.26.8"}).stamped("v1.2.3", rev, "2026-12-07T05:35:21Z", "true"), "v1.2.3 (commit 5bea7e4c52ed, 2026-12-07T05:35:21Z, modified, go1.26.8)"},
	} {
		if got := tc.info.String(); got != tc.want {
			t.Errorf("String() = %q\nwant        %q", got, tc.want)
		}
	}
}

func TestDocument(t *testing.T) {
	for _, tc := range []struct {
		info Info
		want map[string]string
	}{
		{parse(vcsBuild("true")), map[string]string{"source": Source, "version": "v0.0.0-20261207053521-5bea7e4c52ed", "commit": rev, "build": "2026-12-07T05:35:21Z"}},
		{parse(&debug.BuildInfo{}), map[string]string{"source": Source, "version": "(devel)", "commit": "unknown", "build": "unknown"}},
	} {
		var got map[string]string
		if err := json.Unmarshal(tc.info.Document(), &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) {
			t.Errorf("document %v, want %v", got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("document %s = %q, want %q", k, got[k], v)
			}
		}
	}
}

// TestSourceBuildNamesItsCommit: `go build` in a git clone, with no
// flag but -buildvcs=true (a machine's GOFLAGS may turn it off), gives
// a binary whose version names the clone's commit, and says "modified"
// once the work tree has a change.
func TestSourceBuildNamesItsCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and builds a binary (not with -short)")
	}
	_, err := exec.LookPath("git")
	e2etest.Require(t, err == nil, "git not found: apt-get install git")
	clone := filepath.Join(t.TempDir(), "src")
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	git("clone", "--quiet", e2etest.ModuleRoot(), clone)
	head := git("-C", clone, "rev-parse", "HEAD")
	version := func() string {
		bin := filepath.Join(t.TempDir(), "autokey")
		build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./tools/cmd/autokey")
		build.Dir = clone
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("autokey version: %v", err)
		}
		return string(out)
	}
	if got := version(); !strings.HasPrefix(got, "autokey v0.0.0-") || !strings.Contains(got, "(commit "+head[:12]+", ") || strings.Contains(got, "modified") {
		t.Errorf("a build of a clean clone at %s says %q", head, got)
	}
	if err := os.WriteFile(filepath.Join(clone, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := version(); !strings.Contains(got, "(commit "+head[:12]+", ") || !strings.Contains(got, ", modified, ") {
		t.Errorf("a build of a changed clone says %q, want commit %s and modified", got, head[:12])
	}
}
