package exposition

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/autopush-go/autopush/docs"
)

// ContentType is the text format's, version 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Undocumented is the HELP of a family metrics.md does not describe.
const Undocumented = "undocumented"

// Family is a metric family as metrics.md documents it.
type Family struct {
	// Type is counter, gauge, histogram or summary.
	Type string
	// Help is the description as plain text (Markdown removed), escaped
	// for a # HELP line.
	Help string
}

// tableRow is a row of metrics.md's tables:
// | `name` | type | labels | description |
var tableRow = regexp.MustCompile("(?m)^\\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` \\| (counter|gauge|histogram|summary) \\|[^|]*\\| (.*) \\|\\s*$")

var (
	link = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	// Documented is metrics.md's families, read once.
	Documented = sync.OnceValue(func() map[string]Family { return ParseTables(docs.MetricsMarkdown) })
)

// ParseTables reads the families of the Markdown tables in md; the first
// row of a name wins.
func ParseTables(md string) map[string]Family {
	out := map[string]Family{}
	for _, m := range tableRow.FindAllStringSubmatch(md, -1) {
		if _, dup := out[m[1]]; !dup {
			out[m[1]] = Family{Type: m[2], Help: plain(m[3])}
		}
	}
	return out
}

// plain is a table cell as one line of text: links as their text, no
// code or emphasis marks, escaped as a HELP line requires.
func plain(cell string) string {
	s := link.ReplaceAllString(cell, "$1")
	s = strings.NewReplacer("`", "", "**", "").Replace(s)
	s = strings.Join(strings.Fields(s), " ")
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

// Write writes the page of the writers' series to w: what they write,
// families grouped, each under its HELP and TYPE. Safe for concurrent
// use (as the writers must be).
func Write(w io.Writer, writers ...func(io.Writer)) error {
	// The library then writes each family's TYPE (and an empty HELP,
	// replaced below). One switch for the process, and idempotent.
	metrics.ExposeMetadata(true)
	var raw bytes.Buffer
	for _, write := range writers {
		write(&raw)
	}
	_, err := w.Write(Normalize(raw.Bytes(), Documented()))
	return err
}

// Handler serves the page of the writers' series (GET /metrics).
func Handler(writers ...func(io.Writer)) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		var b bytes.Buffer
		Write(&b, writers...)
		w.Header().Set("Content-Type", ContentType)
		w.Write(b.Bytes())
	}
}

// group is one family's lines as Normalize found them.
type group struct {
	name    string
	samples [][]byte
}

// Normalize rewrites text-format exposition: every sample line kept (in
// order within its family), the families in the order of their first
// sample, each under one HELP (from doc, else Undocumented) and one TYPE
// (the first TYPE line text had for it, else doc's, else untyped). Other
// comments and blank lines go.
func Normalize(text []byte, doc map[string]Family) []byte {
	types := map[string]string{}
	var groups []*group
	byName := map[string]*group{}
	lines := bytes.Split(text, []byte("\n"))
	for _, line := range lines {
		if f := strings.Fields(string(line)); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			if _, seen := types[f[2]]; !seen {
				types[f[2]] = f[3]
			}
		}
	}
	for _, line := range lines {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name := familyOf(sampleName(line), types)
		g := byName[name]
		if g == nil {
			g = &group{name: name}
			byName[name] = g
			groups = append(groups, g)
		}
		g.samples = append(g.samples, line)
	}
	var out bytes.Buffer
	for _, g := range groups {
		d, ok := doc[g.name]
		help := d.Help
		if !ok || help == "" {
			help = Undocumented
		}
		typ := types[g.name]
		if typ == "" {
			typ = d.Type
		}
		if typ == "" {
			typ = "untyped"
		}
		out.WriteString("# HELP " + g.name + " " + help + "\n# TYPE " + g.name + " " + typ + "\n")
		for _, s := range g.samples {
			out.Write(s)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// sampleName is the metric name a sample line starts with.
func sampleName(line []byte) string {
	if i := bytes.IndexAny(line, "{ \t"); i >= 0 {
		return string(line[:i])
	}
	return string(line)
}

// familyOf is the family a sample of name belongs to: a histogram's
// _bucket, _sum and _count, and a summary's _sum and _count, are its
// family's; any other sample is a family of its own name.
func familyOf(name string, types map[string]string) string {
	if _, ok := types[name]; ok {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		switch types[base] {
		case "histogram":
			return base
		case "summary":
			if suffix != "_bucket" {
				return base
			}
		}
	}
	return name
}
