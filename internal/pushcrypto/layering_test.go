package pushcrypto

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestTiersDoNotImportPushcrypto enforces doc.go: no package of the tiers
// (engine/..., apitier/...) imports pushcrypto, directly or through
// another package of this module. Their tests may.
func TestTiersDoNotImportPushcrypto(t *testing.T) {
	const module = "github.com/autopush-go/autopush"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// via[p] is the package that led to p, to name the chain.
	via := map[string]string{}
	var queue []string
	for _, tier := range []string{"engine", "apitier"} {
		err := filepath.WalkDir(filepath.Join(root, tier), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			p := module + "/" + filepath.ToSlash(rel)
			via[p] = ""
			queue = append(queue, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		pkg, err := build.ImportDir(filepath.Join(root, strings.TrimPrefix(p, module+"/")), 0)
		if err != nil {
			continue // a directory without Go files
		}
		for _, imp := range pkg.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if _, seen := via[imp]; seen {
				continue
			}
			via[imp] = p
			if imp == module+"/internal/pushcrypto" {
				chain := imp
				for q := p; q != ""; q = via[q] {
					chain = q + " -> " + chain
				}
				t.Fatalf("a tier imports pushcrypto: %s", chain)
			}
			queue = append(queue, imp)
		}
	}
	if len(via) < 10 {
		t.Fatalf("walked only %d packages: is the module root %s?", len(via), root)
	}
}
