package docs_test

import (
	"io"
	"math"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/autopush-go/autopush/internal/exposition"
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// parseExposition reads a /metrics page with the Prometheus client
// library's text parser, as Prometheus' own scrapes and exporters read it.
func parseExposition(t *testing.T, who, text string) map[string]*dto.MetricFamily {
	t.Helper()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s: /metrics does not parse: %v", who, err)
	}
	return fams
}

// checkExposition checks a parsed page: no family untyped, each one's
// TYPE and HELP its metrics.md row's, each histogram well formed.
func checkExposition(t *testing.T, who string, fams map[string]*dto.MetricFamily) {
	t.Helper()
	doc := exposition.Documented()
	unescape := strings.NewReplacer(`\\`, `\`, `\n`, "\n")
	for name, f := range fams {
		typ := strings.ToLower(f.GetType().String())
		d, ok := doc[name]
		switch {
		case f.GetType() == dto.MetricType_UNTYPED:
			t.Errorf("%s: %s is untyped (HELP %q)", who, name, f.GetHelp())
		case !ok:
			t.Errorf("%s: %s (%s) is served but has no row in metrics.md", who, name, typ)
		case typ != d.Type:
			t.Errorf("%s: %s is served as a %s; metrics.md says %s", who, name, typ, d.Type)
		case f.GetHelp() != unescape.Replace(d.Help):
			t.Errorf("%s: %s: HELP %q, want metrics.md's %q", who, name, f.GetHelp(), d.Help)
		}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			checkHistogram(t, who, name, f)
		}
	}
}

// checkHistogram: every series has cumulative le buckets up to +Inf and,
// but for the Go runtime's (served without: metrics.md), a _sum and a
// _count equal to the +Inf bucket.
func checkHistogram(t *testing.T, who, name string, f *dto.MetricFamily) {
	t.Helper()
	runtime := strings.HasPrefix(name, "go_")
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		b := h.GetBucket()
		if len(b) < 2 || !math.IsInf(b[len(b)-1].GetUpperBound(), 1) {
			t.Errorf("%s: histogram %s%v: %d buckets, the last not +Inf", who, name, m.GetLabel(), len(b))
			continue
		}
		for i := 1; i < len(b); i++ {
			if b[i].GetCumulativeCount() < b[i-1].GetCumulativeCount() || b[i].GetUpperBound() <= b[i-1].GetUpperBound() {
				t.Errorf("%s: histogram %s%v: bucket le=%g not cumulative", who, name, m.GetLabel(), b[i].GetUpperBound())
			}
		}
		if !runtime && (h.SampleCount == nil || h.SampleSum == nil || h.GetSampleCount() != b[len(b)-1].GetCumulativeCount()) {
			t.Errorf("%s: histogram %s%v: _count %v and _sum %v, +Inf bucket %d", who, name, m.GetLabel(),
				h.SampleCount, h.SampleSum, b[len(b)-1].GetCumulativeCount())
		}
	}
}

// requireFamilies fails for each documented family whose name starts
// with one of prefixes (and, with histogramsOnly, is a histogram) that
// fams lacks.
func requireFamilies(t *testing.T, who string, fams map[string]*dto.MetricFamily, histogramsOnly bool, prefixes ...string) {
	t.Helper()
	for name, d := range exposition.Documented() {
		if histogramsOnly && d.Type != "histogram" {
			continue
		}
		for _, p := range prefixes {
			if _, ok := fams[name]; strings.HasPrefix(name, p) && !ok {
				t.Errorf("%s: metrics.md lists %s (%s), which it does not serve", who, name, d.Type)
			}
		}
	}
}

// TestEveryBinaryExposition starts each binary that serves /metrics as
// its own process on its own embedded store (autoconnect, autoendpoint,
// autosender, and the single-node server autopush with receipts on, so
// that it serves the milestones) and parses what each serves with the
// Prometheus parser: every family typed, with metrics.md's HELP and type;
// every histogram metrics.md lists for that binary's families, and every
// Go runtime family, served, histograms with buckets, _sum and _count.
func TestEveryBinaryExposition(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries (not with -short)")
	}
	bin := t.TempDir()
	e2etest.Build(t, bin, "./engine/cmd/autoconnect", "./apitier/cmd/autoendpoint", "./sender/cmd/autosender", "./stack/cmd/autopush")
	const key = "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4="
	for _, b := range []struct {
		name, startMsg, addrField string
		args                      []string
		prefixes                  []string // whose documented histograms it serves
	}{
		{"autoconnect", "autoconnect started", "node_api", []string{"-listen=127.0.0.1:0", "-router-listen=127.0.0.1:0",
			"-crypto-key=" + key, "-node-secret=s", "-endpoint-url=http://127.0.0.1:9"}, []string{"autoconnect_"}},
		{"autoendpoint", "autoendpoint started", "metrics", []string{"-listen=127.0.0.1:0", "-metrics-listen=127.0.0.1:0",
			"-crypto-key=" + key, "-node-secret=s", "-request-log=false"}, []string{"autoendpoint_", "autosender_"}},
		{"autosender", "autosender started", "listen", []string{"-listen=127.0.0.1:0", "-sender-node=n1"}, []string{"autosender_"}},
		{"autopush", single.ReadyMsg, "metrics", []string{"-connect-listen=127.0.0.1:0", "-router-listen=127.0.0.1:0",
			"-endpoint-listen=127.0.0.1:0", "-metrics-listen=127.0.0.1:0", "-endpoint-url=http://127.0.0.1:9",
			"-crypto-key=" + key, "-receipts=true"}, []string{"autoconnect_", "autoendpoint_", "autosender_", "autopush_"}},
	} {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append(b.args, "-data-dir="+filepath.Join(dir, "store"))
			if b.name != "autoconnect" {
				// A provider: without one a node builds no sender.
				args = append(args, "-log-provider-file="+filepath.Join(dir, "pushes.log"))
			}
			cmd := exec.Command(filepath.Join(bin, b.name), args...)
			p := e2etest.Start(t, cmd, b.startMsg)
			fams := parseExposition(t, b.name, scrape(t, "http://"+p.Field(b.addrField)+"/metrics"))
			checkExposition(t, b.name, fams)
			requireFamilies(t, b.name, fams, true, b.prefixes...)
			requireFamilies(t, b.name, fams, false, "go_")
		})
	}
}

// scrape GETs a /metrics page, which must say it is the text format.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("GET %s: Content-Type %q, want the text format's", url, ct)
	}
	return string(b)
}
