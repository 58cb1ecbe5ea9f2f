package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ReadFunc reads a file under /proc (os.ReadFile, or a test's fixture).
type ReadFunc func(path string) ([]byte, error)

// Kernel is the machine's kernel memory at one instant: /proc/meminfo,
// /proc/net/sockstat, the conntrack count and, where readable (root),
// /proc/slabinfo. These are the whole machine's, not one process's: on a
// shared machine other work moves them too, which is why hold fits a
// slope over several steps.
type Kernel struct {
	// From /proc/meminfo, bytes.
	MemTotal     int64 `json:"mem_total_bytes"`
	MemFree      int64 `json:"mem_free_bytes"`
	MemAvailable int64 `json:"mem_available_bytes"`
	Buffers      int64 `json:"buffers_bytes"`
	Cached       int64 `json:"cached_bytes"`
	Slab         int64 `json:"slab_bytes"` // SReclaimable + SUnreclaim, whole slab pages
	SReclaimable int64 `json:"sreclaimable_bytes"`
	SUnreclaim   int64 `json:"sunreclaim_bytes"`
	KernelStack  int64 `json:"kernel_stack_bytes"`
	PageTables   int64 `json:"page_tables_bytes"`
	Percpu       int64 `json:"percpu_bytes"`
	// From /proc/net/sockstat: TCP sockets in use (each end of a
	// loopback connection is one), orphaned, in TIME_WAIT, and the pages
	// the TCP stack has charged to socket buffers (as bytes).
	TCPInuse    int64 `json:"tcp_inuse"`
	TCPOrphan   int64 `json:"tcp_orphan"`
	TCPTimeWait int64 `json:"tcp_tw"`
	TCPMem      int64 `json:"tcp_mem_bytes"`
	Sockets     int64 `json:"sockets_used"`
	// Conntrack is nf_conntrack_count; -1 when the module is not loaded.
	Conntrack int64 `json:"conntrack"`
	// Slabs are /proc/slabinfo's caches; nil when it cannot be read (it is
	// root's only).
	Slabs map[string]SlabCache `json:"slabs,omitempty"`
}

// SlabCache is one slab cache: objects in use and their size.
type SlabCache struct {
	Objects int64 `json:"objects"`
	Size    int64 `json:"size"`
}

// Total is the kernel memory that moves with connections: slab, kernel
// stacks, page tables and the TCP socket buffers' pages.
func (k Kernel) Total() int64 { return k.Slab + k.KernelStack + k.PageTables + k.TCPMem }

// Used is the machine's memory in use, by processes and the kernel
// (MemTotal - MemFree - Buffers - Cached).
func (k Kernel) Used() int64 { return k.MemTotal - k.MemFree - k.Buffers - k.Cached }

// ReadKernel reads the kernel's memory with read (os.ReadFile when nil).
func ReadKernel(read ReadFunc) (Kernel, error) {
	if read == nil {
		read = os.ReadFile
	}
	k := Kernel{Conntrack: -1}
	b, err := read("/proc/meminfo")
	if err != nil {
		return k, fmt.Errorf("loadtest: %w", err)
	}
	mi := parseMeminfo(b)
	for name, dst := range map[string]*int64{"MemTotal": &k.MemTotal, "MemFree": &k.MemFree, "MemAvailable": &k.MemAvailable,
		"Buffers": &k.Buffers, "Cached": &k.Cached, "Slab": &k.Slab, "SReclaimable": &k.SReclaimable, "SUnreclaim": &k.SUnreclaim,
		"KernelStack": &k.KernelStack, "PageTables": &k.PageTables, "Percpu": &k.Percpu} {
		v, ok := mi[name]
		if !ok && name != "Percpu" { // Percpu is newer than the rest
			return k, fmt.Errorf("loadtest: /proc/meminfo has no %s", name)
		}
		*dst = v
	}
	if b, err = read("/proc/net/sockstat"); err != nil {
		return k, fmt.Errorf("loadtest: %w", err)
	}
	ss := parseSockstat(b)
	k.TCPInuse, k.TCPOrphan, k.TCPTimeWait = ss["TCP inuse"], ss["TCP orphan"], ss["TCP tw"]
	k.TCPMem, k.Sockets = ss["TCP mem"]*int64(os.Getpagesize()), ss["sockets used"]
	if b, err := read("/proc/sys/net/netfilter/nf_conntrack_count"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			k.Conntrack = n
		}
	}
	if b, err := read("/proc/slabinfo"); err == nil {
		k.Slabs = parseSlabinfo(b)
	}
	return k, nil
}

// parseMeminfo reads "Name:   123 kB" lines, as bytes.
func parseMeminfo(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		f := strings.Fields(rest)
		if !ok || len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			n <<= 10
		}
		out[name] = n
	}
	return out
}

// parseSockstat reads "TCP: inuse 107 orphan 0 tw 178 alloc 107 mem 52"
// lines into "TCP inuse" = 107 and so on.
func parseSockstat(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		proto, rest, ok := strings.Cut(sc.Text(), ":")
		f := strings.Fields(rest)
		for i := 0; ok && i+1 < len(f); i += 2 {
			if n, err := strconv.ParseInt(f[i+1], 10, 64); err == nil {
				out[proto+" "+f[i]] = n
			}
		}
	}
	return out
}

// parseSlabinfo reads /proc/slabinfo (version 2.1): name, active
// objects, all objects, object size, ...
func parseSlabinfo(b []byte) map[string]SlabCache {
	out := map[string]SlabCache{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || strings.HasPrefix(f[0], "#") || f[0] == "slabinfo" {
			continue
		}
		objs, err1 := strconv.ParseInt(f[1], 10, 64)
		size, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 == nil && err2 == nil {
			out[f[0]] = SlabCache{Objects: objs, Size: size}
		}
	}
	return out
}
