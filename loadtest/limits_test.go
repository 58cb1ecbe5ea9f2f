package loadtest

import (
	"context"
	"io"
	"io/fs"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/loadtest/scenario"
)

// machineFiles are this project's machine's kernel settings (2026-11-27):
// enough for a million user agents on 56 engines and 56 workers.
var machineFiles = map[string]string{
	"/proc/sys/fs/file-max":                      "2466170\n",
	"/proc/sys/fs/file-nr":                       "1649\t0\t2466170\n",
	"/proc/sys/fs/nr_open":                       "1048576\n",
	"/proc/sys/net/ipv4/ip_local_port_range":     "32768\t60999\n",
	"/proc/sys/net/core/somaxconn":               "4096\n",
	"/proc/sys/net/ipv4/tcp_max_syn_backlog":     "2048\n",
	"/proc/sys/vm/max_map_count":                 "65530\n",
	"/proc/sys/net/netfilter/nf_conntrack_count": "0\n",
	"/proc/sys/net/netfilter/nf_conntrack_max":   "262144\n",
	"/proc/self/limits": "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max processes             unlimited            unlimited            processes \n" +
		"Max open files            20000                20000                files     \n",
}

func procReader(files map[string]string) func(string) ([]byte, error) {
	return func(path string) ([]byte, error) {
		if s, ok := files[path]; ok {
			return []byte(s), nil
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
}

// millionHold is make million's run: the Makefile's MILLION_FLAGS.
func millionHold(t *testing.T) scenario.Config {
	t.Helper()
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	_, flags, ok := strings.Cut(string(mk), "\nMILLION_FLAGS ?= ")
	if !ok {
		t.Fatal("the Makefile sets no MILLION_FLAGS")
	}
	flags, _, _ = strings.Cut(flags, "\n")
	cfg, err := scenario.ParseFlags(scenario.Hold, append([]string{"-cql-hosts", ""}, strings.Fields(flags)...), io.Discard)
	if err != nil || cfg.UAs != 1000000 || cfg.Hold != 5*time.Minute || cfg.PingInterval == 0 || cfg.EnginePingInterval == 0 {
		t.Fatalf("make million: %+v, %v", cfg, err)
	}
	return cfg
}

// TestKernelCheck: the run's needs against the kernel's settings. The
// project's machine holds make million's run; each setting made too small refuses
// the run, naming the sysctl (or limit) and the command that raises it,
// and nothing else; conntrack counts only once it tracks something.
func TestKernelCheck(t *testing.T) {
	cfg := millionHold(t)
	if e, w := cfg.EngineCount(), cfg.WorkerCount(); e != 56 || w != 56 {
		t.Fatalf("a million: %d engines, %d workers; want 56 each", e, w)
	}
	n := kernelNeeds(&cfg)
	// 17,858 user agents per engine and worker (ceil of 1e6 / 56), 143
	// per source address and engine (lcm(56, 250) = 7,000).
	if n.Files != 2_000_000+56*256+56*128 || n.PerProcess != 17858+256 || n.PerPortPair != 143 || n.Pending != 2000 || n.Conns != 1_000_000 {
		t.Errorf("needs %+v", n)
	}
	if err := checkKernel(&cfg, procReader(machineFiles)); err != nil {
		t.Fatalf("the project's machine: %v", err)
	}
	for _, c := range []struct {
		file, value string
		edit        func(*scenario.Config)
		want        string // in the error
	}{
		{"/proc/sys/fs/file-max", "1500000", nil, "fs.file-max is 1500000, with 1649 files open now this run needs 2021504 more (two sockets a connection and each process's own): sysctl -w fs.file-max=2300000"},
		{"/proc/sys/fs/file-nr", "500000 0 2466170", nil, "sysctl -w fs.file-max=2800000"},
		{"/proc/sys/fs/nr_open", "16384", nil, "fs.nr_open is 16384, an engine or worker here needs 18114 open files: sysctl -w fs.nr_open=19000"},
		{"/proc/self/limits", "Max open files            16384                16384                files     \n", nil,
			"the hard open-files limit (ulimit -Hn) is 16384, an engine or worker here needs 18114"},
		{"/proc/sys/net/ipv4/ip_local_port_range", "60000 60999", func(c *scenario.Config) { c.SourceIPs = 1 },
			"net.ipv4.ip_local_port_range 60000-60999 gives 1000 ephemeral ports per source address and engine, this run puts 17858 connections on one pair"},
		{"/proc/sys/net/core/somaxconn", "1024", nil, "net.core.somaxconn is 1024 (the engines' listen backlog), this run has up to 2000 handshakes in progress: lower -max-pending, or sysctl -w net.core.somaxconn=2000"},
		{"/proc/sys/net/ipv4/tcp_max_syn_backlog", "1024", nil, "sysctl -w net.ipv4.tcp_max_syn_backlog=2000"},
		{"/proc/sys/net/netfilter/nf_conntrack_count", "12", nil, "net.netfilter.nf_conntrack_max is 262144 and conntrack tracks 12 connections now, this run adds 1000000: sysctl -w net.netfilter.nf_conntrack_max=1200000"},
	} {
		files := maps.Clone(machineFiles)
		files[c.file] = c.value
		cfg := millionHold(t)
		if c.edit != nil {
			c.edit(&cfg)
		}
		err := checkKernel(&cfg, procReader(files))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), "\n") != 1 ||
			!strings.Contains(err.Error(), "changes no setting itself") {
			t.Errorf("%s = %q: %v\nwant one problem: %s", c.file, c.value, err, c.want)
		}
	}
	// The narrow port range holds the million when the user agents spread
	// over 250 sources (143 a pair).
	files := maps.Clone(machineFiles)
	files["/proc/sys/net/ipv4/ip_local_port_range"] = "60000 60999"
	if err := checkKernel(&cfg, procReader(files)); err != nil {
		t.Errorf("1,000 ports, 143 connections a pair: %v", err)
	}
	// No conntrack module: nothing to check there.
	files = maps.Clone(machineFiles)
	delete(files, "/proc/sys/net/netfilter/nf_conntrack_count")
	delete(files, "/proc/sys/net/netfilter/nf_conntrack_max")
	if err := checkKernel(&cfg, procReader(files)); err != nil {
		t.Errorf("without conntrack: %v", err)
	}
	// Every shortfall at once.
	files = maps.Clone(machineFiles)
	files["/proc/sys/fs/file-max"], files["/proc/sys/net/core/somaxconn"] = "100000", "128"
	if err := checkKernel(&cfg, procReader(files)); err == nil || !strings.Contains(err.Error(), "fs.file-max") ||
		!strings.Contains(err.Error(), "net.core.somaxconn") {
		t.Errorf("two short: %v", err)
	}
	delete(files, "/proc/sys/fs/nr_open")
	if err := checkKernel(&cfg, procReader(files)); err == nil || !strings.Contains(err.Error(), "nr_open") {
		t.Errorf("unreadable fs.nr_open: %v", err)
	}
}

// TestRunChecksKernel: Run refuses a run the machine cannot hold before
// it starts anything (here more handshakes at once than any listen
// backlog takes).
func TestRunChecksKernel(t *testing.T) {
	cfg := scenario.Default(scenario.Hold)
	cfg.CQLHosts, cfg.UAs, cfg.MaxPending, cfg.Out = nil, 100, 1<<40, t.TempDir()
	rep, err := Run(context.Background(), cfg, io.Discard, io.Discard)
	if rep != nil || err == nil || !strings.Contains(err.Error(), "net.core.somaxconn") {
		t.Fatalf("Run: a report %t, %v; want no report and the somaxconn refusal", rep != nil, err)
	}
	if left, _ := os.ReadDir(cfg.Out); len(left) != 0 {
		t.Errorf("a refused run wrote %v", left)
	}
}
