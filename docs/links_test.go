package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)#\s]*)(?:#([^)\s]*))?\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	slugDrop  = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// anchors returns the GitHub-style anchors of a Markdown file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(text, -1) {
		slug := slugDrop.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
		out[strings.ReplaceAll(slug, " ", "-")] = true
	}
	return out
}

// TestLinks checks that every relative link of the docs and the README
// names a file or directory of the repository, and a heading of it when
// the link has an anchor.
func TestLinks(t *testing.T) {
	files, _ := filepath.Glob("*.md")
	files = append(files, "../README.md")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target, anchor := m[1], m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := f
			if target != "" {
				path = filepath.Join(filepath.Dir(f), target)
			}
			text, err := os.ReadFile(path)
			if err != nil {
				if _, serr := os.Stat(path); serr != nil {
					t.Errorf("%s links to %s, which does not exist", f, target)
				}
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(string(text))[anchor] {
				t.Errorf("%s links to %s#%s: no such heading", f, target, anchor)
			}
		}
	}
}
