package probe

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

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
	a.HeapLive, a.GCs, a.HeapObjects = 2<<20, 4, 100
	b = a
	b.HeapResident = -1
	if s := SumEngines([]EngineSample{a, b}); s.HeapLive != 4<<20 || s.GCs != 8 || s.HeapObjects != 200 || s.HeapResident != -1 {
		t.Errorf("sum of the breakdown %+v", s)
	}
}

// TestSampleEngine: the runtime's figures come from /metrics, the live
// heap from the traced collections, and a figure /metrics lacks stays -1.
func TestSampleEngine(t *testing.T) {
	page := "go_goroutines 85\ngo_memstats_heap_inuse_bytes 3.5e+06\ngo_memstats_heap_idle_bytes 2e+06\n" +
		"go_memstats_heap_released_bytes 1e+06\ngo_memstats_heap_objects 8532\ngo_memstats_stack_inuse_bytes 1.146880e+06\n" +
		"go_gc_duration_seconds_count 4\nautoconnect_connections 3\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, page) }))
	defer srv.Close()
	var gc GCTrace
	gc.Line([]byte("gc 4 @0.5s 1%: 0.01+1+0.01 ms clock, 0.02+0/1/0+0.02 ms cpu, 5->6->2 MB, 7 MB goal, 0 MB stacks, 0 MB globals, 2 P"))
	s, err := SampleEngine(os.Getpid(), srv.URL, &gc)
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS <= 0 || s.Anon <= 0 || s.File() != s.RSS-s.Anon || s.Goroutines != 85 || s.HeapInuse != 3_500_000 || s.HeapResident != 4_500_000 ||
		s.HeapObjects != 8532 || s.StackInuse != 1_146_880 || s.GCs != 4 || s.HeapLive != 2<<20 || s.Connections != 3 || s.Clients != -1 {
		t.Errorf("sample %+v", s)
	}
	if s.OtherAnon() != s.Anon-s.HeapResident-s.StackInuse {
		t.Errorf("other anon %d", s.OtherAnon())
	}
	s, _ = SampleEngine(os.Getpid(), "http://127.0.0.1:1/metrics", nil) // no /metrics, not traced
	if s.RSS <= 0 || s.Goroutines != -1 || s.HeapResident != -1 || s.HeapLive != -1 || s.GCs != -1 || s.OtherAnon() != -1 {
		t.Errorf("unreadable metrics %+v", s)
	}
}

// TestGCTrace: the live heap is that of the last collection the runtime
// traced; other lines of the process (its logs) are not counted.
func TestGCTrace(t *testing.T) {
	var g GCTrace
	if g.HeapLive() != -1 || (*GCTrace)(nil).HeapLive() != -1 {
		t.Fatal("a live heap before any collection")
	}
	for _, l := range []string{
		"gc 3 @0.5s 1%: 0.01+1+0.01 ms clock, 0.02+0/1/0+0.02 ms cpu, 12->13->7 MB, 14 MB goal, 0 MB stacks, 0 MB globals, 2 P",
		`{"Fields":{"msg":"autoconnect started"}}`,
		"autoconnect: some error",
		"gc sweep done",
	} {
		g.Line([]byte(l))
	}
	if g.HeapLive() != 7<<20 {
		t.Errorf("heap live %d; want 7 MiB", g.HeapLive())
	}
}
