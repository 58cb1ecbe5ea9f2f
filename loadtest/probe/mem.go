package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
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

// scrapeMetrics reads a Prometheus text page into name{labels} -> value.
func scrapeMetrics(url string) (map[string]float64, error) {
	resp, err := metricsClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("loadtest: %s: HTTP %d", url, resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// EngineSample is one engine process at one instant.
type EngineSample struct {
	procMem
	Goroutines  int   `json:"goroutines"`
	HeapInuse   int64 `json:"heap_inuse_bytes"`
	Connections int   `json:"connections"` // sockets open on the engine
	Clients     int   `json:"clients"`     // registered (after hello)
}

// SampleEngine reads an engine's /proc status and /metrics. A failed
// scrape leaves the runtime figures at -1.
func SampleEngine(pid int, metricsURL string) (EngineSample, error) {
	var s EngineSample
	var err error
	if s.procMem, err = readProcStatus(pid); err != nil {
		return s, err
	}
	s.Goroutines, s.HeapInuse, s.Connections, s.Clients = -1, -1, -1, -1
	m, err := scrapeMetrics(metricsURL)
	if err != nil {
		return s, nil
	}
	if v, ok := m["go_goroutines"]; ok {
		s.Goroutines = int(v)
	}
	if v, ok := m["go_memstats_heap_inuse_bytes"]; ok {
		s.HeapInuse = int64(v)
	}
	if v, ok := m["autoconnect_connections"]; ok {
		s.Connections = int(v)
	}
	if v, ok := m["autoconnect_clients"]; ok {
		s.Clients = int(v)
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
		for _, p := range [...]struct{ dst, src *int }{{&t.Goroutines, &e.Goroutines}, {&t.Connections, &e.Connections}, {&t.Clients, &e.Clients}} {
			if *p.src < 0 || (i > 0 && *p.dst < 0) {
				*p.dst = -1
			} else {
				*p.dst += *p.src
			}
		}
		if e.HeapInuse < 0 || (i > 0 && t.HeapInuse < 0) {
			t.HeapInuse = -1
		} else {
			t.HeapInuse += e.HeapInuse
		}
	}
	return t
}
