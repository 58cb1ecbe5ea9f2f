package promtext

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	in := `# HELP x_total things
# TYPE x_total counter
x_total 3
errors_total{kind="storage",note="a \"quoted\"\nline"} 1.5
lat_bucket{le="+Inf"} 7 1700000000000

go_goroutines 85
`
	m, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if m["x_total"] != 3 || m[`lat_bucket{le="+Inf"}`] != 7 || len(m) != 4 {
		t.Fatalf("parsed %v", m)
	}
	all, _ := ParseAll(strings.NewReader(in))
	if s := all[1]; s.Name != "errors_total" || s.Labels["kind"] != "storage" || s.Labels["note"] != "a \"quoted\"\nline" || s.Value != 1.5 {
		t.Fatalf("labels %+v", s)
	}
	for _, bad := range []string{"x_total", "x_total abc", `x{kind="open 1`, "{} 1", "x 1 2 3"} {
		if _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
