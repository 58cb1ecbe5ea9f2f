package stack_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/autopush-go/autopush/"

// deps lists the module's packages pkg links (itself included), without
// its tests.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var own []string
	for p := range strings.FieldsSeq(string(out)) {
		if rest, ok := strings.CutPrefix(p, module); ok {
			own = append(own, rest)
		}
	}
	return own
}

// TestLayers: each tier links neither the other tier nor a storage
// backend (only the binaries and tools that open a store do); the stack
// links no test helper; what internal/ shares imports no tier.
func TestLayers(t *testing.T) {
	never := map[string][]string{
		"engine":  {"apitier", "stack", "storage/embedded", "storage/scylla", "storage/open"},
		"apitier": {"engine", "stack", "storage/embedded", "storage/scylla", "storage/open"},
		"stack":   {"engine/enginetest", "apitier/apitiertest", "stack/stacktest", "storage/open", "storage/embedded", "storage/scylla"},
		// The single-node server's package: the main opens the store.
		"stack/single": {"engine/enginetest", "apitier/apitiertest", "stack/stacktest", "storage/open", "storage/embedded", "storage/scylla"},
	}
	out, err := exec.Command("go", "list", module+"internal/...").Output()
	if err != nil {
		t.Fatalf("go list internal/...: %v", err)
	}
	for p := range strings.FieldsSeq(string(out)) {
		never[strings.TrimPrefix(p, module)] = []string{"engine", "apitier", "stack"}
	}
	for pkg, banned := range never {
		linked := deps(t, pkg)
		for _, b := range banned {
			if slices.Contains(linked, b) {
				t.Errorf("%s links %s", pkg, b)
			}
		}
	}
}
