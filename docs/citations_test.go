package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// citation matches phrases that cite a document the reader does not have:
// the sources the project was written from and the team's own notes. A
// comment or doc says what the thing is and where it was measured or comes
// from instead. Each pattern is written so that this file does not match
// itself.
var citation = regexp.MustCompile(`(?i)\bthe s[e]ed\b|\bseeds?[\s` + "`" + `]*0[0-9]{2}\b|\bseeds[/]|\bsource[ ]documents?\b|\bDESIGN[.]md\b|\bSTYLE[.]md\b|[.][.]/shared\b`)

// fuzzSeed is the one use of "seed" above that names no document: Go's
// fuzz seed corpus.
var fuzzSeed = regexp.MustCompile(`(?i)^the s[e]ed corpus`)

// commentLead is what starts a comment line in the repository's languages
// (Go, shell, YAML, CQL, Markdown lists): dropped so that a phrase broken
// across two comment lines is seen whole.
var commentLead = regexp.MustCompile(`^\s*(//+|#+|--|\*|>)?\s*`)

// hit is a citation: the line it starts on and its phrase.
type hit struct {
	line   int
	phrase string
}

// citations returns the citations in text. Lines are joined (without their
// comment leads) before matching, so a phrase split over two lines is
// found, on the line where it starts.
func citations(text string) []hit {
	var prose strings.Builder
	var starts []int // prose offset of each line
	for line := range strings.SplitSeq(text, "\n") {
		starts = append(starts, prose.Len())
		prose.WriteString(commentLead.ReplaceAllString(line, ""))
		prose.WriteByte(' ')
	}
	s := prose.String()
	var out []hit
	for _, m := range citation.FindAllStringIndex(s, -1) {
		if fuzzSeed.MatchString(s[m[0]:]) {
			continue
		}
		line := sort.Search(len(starts), func(i int) bool { return starts[i] > m[0] })
		out = append(out, hit{line, s[m[0]:m[1]]})
	}
	return out
}

// trackedFiles are the paths of the files git tracks, from the
// repository's root; the test skips without git.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: the tracked files are unknown")
	}
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
}

// TestNoCitations checks every text file git tracks (fuzz corpora aside:
// their "seed" is Go's seed corpus) for phrases that cite a document
// outside the repository.
func TestNoCitations(t *testing.T) {
	checked := 0
	for _, name := range trackedFiles(t) {
		if strings.Contains("/"+name, "/testdata/fuzz/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			continue // binary
		}
		checked++
		for _, c := range citations(string(b)) {
			t.Errorf("%s:%d: %q cites a document outside the repository: say what the thing is and where it comes from", name, c.line, c.phrase)
		}
	}
	if checked < 100 {
		t.Fatalf("%d files checked: the test checks nothing", checked)
	}
}

// TestCitationsFound plants citations, one per pattern and one split over
// two comment lines, and checks each is found on its line; and that the
// fuzz seed corpus and other seeds (a random seed, Cassandra's seeds) are
// not citations.
func TestCitationsFound(t *testing.T) {
	the, seed := "the", "seed"
	planted := strings.Join([]string{
		"// ok",
		"// measured as in " + the + " " + seed + "'s latency",
		"# see " + seed + " 004",
		"see " + seed + "\n`002`'s service", // lines 4 and 5
		"// rules from " + the,
		"// " + seed + "'s rules",
		"- " + seed + "s/002/README.md",
		"the source" + " document says",
		"per DESIGN" + ".md and STYLE" + ".md, ../" + "shared/notes",
		"f.Add(seed) // " + the + " " + seed + " corpus, a random " + seed + ", CQL " + seed + "s: 127.0.0.1",
	}, "\n")
	var got []int
	for _, c := range citations(planted) {
		got = append(got, c.line)
	}
	if want := []int{2, 3, 4, 6, 8, 9, 10, 10, 10}; !slices.Equal(got, want) {
		t.Errorf("citations found on lines %v (%v), want %v", got, citations(planted), want)
	}
}
