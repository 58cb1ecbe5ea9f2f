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
	p := takePage()
	defer p.give()
	for _, write := range writers {
		write(&p.raw)
	}
	p.n.normalize(&p.out, p.raw.Bytes(), Documented())
	_, err := w.Write(p.out.Bytes())
	return err
}

// Handler serves the page of the writers' series (GET /metrics).
func Handler(writers ...func(io.Writer)) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		Write(w, writers...)
	}
}

// page is one scrape's scratch, kept for the next: a page is about the
// same size every time, and growing fresh buffers for it (about 1 MB of
// garbage a scrape) was most of what an idle node allocated, and so most
// of its collections.
type page struct {
	raw, out bytes.Buffer
	n        normalizer
}

// pages is the free list of pages. Not a sync.Pool: a collection empties
// that, and a node at rest collects more often than it is scraped.
var pages = make(chan *page, 2)

func takePage() *page {
	select {
	case p := <-pages:
		return p
	default:
		return &page{}
	}
}

func (p *page) give() {
	p.raw.Reset()
	p.out.Reset()
	select {
	case pages <- p:
	default:
	}
}

// Normalize rewrites text-format exposition: every sample line kept (in
// order within its family), the families in the order of their first
// sample, each under one HELP (from doc, else Undocumented) and one TYPE
// (the first TYPE line text had for it, else doc's, else untyped). Other
// comments and blank lines go.
func Normalize(text []byte, doc map[string]Family) []byte {
	var out bytes.Buffer
	var n normalizer
	n.normalize(&out, text, doc)
	return out.Bytes()
}

// normalizer does Normalize's work with maps and slices that outlive a
// page, so that a page like the last one allocates nothing: a name's
// entry stays and is current when its gen is the page's.
type normalizer struct {
	gen    uint64
	types  map[string]seenType
	groups map[string]*group
	order  []*group
}

type seenType struct {
	typ string
	gen uint64
}

// group is one family's sample lines on the page being normalized, as
// offsets into it.
type group struct {
	name  string
	gen   uint64
	lines []span
}

type span struct{ from, to int }

func (n *normalizer) normalize(out *bytes.Buffer, text []byte, doc map[string]Family) {
	if n.types == nil {
		n.types, n.groups = map[string]seenType{}, map[string]*group{}
	}
	n.gen++
	n.order = n.order[:0]
	for rest := text; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, newline)
		if name, typ, ok := typeLine(line); ok {
			if _, seen := n.typeOf(name); !seen {
				n.types[string(name)] = seenType{typ: internType(typ), gen: n.gen}
			}
		}
	}
	for at := 0; at < len(text); {
		line, _, _ := bytes.Cut(text[at:], newline)
		from, to := at, at+len(line)
		at = to + 1
		for from < to && asciiSpace(text[from]) {
			from++
		}
		for to > from && asciiSpace(text[to-1]) {
			to--
		}
		if from == to || text[from] == '#' {
			continue
		}
		name := n.familyOf(sampleName(text[from:to]))
		g := n.groups[string(name)]
		if g == nil {
			g = &group{name: string(name)}
			n.groups[g.name] = g
		}
		if g.gen != n.gen {
			g.gen, g.lines = n.gen, g.lines[:0]
			n.order = append(n.order, g)
		}
		g.lines = append(g.lines, span{from, to})
	}
	for _, g := range n.order {
		d, ok := doc[g.name]
		help := d.Help
		if !ok || help == "" {
			help = Undocumented
		}
		typ := ""
		if t, ok := n.types[g.name]; ok && t.gen == n.gen {
			typ = t.typ
		}
		if typ == "" {
			typ = d.Type
		}
		if typ == "" {
			typ = "untyped"
		}
		for _, s := range [...]string{"# HELP ", g.name, " ", help, "\n# TYPE ", g.name, " ", typ, "\n"} {
			out.WriteString(s)
		}
		for _, s := range g.lines {
			out.Write(text[s.from:s.to])
			out.WriteByte('\n')
		}
	}
}

var newline = []byte("\n")

// asciiSpace is a blank between the format's tokens or around a line.
func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// typeLine is a "# TYPE name type" line's name and type: exactly those
// four blank-separated fields.
func typeLine(line []byte) (name, typ []byte, ok bool) {
	var f [4][]byte
	n := 0
	for {
		for len(line) > 0 && asciiSpace(line[0]) {
			line = line[1:]
		}
		if len(line) == 0 {
			break
		}
		if n == len(f) {
			return nil, nil, false
		}
		end := 0
		for end < len(line) && !asciiSpace(line[end]) {
			end++
		}
		f[n], line, n = line[:end], line[end:], n+1
	}
	if n != 4 || string(f[0]) != "#" || string(f[1]) != "TYPE" {
		return nil, nil, false
	}
	return f[2], f[3], true
}

// typeOf is the type the page's first TYPE line gave name, if any.
func (n *normalizer) typeOf(name []byte) (string, bool) {
	t, ok := n.types[string(name)]
	if !ok || t.gen != n.gen {
		return "", false
	}
	return t.typ, true
}

// internType is a TYPE line's type as a string, without allocating for
// the four the format defines.
func internType(t []byte) string {
	for _, known := range [...]string{"counter", "gauge", "histogram", "summary", "untyped"} {
		if string(t) == known {
			return known
		}
	}
	return string(t)
}

// sampleName is the metric name a sample line starts with.
func sampleName(line []byte) []byte {
	if i := bytes.IndexAny(line, "{ \t"); i >= 0 {
		return line[:i]
	}
	return line
}

// familyOf is the family a sample of name belongs to: a histogram's
// _bucket, _sum and _count, and a summary's _sum and _count, are its
// family's; any other sample is a family of its own name.
func (n *normalizer) familyOf(name []byte) []byte {
	if _, ok := n.typeOf(name); ok {
		return name
	}
	for _, suffix := range [...]string{"_bucket", "_sum", "_count"} {
		base, ok := bytes.CutSuffix(name, []byte(suffix))
		if !ok {
			continue
		}
		switch t, _ := n.typeOf(base); t {
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
