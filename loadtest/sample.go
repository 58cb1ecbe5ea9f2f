package loadtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
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

// procRSS is pid's resident set, bytes.
func procRSS(pid int) (int64, error) {
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

// sampleEngine reads an engine's /proc status and /metrics. A failed
// scrape leaves the runtime figures at -1.
func sampleEngine(pid int, metricsURL string) (EngineSample, error) {
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

// sumEngines adds the engines' samples; a runtime figure any engine lacks
// is -1 in the sum.
func sumEngines(es []EngineSample) EngineSample {
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

// slope is the least-squares slope of ys over xs; NaN when the xs are all
// equal.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / d
}

func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// userHZ is the kernel's clock tick for /proc CPU times (USER_HZ, 100 on
// Linux whatever the kernel's HZ).
const userHZ = 100

// procCPU is pid's user+system CPU time, seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces: fields start after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / userHZ
}

// machineCPU is the whole machine's busy and total CPU time, seconds.
func machineCPU() (busy, total float64) {
	line := fieldOf("/proc/stat", "cpu", ' ')
	for i, f := range strings.Fields(line) {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy / userHZ, total / userHZ
}

// CPU is where the machine's CPU went over a sample's interval, in percent
// of one CPU (200 is both cores of a 2-CPU machine). Machine counts
// everything, other tenants included; Storage is the CQL server when its
// PID is known ($CQL_PID, as tools/cql/start.sh prints it), else -1.
type CPU struct {
	Machine  float64 `json:"machine"`
	Engines  float64 `json:"engines"`
	Endpoint float64 `json:"endpoint"`
	Workers  float64 `json:"workers"`
	Storage  float64 `json:"storage"`
}

func (c CPU) storage() string {
	if c.Storage < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", c.Storage)
}

func (c CPU) String() string {
	return fmt.Sprintf("%.0f/%.0f/%.0f/%.0f/%s", c.Machine, c.Engines, c.Endpoint, c.Workers, c.storage())
}

// storagePID is the CQL server's PID from $CQL_PID, or 0.
func storagePID() int {
	pid, err := strconv.Atoi(os.Getenv("CQL_PID"))
	if err != nil || procCPU(pid) == 0 {
		return 0
	}
	return pid
}

// cpuMeter turns cumulative CPU times into interval percentages.
type cpuMeter struct {
	at                                        time.Time
	busy, engines, endpoint, workers, storage float64
}

func (m *cpuMeter) read(engines, endpoint, workers []int, storage int) CPU {
	now := time.Now()
	busy, _ := machineCPU()
	sum := func(pids []int) float64 {
		var t float64
		for _, p := range pids {
			t += procCPU(p)
		}
		return t
	}
	e, ep, w := sum(engines), sum(endpoint), sum(workers)
	var st float64
	if storage > 0 {
		st = procCPU(storage)
	}
	c := CPU{Storage: -1}
	if dt := now.Sub(m.at).Seconds(); !m.at.IsZero() && dt > 0 {
		pct := func(cur, prev float64) float64 { return math.Round(max(cur-prev, 0)/dt*1000) / 10 }
		c = CPU{Machine: pct(busy, m.busy), Engines: pct(e, m.engines), Endpoint: pct(ep, m.endpoint), Workers: pct(w, m.workers), Storage: -1}
		if storage > 0 {
			c.Storage = pct(st, m.storage)
		}
	}
	*m = cpuMeter{at: now, busy: busy, engines: e, endpoint: ep, workers: w, storage: st}
	return c
}
