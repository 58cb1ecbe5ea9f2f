package exposition

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

func TestParseTables(t *testing.T) {
	md := "| metric | type | labels | what |\n| --- | --- | --- | --- |\n" +
		"| `a_total` | counter | `kind` | Things, see [errors](errors.md); **bold** `code` and a \\ slash. |\n" +
		"| `b_seconds` | histogram | | Latency. |\n" +
		"| `a_total` | gauge | | A second row: ignored. |\n" +
		"| `not a row` | counter | | x |\n"
	got := ParseTables(md)
	if len(got) != 2 {
		t.Fatalf("parsed %v", got)
	}
	if a := got["a_total"]; a.Type != "counter" || a.Help != `Things, see errors; bold code and a \\ slash.` {
		t.Errorf("a_total: %+v", a)
	}
	if b := got["b_seconds"]; b.Type != "histogram" || b.Help != "Latency." {
		t.Errorf("b_seconds: %+v", b)
	}
}

// TestNormalize: the families of several writers grouped, one HELP and
// one TYPE each (the first TYPE wins; the library's empty HELP and other
// comments go), histogram and summary samples under their family.
func TestNormalize(t *testing.T) {
	in := "# HELP h_seconds\n# TYPE h_seconds histogram\nh_seconds_bucket{le=\"1\"} 1\nh_seconds_bucket{le=\"+Inf\"} 2\n" +
		"# TYPE c_total counter\nc_total{k=\"a\"} 1\n" +
		"h_seconds_sum 3\nh_seconds_count 2\n\n# a comment\n" +
		"# TYPE c_total gauge\nc_total{k=\"b\"} 2\n" +
		"# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 1\ns_count 1\nu_count 4\n"
	doc := map[string]Family{"h_seconds": {Type: "histogram", Help: "Latency."}, "c_total": {Type: "counter", Help: "Things."},
		"u_count": {Type: "gauge", Help: "U."}}
	want := "# HELP h_seconds Latency.\n# TYPE h_seconds histogram\nh_seconds_bucket{le=\"1\"} 1\nh_seconds_bucket{le=\"+Inf\"} 2\nh_seconds_sum 3\nh_seconds_count 2\n" +
		"# HELP c_total Things.\n# TYPE c_total counter\nc_total{k=\"a\"} 1\nc_total{k=\"b\"} 2\n" +
		"# HELP s undocumented\n# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 1\ns_count 1\n" +
		"# HELP u_count U.\n# TYPE u_count gauge\nu_count 4\n"
	if got := string(Normalize([]byte(in), doc)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestDocumented: metrics.md is embedded and read: a family of each tier.
func TestDocumented(t *testing.T) {
	doc := Documented()
	for name, typ := range map[string]string{"autoconnect_storage_seconds": "histogram", "autoendpoint_requests_total": "counter",
		"autosender_queue_size": "gauge", "go_gc_duration_seconds": "summary"} {
		if d := doc[name]; d.Type != typ || d.Help == "" || strings.ContainsAny(d.Help, "`\n") {
			t.Errorf("%s: %+v, want a %s with a plain HELP", name, d, typ)
		}
	}
}

// FuzzNormalize: any input normalizes to a page whose samples are the
// input's, and normalizing that page again changes nothing.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\nx 1\n"))
	f.Add([]byte("# TYPE a counter\n# TYPE a gauge\na{b=\"c d\"} 1\n\n#\n"))
	doc := map[string]Family{"a": {Type: "counter", Help: `a \\ b`}}
	// A page normalized after another by the same normalizer (as a node
	// does every scrape) comes out as it would alone.
	before := []byte("# TYPE a gauge\n# TYPE h histogram\nh_count 1\na 1\nb_sum 2\n")
	f.Fuzz(func(t *testing.T, in []byte) {
		out := Normalize(in, doc)
		var n normalizer
		var reused bytes.Buffer
		n.normalize(&reused, before, doc)
		reused.Reset()
		if n.normalize(&reused, in, doc); !bytes.Equal(reused.Bytes(), out) {
			t.Fatalf("after another page:\n%q\nalone:\n%q", reused.Bytes(), out)
		}
		if again := Normalize(out, doc); !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n%q\n%q", out, again)
		}
		if n, m := samples(in), samples(out); n != m {
			t.Fatalf("%d samples in, %d out", n, m)
		}
	})
}

// TestNormalizeAgain: a normalizer kept between pages forgets the last
// page's types and families: a family typed on one page and absent from
// the TYPE lines of the next takes metrics.md's type there, and a family
// gone from the page is not written.
func TestNormalizeAgain(t *testing.T) {
	doc := map[string]Family{"a": {Type: "counter", Help: "A."}}
	var n normalizer
	var out bytes.Buffer
	n.normalize(&out, []byte("# TYPE a gauge\na 1\n# TYPE h histogram\nh_sum 1\nh_count 1\n"), doc)
	if want := "# HELP a A.\n# TYPE a gauge\na 1\n# HELP h undocumented\n# TYPE h histogram\nh_sum 1\nh_count 1\n"; out.String() != want {
		t.Fatalf("first page:\n%s", out.String())
	}
	out.Reset()
	n.normalize(&out, []byte("a 2\nh_sum 3\n"), doc)
	if want := "# HELP a A.\n# TYPE a counter\na 2\n# HELP h_sum undocumented\n# TYPE h_sum untyped\nh_sum 3\n"; out.String() != want {
		t.Errorf("second page:\n%s", out.String())
	}
}

// BenchmarkWrite is one scrape of a page like a node's (every engine
// family, histograms included) through Write: its allocations are the
// garbage an idle node makes per scrape.
func BenchmarkWrite(b *testing.B) {
	set := metrics.NewSet()
	for name, f := range Documented() {
		switch f.Type {
		case "counter":
			set.NewCounter(name + `{kind="a"}`).Inc()
		case "gauge":
			set.NewGauge(name, func() float64 { return 1 })
		case "histogram":
			h := set.NewPrometheusHistogram(name)
			h.Update(0.01)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := Write(io.Discard, set.WritePrometheus, metrics.WriteProcessMetrics); err != nil {
			b.Fatal(err)
		}
	}
}

func samples(text []byte) int {
	n := 0
	for line := range bytes.SplitSeq(text, []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) > 0 && line[0] != '#' {
			n++
		}
	}
	return n
}
