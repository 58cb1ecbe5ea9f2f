package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	citedTestFile = regexp.MustCompile(`\b[\w.-]+(?:/[\w.-]+)+_test\.go\b`)
	citedTestName = regexp.MustCompile(`\bTest[A-Z]\w*\b`)
	testFunc      = regexp.MustCompile(`(?m)^func (Test[A-Z]\w*)\(`)
)

// TestCitedTestsExist: every test file a tracked file names by its path
// (ops/selfhost_test.go) exists, and every test a Markdown file, a
// Makefile, a shell script or a config names (TestReadmeLibraries) is a
// test function of the repository: a doc that says a test shows
// something must not name one that is gone.
func TestCitedTestsExist(t *testing.T) {
	tests := map[string]bool{}
	texts := map[string]string{}
	for _, name := range trackedFiles(t) {
		if strings.Contains("/"+name, "/testdata/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			continue // deleted in the work tree
		}
		texts[name] = string(b)
		if strings.HasSuffix(name, "_test.go") {
			for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
				tests[m[1]] = true
			}
		}
	}
	if len(tests) < 100 {
		t.Fatalf("%d test functions found: the test checks nothing", len(tests))
	}
	for name, text := range texts {
		for _, path := range citedTestFile.FindAllString(text, -1) {
			if _, err := os.Stat(filepath.Join("..", path)); err != nil && !strings.HasPrefix(path, "../") {
				t.Errorf("%s names %s, which does not exist", name, path)
			}
		}
		if !prose(name) {
			continue
		}
		for _, test := range citedTestName.FindAllString(text, -1) {
			if !tests[test] && !notTests[test] && !prefixOfATest(tests, test) {
				t.Errorf("%s names %s, which is no test of the repository", name, test)
			}
		}
	}
}

// notTests are words of the docs that look like tests' names.
var notTests = map[string]bool{"TestFlight": true} // Apple's beta channel

// prefixOfATest: a name that begins tests' names (-run '^TestCluster').
func prefixOfATest(tests map[string]bool, prefix string) bool {
	for name := range tests {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// prose: the files whose test names are citations (Go files name tests
// for other reasons: prefixes, regexps, themselves).
func prose(name string) bool {
	switch filepath.Ext(name) {
	case ".md", ".sh", ".yml", ".yaml", ".service", ".env", ".conf":
		return true
	}
	return filepath.Base(name) == "Makefile"
}
