package probe

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine is what a figure was measured on, and the kernel limits that
// bound it; the load average says how busy the (possibly shared) machine
// was.
type Machine struct {
	Host         string `json:"host"`
	CPU          string `json:"cpu"`
	CPUs         int    `json:"cpus"`
	MemTotal     int64  `json:"mem_total_bytes"`
	OS           string `json:"os"`
	Kernel       string `json:"kernel"`
	Go           string `json:"go"`
	FDLimit      uint64 `json:"fd_limit"` // per process, hard
	PortRange    string `json:"ip_local_port_range"`
	Somaxconn    string `json:"somaxconn"`
	FileMax      string `json:"file_max"`
	Conntrack    string `json:"conntrack,omitempty"` // count/max when the module is loaded
	NrOpen       string `json:"nr_open"`
	SynBacklog   string `json:"tcp_max_syn_backlog"`
	MaxMapCount  string `json:"max_map_count"`
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
}

// DescribeMachine reads what the machine is, and its load average now.
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.Host, _ = os.Hostname()
	m.CPU = fieldOf("/proc/cpuinfo", "model name", ':')
	if kb, err := strconv.ParseInt(strings.Fields(fieldOf("/proc/meminfo", "MemTotal", ':') + " 0")[0], 10, 64); err == nil {
		m.MemTotal = kb << 10
	}
	m.OS = strings.Trim(fieldOf("/etc/os-release", "PRETTY_NAME", '='), `"`)
	m.Kernel = readTrim("/proc/sys/kernel/osrelease")
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) == nil {
		m.FDLimit = l.Max
	}
	m.PortRange = strings.Join(strings.Fields(readTrim("/proc/sys/net/ipv4/ip_local_port_range")), "-")
	m.Somaxconn = readTrim("/proc/sys/net/core/somaxconn")
	m.FileMax = readTrim("/proc/sys/fs/file-max")
	m.NrOpen = readTrim("/proc/sys/fs/nr_open")
	m.SynBacklog = readTrim("/proc/sys/net/ipv4/tcp_max_syn_backlog")
	m.MaxMapCount = readTrim("/proc/sys/vm/max_map_count")
	if c, max := readTrim("/proc/sys/net/netfilter/nf_conntrack_count"), readTrim("/proc/sys/net/netfilter/nf_conntrack_max"); max != "" {
		m.Conntrack = c + "/" + max
	}
	m.LoadAvgStart = LoadAvg()
	return m
}

// LoadAvg is the 1, 5 and 15 minute load averages.
func LoadAvg() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// fieldOf is the value of the first "key<sep>value" line of a file.
func fieldOf(path, key string, sep byte) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), string(sep))
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Maps is how many memory mappings pid has (lines of /proc/<pid>/maps),
// which vm.max_map_count bounds per process.
func Maps(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return 0, err
	}
	return bytes.Count(b, []byte("\n")), nil
}
