package ops_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/autopush-go/autopush/internal/exposition"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// alertRules is the part of alerts.yml the checks read.
type alertRules struct {
	Groups []struct {
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestAlertRules runs Prometheus' promtool on the alert rules: they
// load (check rules), prometheus.yml loads them (check config), and each
// alert fires for the series of its unit test and not for the others
// (test rules, ops/prometheus/alerts_test.yml). promtool is Debian's
// prometheus package; make test installs it.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	e2etest.Require(t, err == nil, "promtool not found: apt-get install --no-install-recommends prometheus "+
		"(Debian's; tools/test.sh installs it without starting the service)")
	dir := filepath.Join(root, "ops", "prometheus")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"check", "config", "prometheus.yml"},
		{"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// TestAlertQueries checks every alert's expression as TestDashboard
// checks the dashboard's queries: each metric it selects is documented
// in docs/metrics.md and served by running nodes, and each label it
// matches on is one those series have (the values may be ones that only
// trouble brings, such as errno="201").
func TestAlertQueries(t *testing.T) {
	var rules alertRules
	if err := yaml.Unmarshal(read(t, "ops/prometheus/alerts.yml"), &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	byJob := servedByJob(t)
	doc := exposition.Documented()
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			refs, err := parsePromQL(r.Expr)
			if err != nil || len(refs.selectors) == 0 {
				t.Errorf("%s: %q: %v, %d metrics", r.Alert, r.Expr, err, len(refs.selectors))
				continue
			}
			for _, sel := range refs.selectors {
				family := sel.name
				if _, ok := doc[family]; !ok {
					family = trimHistogramSuffix(family)
				}
				if _, ok := doc[family]; !ok {
					t.Errorf("%s: %s is not in docs/metrics.md", r.Alert, sel.name)
				}
				found := matching(t, byJob, selector{name: sel.name})
				if len(found) == 0 {
					t.Errorf("%s: no running node serves %s", r.Alert, sel.name)
				}
				labels := map[string]bool{"job": true, "instance": true}
				for _, s := range found {
					for l := range s.Labels {
						labels[l] = true
					}
				}
				for _, m := range sel.matchers {
					if !labels[m.label] {
						t.Errorf("%s: %s has no label %q", r.Alert, sel.name, m.label)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("alerts.yml has no rule")
	}
}

// trimHistogramSuffix is a histogram family's name from one of its
// series' (_bucket, _sum, _count).
func trimHistogramSuffix(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if len(name) > len(s) && name[len(name)-len(s):] == s {
			return name[:len(name)-len(s)]
		}
	}
	return name
}
