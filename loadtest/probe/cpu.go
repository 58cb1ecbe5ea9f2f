package probe

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

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

// CPUSeconds is the user+system CPU time of the processes pids,
// seconds (a process already gone counts 0).
func CPUSeconds(pids []int) float64 {
	var t float64
	for _, p := range pids {
		t += procCPU(p)
	}
	return t
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

// StorageText is Storage for a table: "-" when unknown.
func (c CPU) StorageText() string {
	if c.Storage < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", c.Storage)
}

func (c CPU) String() string {
	return fmt.Sprintf("%.0f/%.0f/%.0f/%.0f/%s", c.Machine, c.Engines, c.Endpoint, c.Workers, c.StorageText())
}

// StoragePID is the CQL server's PID from $CQL_PID, or 0.
func StoragePID() int {
	pid, err := strconv.Atoi(os.Getenv("CQL_PID"))
	if err != nil || procCPU(pid) == 0 {
		return 0
	}
	return pid
}

// CPUMeter turns cumulative CPU times into interval percentages. The zero
// value is ready; its first reading has no interval (all -1 but Machine 0).
type CPUMeter struct {
	at                                        time.Time
	busy, engines, endpoint, workers, storage float64
}

// Read is where the CPU went, by process kind, since the last Read.
func (m *CPUMeter) Read(engines, endpoint, workers []int, storage int) CPU {
	now := time.Now()
	busy, _ := machineCPU()
	e, ep, w := CPUSeconds(engines), CPUSeconds(endpoint), CPUSeconds(workers)
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
	*m = CPUMeter{at: now, busy: busy, engines: e, endpoint: ep, workers: w, storage: st}
	return c
}
