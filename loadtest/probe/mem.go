package probe

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/autopush-go/autopush/internal/promtext"
)

// Memory is read from outside the measured processes: /proc/<pid>/status
// for RSS (RssAnon is the user-space heap and other private memory; the
// rest is file-backed, mostly the binary), the engine's /metrics for the
// Go runtime's view (goroutines, heap in use) and its connection count.

// procMem is one process's memory.
type procMem struct {
	RSS     int64 `json:"rss_bytes"`
	Anon    int64 `json:"anon_bytes"`
	Threads int   `json:"threads"`
}

// readProcStatus reads VmRSS, RssAnon and Threads of pid.
func readProcStatus(pid int) (procMem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMem{}, fmt.Errorf("loadtest: read /proc/%d/status: %w", pid, err)
	}
	var m procMem
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch name {
		case "VmRSS":
			m.RSS = n << 10
		case "RssAnon":
			m.Anon = n << 10
		case "Threads":
			m.Threads = int(n)
		}
	}
	return m, nil
}

// ProcRSS is pid's resident set, bytes.
func ProcRSS(pid int) (int64, error) {
	m, err := readProcStatus(pid)
	return m.RSS, err
}

// metricsClient reads the nodes' /metrics; short timeouts, so a stuck node
// shows as a gap, not a stalled sampler.
var metricsClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}

// EngineSample is one engine process at one instant. Figures from the
// engine's /metrics (the Go runtime's own view) and its gctrace are -1
// when they could not be read.
type EngineSample struct {
	procMem
	Goroutines  int   `json:"goroutines"`
	HeapInuse   int64 `json:"heap_inuse_bytes"` // spans in use: live objects and garbage not yet collected
	Connections int   `json:"connections"`      // sockets open on the engine
	Clients     int   `json:"clients"`          // registered (after hello)
	// HeapResident is heap in use + idle - released: the Go heap's share
	// of RSS.
	HeapResident int64 `json:"heap_resident_bytes"`
	HeapObjects  int64 `json:"heap_objects"`      // allocated objects
	StackInuse   int64 `json:"stack_inuse_bytes"` // goroutine stacks
	GCs          int   `json:"gcs"`               // collections so far
	Pings        int   `json:"pings"`             // websocket keepalive pings sent so far
	// HeapLive is what the last collection marked live (whole MB, from
	// the runtime's gctrace, which only hold turns on).
	HeapLive int64 `json:"heap_live_bytes"`
}

// File is the file-backed part of RSS (mostly the binary).
func (s EngineSample) File() int64 { return s.RSS - s.Anon }

// OtherAnon is anonymous RSS that is neither Go heap nor stacks: memory
// allocated outside the Go heap (Pebble's memtables and block cache, with
// the embedded store) and runtime metadata; -1 when unknown. Approximate:
// /proc and /metrics are not read at the same instant.
func (s EngineSample) OtherAnon() int64 {
	if s.HeapResident < 0 || s.StackInuse < 0 {
		return -1
	}
	return s.Anon - s.HeapResident - s.StackInuse
}

// SampleEngine reads an engine's /proc status, its /metrics and, when it
// is traced (gc not nil), its last collection. A failed scrape leaves the
// runtime figures at -1.
func SampleEngine(pid int, metricsURL string, gc *GCTrace) (EngineSample, error) {
	var s EngineSample
	var err error
	if s.procMem, err = readProcStatus(pid); err != nil {
		return s, err
	}
	s.Goroutines, s.HeapInuse, s.Connections, s.Clients = -1, -1, -1, -1
	s.HeapResident, s.HeapObjects, s.StackInuse, s.GCs, s.Pings = -1, -1, -1, -1, -1
	s.HeapLive = gc.HeapLive()
	m, err := promtext.Scrape(context.Background(), metricsClient, metricsURL)
	if err != nil {
		return s, nil
	}
	for _, f := range [...]struct {
		name string
		dst  *int64
	}{{"go_memstats_heap_inuse_bytes", &s.HeapInuse}, {"go_memstats_heap_objects", &s.HeapObjects},
		{"go_memstats_stack_inuse_bytes", &s.StackInuse}} {
		if v, ok := m[f.name]; ok {
			*f.dst = int64(v)
		}
	}
	for _, f := range [...]struct {
		name string
		dst  *int
	}{{"go_goroutines", &s.Goroutines}, {"autoconnect_connections", &s.Connections}, {"autoconnect_clients", &s.Clients},
		{"go_gc_duration_seconds_count", &s.GCs}, {"autoconnect_pings_sent_total", &s.Pings}} {
		if v, ok := m[f.name]; ok {
			*f.dst = int(v)
		}
	}
	idle, ok1 := m["go_memstats_heap_idle_bytes"]
	released, ok2 := m["go_memstats_heap_released_bytes"]
	if ok1 && ok2 && s.HeapInuse >= 0 {
		s.HeapResident = s.HeapInuse + int64(idle-released)
	}
	return s, nil
}

// SumEngines adds the engines' samples; a runtime figure any engine lacks
// is -1 in the sum.
func SumEngines(es []EngineSample) EngineSample {
	var t EngineSample
	for i, e := range es {
		t.RSS += e.RSS
		t.Anon += e.Anon
		t.Threads += e.Threads
		for _, p := range [...]struct{ dst, src *int }{{&t.Goroutines, &e.Goroutines}, {&t.Connections, &e.Connections},
			{&t.Clients, &e.Clients}, {&t.GCs, &e.GCs}, {&t.Pings, &e.Pings}} {
			addKnown(p.dst, *p.src, i == 0)
		}
		for _, p := range [...]struct{ dst, src *int64 }{{&t.HeapInuse, &e.HeapInuse}, {&t.HeapResident, &e.HeapResident},
			{&t.HeapObjects, &e.HeapObjects}, {&t.StackInuse, &e.StackInuse}, {&t.HeapLive, &e.HeapLive}} {
			addKnown(p.dst, *p.src, i == 0)
		}
	}
	return t
}

// addKnown adds v to *sum, which becomes -1 (unknown) for good once any
// term is.
func addKnown[T int | int64](sum *T, v T, first bool) {
	if v < 0 || (!first && *sum < 0) {
		*sum = -1
	} else {
		*sum += v
	}
}

// GCTrace follows the lines a Go process prints with GODEBUG=gctrace=1
// (on its stderr: give Line to proc.Config.Watch) for the heap the last
// collection marked live, which /metrics does not export. Goroutine-safe;
// a nil *GCTrace knows nothing.
type GCTrace struct {
	mu   sync.Mutex
	live int64 // bytes, once seen
	seen bool
}

// gcLine is a gctrace line: "gc 3 @0.5s 1%: ..., 12->13->7 MB, ..." (heap
// at the start -> at the end -> marked live).
var gcLine = regexp.MustCompile(`^gc (\d+) @.* (\d+)->(\d+)->(\d+) MB`)

// Line reads one line of the process's output; others than gctrace's are
// ignored.
func (g *GCTrace) Line(line []byte) {
	if !bytes.HasPrefix(line, []byte("gc ")) {
		return
	}
	m := gcLine.FindSubmatch(line)
	if m == nil {
		return
	}
	live, _ := strconv.ParseInt(string(m[4]), 10, 64)
	g.mu.Lock()
	g.live, g.seen = live<<20, true
	g.mu.Unlock()
}

// HeapLive is the live heap after the last collection, bytes (whole MB);
// -1 before the first, or when g is nil.
func (g *GCTrace) HeapLive() int64 {
	if g == nil {
		return -1
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.seen {
		return -1
	}
	return g.live
}
