package probe

import (
	"io/fs"
	"os"
	"testing"
)

// fixture is a /proc reader over fixed files; a path it lacks does not
// exist.
func fixture(files map[string]string) ReadFunc {
	return func(path string) ([]byte, error) {
		if s, ok := files[path]; ok {
			return []byte(s), nil
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
}

// kernelFiles are a machine's /proc files as this kernel (6.18) writes them.
var kernelFiles = map[string]string{
	"/proc/meminfo": "MemTotal:       24684084 kB\nMemFree:        19568912 kB\nMemAvailable:   22615076 kB\n" +
		"Buffers:           43948 kB\nCached:          2891896 kB\nSlab:             647036 kB\nSReclaimable:     589728 kB\n" +
		"SUnreclaim:        57308 kB\nKernelStack:        3808 kB\nPageTables:         6000 kB\nPercpu:              808 kB\n" +
		"HugePages_Total:       0\n",
	"/proc/net/sockstat":                         "sockets: used 123\nTCP: inuse 107 orphan 1 tw 178 alloc 107 mem 52\nUDP: inuse 0 mem 0\n",
	"/proc/sys/net/netfilter/nf_conntrack_count": "0\n",
	"/proc/slabinfo": "slabinfo - version: 2.1\n" +
		"# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>\n" +
		"TCP                  118    169   2368   13    8 : tunables    0    0    0 : slabdata     13     13      0\n" +
		"filp                1264   1428    192   21    1 : tunables    0    0    0 : slabdata     68     68      0\n",
}

// TestReadKernel: /proc/meminfo in bytes, sockstat's TCP counts and
// pages, conntrack and the slab caches; what a kernel lacks is marked.
func TestReadKernel(t *testing.T) {
	k, err := ReadKernel(fixture(kernelFiles))
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	if k.MemTotal != 24684084<<10 || k.Slab != 647036<<10 || k.SReclaimable != 589728<<10 || k.SUnreclaim != 57308<<10 ||
		k.KernelStack != 3808<<10 || k.PageTables != 6000<<10 || k.Percpu != 808<<10 || k.TCPInuse != 107 || k.TCPOrphan != 1 ||
		k.TCPTimeWait != 178 || k.TCPMem != 52*page || k.Sockets != 123 || k.Conntrack != 0 {
		t.Errorf("read %+v", k)
	}
	if k.Total() != (647036+3808+6000)<<10+52*page || k.Used() != (24684084-19568912-43948-2891896)<<10 {
		t.Errorf("total %d, used %d", k.Total(), k.Used())
	}
	if len(k.Slabs) != 2 || k.Slabs["TCP"] != (SlabCache{118, 2368}) || k.Slabs["filp"] != (SlabCache{1264, 192}) {
		t.Errorf("slabs %+v", k.Slabs)
	}
	// Not root (no slabinfo), no conntrack module.
	files := map[string]string{"/proc/meminfo": kernelFiles["/proc/meminfo"], "/proc/net/sockstat": kernelFiles["/proc/net/sockstat"]}
	if k, err := ReadKernel(fixture(files)); err != nil || k.Slabs != nil || k.Conntrack != -1 || k.Slab == 0 {
		t.Errorf("without slabinfo and conntrack: %+v, %v", k, err)
	}
	delete(files, "/proc/net/sockstat")
	if _, err := ReadKernel(fixture(files)); err == nil {
		t.Error("no sockstat, no error")
	}
	if _, err := ReadKernel(nil); err != nil {
		t.Errorf("this machine: %v", err)
	}
}
