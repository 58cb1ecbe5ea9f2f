package docs_test

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/stack/stacktest"
)

// family is a metric family as metrics.md documents it or as /metrics
// serves it.
type family struct {
	kind   string // counter, gauge, histogram (le buckets); served only: vmrange histogram
	labels []string
}

// metricRow is a row of metrics.md's tables:
// | `name` | kind | `label`, `label` | what |
var metricRow = regexp.MustCompile("(?m)^\\| `((?:autoconnect|autoendpoint)_[a-z_]+)` \\| (counter|gauge|histogram) \\| ([^|]*)\\|")

func documentedMetrics(t *testing.T) map[string]family {
	t.Helper()
	b, err := os.ReadFile("metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]family{}
	for _, m := range metricRow.FindAllStringSubmatch(string(b), -1) {
		f := family{kind: m[2]}
		for l := range strings.SplitSeq(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				f.labels = append(f.labels, l)
			}
		}
		slices.Sort(f.labels)
		if _, dup := out[m[1]]; dup {
			t.Errorf("metrics.md lists %s twice", m[1])
		}
		out[m[1]] = f
	}
	return out
}

// servedMetrics groups the autoconnect_/autoendpoint_ series of a
// /metrics text by family.
func servedMetrics(series []promtext.Sample) map[string]family {
	out := map[string]family{}
	for _, s := range series {
		if !strings.HasPrefix(s.Name, "autoconnect_") && !strings.HasPrefix(s.Name, "autoendpoint_") {
			continue
		}
		name, kind := s.Name, "gauge"
		switch {
		case strings.HasSuffix(name, "_bucket") && s.Labels["le"] != "":
			name, kind = strings.TrimSuffix(name, "_bucket"), "histogram"
		case strings.HasSuffix(name, "_bucket") && s.Labels["vmrange"] != "":
			// The library's own histograms: Prometheus cannot take
			// percentiles of them (metrics.md says every histogram can).
			name, kind = strings.TrimSuffix(name, "_bucket"), "vmrange histogram"
		case strings.HasSuffix(name, "_sum"), strings.HasSuffix(name, "_count"):
			name, kind = name[:strings.LastIndexByte(name, '_')], "histogram"
		case strings.HasSuffix(name, "_total"):
			kind = "counter"
		}
		f := out[name]
		if f.kind != "vmrange histogram" { // its _sum and _count must not hide it
			f.kind = kind
		}
		for l := range s.Labels {
			if l != "le" && l != "vmrange" && !slices.Contains(f.labels, l) {
				f.labels = append(f.labels, l)
			}
		}
		slices.Sort(f.labels)
		out[name] = f
	}
	return out
}

// TestMetricsDoc checks metrics.md against the /metrics of running nodes
// (with the bridges configured: some series are per app) after a little
// of every kind of traffic: every family served is documented with its
// type and labels, and every documented one is served.
func TestMetricsDoc(t *testing.T) {
	st := stacktest.StartWith(t, stacktest.Options{Bridges: true})
	st.Exercise(t)
	engineText, apiText := st.Metrics(t)
	// As a scraper reads them: typed, with HELP, and (for the two pages
	// together) every family metrics.md lists but the process's, which
	// depend on what /proc offers, and the milestones, served only with
	// receipts or tracking on (TestEveryBinaryExposition has them).
	engineFams, apiFams := parseExposition(t, "connection node", engineText), parseExposition(t, "endpoint node", apiText)
	checkExposition(t, "connection node", engineFams)
	checkExposition(t, "endpoint node", apiFams)
	both := maps.Clone(apiFams)
	maps.Copy(both, engineFams)
	requireFamilies(t, "the stack", both, false, "autoconnect_", "autoendpoint_", "autosender_", "go_")
	served := servedMetrics(append(stacktest.ParseMetrics(t, engineText), stacktest.ParseMetrics(t, apiText)...))
	doc := documentedMetrics(t)
	if len(doc) == 0 {
		t.Fatal("metrics.md lists no metric")
	}
	for name, s := range served {
		d, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("%s (%s, labels %v) is served but not in metrics.md", name, s.kind, s.labels)
		case d.kind != s.kind || !slices.Equal(d.labels, s.labels):
			t.Errorf("%s: metrics.md says %s with labels %v; served as %s with %v", name, d.kind, d.labels, s.kind, s.labels)
		}
	}
	for name := range doc {
		if _, ok := served[name]; !ok {
			t.Errorf("metrics.md lists %s, which no node serves", name)
		}
	}
}
