package probe

import (
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	in := "# HELP x\ngo_goroutines 85\nautoconnect_connections 19000\n" +
		`autoconnect_direct_total{result="busy"} 3` + "\ngo_memstats_heap_inuse_bytes 1.2345e+07\n"
	m, err := parseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if m["go_goroutines"] != 85 || m["autoconnect_connections"] != 19000 || m[`autoconnect_direct_total{result="busy"}`] != 3 ||
		m["go_memstats_heap_inuse_bytes"] != 12345000 {
		t.Errorf("%v", m)
	}
}

func TestSumEngines(t *testing.T) {
	a := EngineSample{procMem: procMem{RSS: 10, Anon: 5}, Goroutines: 80, HeapInuse: 7, Connections: 3, Clients: 2}
	b := a
	s := SumEngines([]EngineSample{a, b})
	if s.RSS != 20 || s.Goroutines != 160 || s.Connections != 6 || s.HeapInuse != 14 {
		t.Errorf("sum %+v", s)
	}
	b.Goroutines = -1 // a failed scrape
	if s := SumEngines([]EngineSample{a, b}); s.Goroutines != -1 || s.Connections != 6 {
		t.Errorf("sum with a gap %+v", s)
	}
}
