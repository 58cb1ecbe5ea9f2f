package stack_test

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The layering rules (docs/architecture.md), checked on the module's
// import graph. Every rule names package prefixes: a rule on "apitier"
// holds for apitier and every package under it, and a ban of "engine"
// bans engine/ws as much as engine. Test files do not count: a package's
// tests may link what the package must not.

const module = "github.com/autopush-go/autopush/"

// pkgInfo is one of the module's packages: its non-test Go files and
// what it links (itself excluded, the module's packages without the
// module prefix, the standard library's and others' as they are).
type pkgInfo struct {
	files []string
	deps  []string
}

// graph lists the module's packages with what each links (go list -deps
// of each, without tests), in one go list.
func graph(t *testing.T) map[string]pkgInfo {
	t.Helper()
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}} files:{{range .GoFiles}}{{$.Dir}}/{{.}},{{end}}{{range .Deps}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := map[string]pkgInfo{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		var deps []string
		for _, d := range f[2:] {
			deps = append(deps, strings.TrimPrefix(d, module))
		}
		var files []string
		for file := range strings.SplitSeq(strings.TrimPrefix(f[1], "files:"), ",") {
			if file != "" {
				files = append(files, file)
			}
		}
		g[strings.TrimPrefix(f[0], module)] = pkgInfo{files: files, deps: deps}
	}
	if len(g) == 0 {
		t.Fatal("go list listed no package")
	}
	return g
}

// under reports whether pkg is prefix or a package below it.
func under(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// underAny reports whether pkg is under one of the prefixes.
func underAny(pkg string, prefixes ...string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return under(pkg, p) })
}

// testHelper reports a test double or helper package: one named ...test
// (enginetest, apitiertest, stacktest, storagetest, cqltest, e2etest),
// or below one (sender/sendertest/swrvefake). loadtest is the
// load tester, not a helper.
func testHelper(pkg string) bool {
	for e := range strings.SplitSeq(pkg, "/") {
		if strings.HasSuffix(e, "test") && e != "loadtest" {
			return true
		}
	}
	return false
}

// binary reports a main package (cmd/...).
func binary(pkg string) bool { return strings.Contains("/"+pkg+"/", "/cmd/") }

// rule: the packages under from (but not test helpers, nor binaries)
// link nothing under banned.
type rule struct {
	from   string
	banned []string
	why    string
}

// backends are the storage backends and their opener: only binaries
// choose one.
var backends = []string{"storage/embedded", "storage/scylla", "storage/open"}

// The floors, from the ground up: storage; internal (what the tiers
// share); sender, engine and apitier (the tiers: apitier stands on the
// sender's core, whose push API it serves); stack (the tiers in one
// process); the binaries, loadtest and tools on top.
var rules = []rule{
	{from: "storage", banned: []string{"internal", "sender", "engine", "apitier", "stack", "loadtest", "tools"},
		why: "storage is the ground floor: it imports nothing of ours"},
	{from: "internal", banned: append([]string{"sender", "engine", "apitier", "stack", "loadtest", "tools"}, backends...),
		why: "what the tiers share imports no tier"},
	{from: "sender", banned: append([]string{"engine", "apitier", "stack", "loadtest", "tools", "github.com/cloudwego/hertz"}, backends...),
		why: "the sender (a deployable of its own) imports no HTTP tier code, no Hertz and no engine"},
	{from: "engine", banned: append([]string{"apitier", "sender", "stack", "loadtest", "tools"}, backends...),
		why: "the connection tier links neither the endpoint tier nor the sender nor a storage backend"},
	{from: "engine/session", banned: []string{"internal/nodeapi"},
		why: "the I/O-free session core returns its own outcomes; engine/nodeapi.go answers them with the node API's statuses"},
	{from: "apitier", banned: append([]string{"engine", "stack", "loadtest", "tools",
		"sender/swrve", "sender/fcm", "sender/apns", "sender/logprovider", "sender/node"}, backends...),
		why: "the endpoint tier links neither the connection tier nor a provider client nor a storage backend; the binaries compose the sender's node beside it"},
	{from: "stack", banned: append([]string{"loadtest", "tools"}, backends...),
		why: "the stack takes its store from its caller; the single-node server's main opens it"},
}

// TestLayers checks the module's import graph: the rules, prefix by
// prefix; no service binary links a fake; no package is over maxLines
// without a reason; no non-test file is over maxFileLines.
func TestLayers(t *testing.T) {
	g := graph(t)
	t.Run("rules", func(t *testing.T) { checkRules(t, g) })
	t.Run("no fake in a service binary", func(t *testing.T) { checkBinaries(t, g) })
	t.Run("package size", func(t *testing.T) { checkSizes(t, g) })
	t.Run("file size", func(t *testing.T) { checkFileSizes(t, "..") })
}

// checkRules checks the rules, and that no non-test package links a
// test helper (outside the helpers themselves, the test harness in
// tools/ and the load tester, whose sender scenario drives the fake
// providers), and that the sender serves no HTTP.
func checkRules(t *testing.T, g map[string]pkgInfo) {
	for _, r := range rules {
		for pkg, info := range g {
			if !under(pkg, r.from) || testHelper(pkg) || binary(pkg) {
				continue
			}
			for _, d := range info.deps {
				// Ours, or another module's: the standard library's
				// internal/... is no package of ours.
				if underAny(d, r.banned...) && (isModule(g, d) || strings.Contains(strings.Split(d, "/")[0], ".")) {
					t.Errorf("%s links %s: %s", pkg, d, r.why)
				}
			}
		}
	}
	for pkg, info := range g {
		if testHelper(pkg) || binary(pkg) || underAny(pkg, "tools", "loadtest") {
			continue // binaries: checkBinaries
		}
		for _, d := range info.deps {
			if isModule(g, d) && testHelper(d) {
				t.Errorf("%s links the test helper %s", pkg, d)
			}
		}
	}
	// The sender serves no HTTP: only the node's wiring runs a server
	// (autosender's operations routes); the push API is the HTTP tier's.
	serves := regexp.MustCompile(`\bhttp\.(Server|ServeMux|NewServeMux|ListenAndServe|Serve|Handle|HandleFunc|Handler|HandlerFunc|ResponseWriter)\b`)
	for pkg, info := range g {
		if !under(pkg, "sender") || under(pkg, "sender/node") || testHelper(pkg) {
			continue
		}
		for _, src := range sources(t, info) {
			if m := serves.FindString(src.text); m != "" {
				t.Errorf("%s (%s) uses %s: the sender core serves no HTTP", pkg, src.name, m)
			}
		}
	}
}

// source is one non-test Go file's text.
type source struct{ name, text string }

// sources reads a package's non-test Go files.
func sources(t *testing.T, info pkgInfo) []source {
	t.Helper()
	var out []source
	for _, f := range info.files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, source{filepath.Base(f), string(b)})
	}
	return out
}

// checkBinaries: no service binary (every cmd/ package but the load
// tester's and the tools') links a fake provider or any other test
// helper: the fakes (sender/sendertest/...) are for the tests and
// the load tester only.
func checkBinaries(t *testing.T, g map[string]pkgInfo) {
	n := 0
	for pkg, info := range g {
		if !binary(pkg) || underAny(pkg, "loadtest", "tools") {
			continue
		}
		n++
		for _, d := range info.deps {
			if !isModule(g, d) {
				continue
			}
			if testHelper(d) {
				t.Errorf("the service binary %s links %s", pkg, d)
			}
		}
	}
	if n < 4 { // autoconnect, autoendpoint, autosender, autopush
		t.Fatalf("%d service binaries found: the rule checks nothing", n)
	}
}

// isModule reports one of the module's packages (as graph names them).
func isModule(g map[string]pkgInfo, pkg string) bool {
	_, ok := g[pkg]
	return ok
}

// maxLines is the most non-test lines a package may have unless its
// doc.go says why (a paragraph starting "Size:"): past it, a package
// usually holds more than one concept.
const maxLines = 2500

var sizeReason = regexp.MustCompile(`(?m)^// Size: \S`)

// checkSizes: no package has over maxLines non-test lines (its Go files
// but the _test.go ones, every line counted) without a reason in its
// doc.go.
func checkSizes(t *testing.T, g map[string]pkgInfo) {
	for pkg, info := range g {
		lines := 0
		for _, src := range sources(t, info) {
			lines += strings.Count(src.text, "\n")
		}
		if lines <= maxLines || len(info.files) == 0 {
			continue
		}
		doc, _ := os.ReadFile(filepath.Join(filepath.Dir(info.files[0]), "doc.go"))
		if !sizeReason.Match(doc) {
			t.Errorf("%s has %d non-test lines, over %d, and its doc.go gives no reason (a paragraph \"Size: ...\")", pkg, lines, maxLines)
		}
	}
}

// maxFileLines is the most lines a non-test Go file may have: past it, a
// file usually holds more than one concept. Test helper packages
// (storagetest, enginetest, ...) count; _test.go files do not.
const maxFileLines = 650

// checkFileSizes: no Go file under root but the _test.go ones (testdata,
// and directories the go tool ignores, aside) has over maxFileLines lines,
// every line counted.
func checkFileSizes(t *testing.T, root string) {
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		n++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if lines := bytes.Count(b, []byte("\n")); lines > maxFileLines {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s has %d lines, over %d: split it along a seam, a file for each concept", rel, lines, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("%d non-test Go files found under %s: the rule checks nothing", n, root)
	}
}
