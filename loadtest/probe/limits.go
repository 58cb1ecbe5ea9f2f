package probe

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Limits are the kernel settings that bound how many connections a run
// can open on this machine (docs/capacity.md, "Kernel settings"). The
// load tester reads them and says what to raise; it never changes one.
type Limits struct {
	FileMax   int64 // fs.file-max: open files, machine-wide
	FilesOpen int64 // allocated now (fs.file-nr's first field)
	NrOpen    int64 // fs.nr_open: the most a process's limit may be raised to
	// NoFileHard is this process's hard RLIMIT_NOFILE (/proc/self/limits),
	// which the engines and workers it starts inherit; -1: unlimited.
	NoFileHard        int64
	PortLow, PortHigh int64 // net.ipv4.ip_local_port_range
	Somaxconn         int64 // net.core.somaxconn: the engines' listen backlog
	SynBacklog        int64 // net.ipv4.tcp_max_syn_backlog
	// ConntrackCount and ConntrackMax are nf_conntrack's; -1 when the
	// module is not loaded.
	ConntrackCount, ConntrackMax int64
	MaxMapCount                  int64 // vm.max_map_count, per process
}

// ReadLimits reads the limits with read (os.ReadFile when nil).
func ReadLimits(read ReadFunc) (Limits, error) {
	if read == nil {
		read = os.ReadFile
	}
	var l Limits
	var errs []error
	num := func(path string, field int) int64 {
		b, err := read(path)
		if err != nil {
			errs = append(errs, err)
			return 0
		}
		f := strings.Fields(string(b))
		if len(f) <= field {
			errs = append(errs, fmt.Errorf("%s: %q has no field %d", path, b, field))
			return 0
		}
		n, err := strconv.ParseInt(f[field], 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
		return n
	}
	l.FileMax = num("/proc/sys/fs/file-max", 0)
	l.FilesOpen = num("/proc/sys/fs/file-nr", 0)
	l.NrOpen = num("/proc/sys/fs/nr_open", 0)
	l.PortLow = num("/proc/sys/net/ipv4/ip_local_port_range", 0)
	l.PortHigh = num("/proc/sys/net/ipv4/ip_local_port_range", 1)
	l.Somaxconn = num("/proc/sys/net/core/somaxconn", 0)
	l.SynBacklog = num("/proc/sys/net/ipv4/tcp_max_syn_backlog", 0)
	l.MaxMapCount = num("/proc/sys/vm/max_map_count", 0)
	l.ConntrackCount, l.ConntrackMax = -1, -1
	if _, err := read("/proc/sys/net/netfilter/nf_conntrack_max"); err == nil {
		l.ConntrackCount = num("/proc/sys/net/netfilter/nf_conntrack_count", 0)
		l.ConntrackMax = num("/proc/sys/net/netfilter/nf_conntrack_max", 0)
	}
	l.NoFileHard = noFileHard(read, &errs)
	if err := errors.Join(errs...); err != nil {
		return l, fmt.Errorf("loadtest: kernel limits: %w", err)
	}
	return l, nil
}

// noFileHard reads the hard open-files limit from /proc/self/limits
// ("Max open files  20000  20000  files").
func noFileHard(read ReadFunc, errs *[]error) int64 {
	b, err := read("/proc/self/limits")
	if err != nil {
		*errs = append(*errs, err)
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Max open files")
		f := strings.Fields(rest)
		if !ok || len(f) < 2 {
			continue
		}
		if f[1] == "unlimited" {
			return -1
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("/proc/self/limits: %w", err))
		}
		return n
	}
	*errs = append(*errs, errors.New("/proc/self/limits: no Max open files line"))
	return 0
}

// Needs is what a run opens at once.
type Needs struct {
	// Files is every file the run's processes open at once: two sockets
	// per connection (both ends are on this machine) and each process's
	// own.
	Files int64
	// PerProcess is the most files one engine or worker opens.
	PerProcess int64
	// PerPortPair is the most connections sharing one source address and
	// one engine address: each needs its own ephemeral port there.
	PerPortPair int64
	// Pending is the most handshakes in progress at once: a burst one
	// engine's listen backlog and SYN queue may have to take.
	Pending int64
	// Conns is the connections held at once (one conntrack entry each,
	// when conntrack tracks them).
	Conns int64
}

// Check says, for every limit the run needs more of, which sysctl it is,
// what it is, what the run needs and the command that raises it; nil
// when the machine can hold the run.
func (l Limits) Check(n Needs) error {
	var errs []error
	short := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if l.FilesOpen+n.Files > l.FileMax {
		need := l.FilesOpen + n.Files
		short("fs.file-max is %d, with %d files open now this run needs %d more (two sockets a connection and each process's own): "+
			"sysctl -w fs.file-max=%d", l.FileMax, l.FilesOpen, n.Files, roundUp(need+need/10))
	}
	if n.PerProcess > l.NrOpen {
		short("fs.nr_open is %d, an engine or worker here needs %d open files: sysctl -w fs.nr_open=%d", l.NrOpen, n.PerProcess,
			roundUp(n.PerProcess))
	}
	if l.NoFileHard >= 0 && n.PerProcess > l.NoFileHard {
		short("the hard open-files limit (ulimit -Hn) is %d, an engine or worker here needs %d: use more processes "+
			"(-per-engine, -per-worker), or raise it where the load tester starts (ulimit -Hn %d as root; LimitNOFILE= for a service)",
			l.NoFileHard, n.PerProcess, n.PerProcess)
	}
	if ports := l.PortHigh - l.PortLow + 1; n.PerPortPair > ports {
		short("net.ipv4.ip_local_port_range %d-%d gives %d ephemeral ports per source address and engine, this run puts %d "+
			"connections on one pair: more -source-ips, or sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"",
			l.PortLow, l.PortHigh, ports, n.PerPortPair)
	}
	if n.Pending > l.Somaxconn {
		short("net.core.somaxconn is %d (the engines' listen backlog), this run has up to %d handshakes in progress: "+
			"lower -max-pending, or sysctl -w net.core.somaxconn=%d", l.Somaxconn, n.Pending, roundUp(n.Pending))
	}
	if n.Pending > l.SynBacklog {
		short("net.ipv4.tcp_max_syn_backlog is %d, this run has up to %d handshakes in progress: "+
			"lower -max-pending, or sysctl -w net.ipv4.tcp_max_syn_backlog=%d", l.SynBacklog, n.Pending, roundUp(n.Pending))
	}
	// Conntrack counts nothing here unless a rule needs it; once it
	// counts, every loopback connection takes an entry until it closes.
	if l.ConntrackCount > 0 && l.ConntrackCount+n.Conns > l.ConntrackMax {
		need := l.ConntrackCount + n.Conns
		short("net.netfilter.nf_conntrack_max is %d and conntrack tracks %d connections now, this run adds %d: "+
			"sysctl -w net.netfilter.nf_conntrack_max=%d", l.ConntrackMax, l.ConntrackCount, n.Conns, roundUp(need+need/10))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("loadtest: this machine cannot hold the run (the load tester changes no setting itself; "+
			"docs/capacity.md, \"Kernel settings\"):\n%w", err)
	}
	return nil
}

// roundUp rounds a suggested setting up to two significant digits.
func roundUp(n int64) int64 {
	p := int64(1)
	for n/p >= 100 {
		p *= 10
	}
	return (n + p - 1) / p * p
}
