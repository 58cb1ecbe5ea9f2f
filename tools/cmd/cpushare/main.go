// Command cpushare tells where a process's CPU went, from CPU profiles
// (go tool pprof's format; the load tester's -profile writes them): each
// sample is given to the first kind of work that a frame of its stack,
// from the leaf up, belongs to (signing and verifying, the kernel, the
// collector, storage, ...), and the shares are printed as a Markdown
// table, one column per profile. With -per N, each cell is also the CPU
// time per operation, N being the operations the profile covered
// (pushes or hellos), in microseconds.
//
//	cpushare -per 30000 notify.autopush.pprof
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/autopush-go/autopush/internal/cli"
)

// kind is a kind of work, known by its frames' function names.
type kind struct {
	name string
	re   *regexp.Regexp
}

// kinds, in the order each frame is tried against them; the walk is
// leaf-up and the first frame that matches decides, so an allocation
// inside the JSON encoder is "allocation and collection" (the cost to take
// out), a write under Hertz the kernel's, and "service code" only what
// runs in the service's own frames.
var kinds = []kind{
	{"kernel calls (read, write, epoll)", regexp.MustCompile(`^(internal/runtime/syscall|syscall)\.|^runtime\.(netpoll|epollwait)`)},
	{"allocation and collection", regexp.MustCompile(`^runtime\.(mallocgc|gcBgMarkWorker|gcDrain|gcAssist|scanobject|scanObject|greyobject|markroot|bgsweep|bgscavenge|sweepone|wbBuf|growslice|newobject|makeslice|memclrNoHeapPointers|tryDeferToSpanScan|gcStart|gcMark)`)},
	{"ECDSA P-256 (VAPID)", regexp.MustCompile(`^crypto/(ecdsa|elliptic|internal/fips140/(ecdsa|nistec|bigmod))`)},
	{"other crypto (Fernet, HMAC, SHA-256, AES)", regexp.MustCompile(`^crypto/`)},
	{"storage engine (Pebble, gocql)", regexp.MustCompile(`^github\.com/(cockroachdb|gocql|apache/cassandra-gocql)`)},
	{"JSON", regexp.MustCompile(`^(encoding/json|github\.com/autopush-go/autopush/internal/jsonscan)`)},
	{"HTTP (Hertz, net/http)", regexp.MustCompile(`^(github\.com/cloudwego|net/http|net/textproto|bufio)`)},
	{"websocket (gnet, gobwas)", regexp.MustCompile(`^github\.com/(panjf2000|gobwas)`)},
	{"scheduler", regexp.MustCompile(`^runtime\.(schedule|findRunnable|park_m|gopark|goready|ready|futex|notesleep|notewakeup|mcall|gosched|wakep|startm|stopm|lock2|unlock2|runqgrab|stealWork|selectgo|chansend|chanrecv)`)},
	{"service code (autopush)", regexp.MustCompile(`^github\.com/autopush-go/`)},
}

const other = "other (runtime, standard library)"

func main() { cli.Main("cpushare", run) }

func run() error {
	per := flag.Float64("per", 0, "operations the profiles covered (each profile's), to print CPU µs per operation")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: cpushare [-per N] profile.pprof...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		return fmt.Errorf("cpushare: no profile named")
	}
	var cols []column
	for _, path := range flag.Args() {
		c, err := read(path)
		if err != nil {
			return err
		}
		cols = append(cols, c)
	}
	write(os.Stdout, cols, *per)
	return nil
}

// column is one profile's CPU by kind, nanoseconds.
type column struct {
	name  string
	total int64
	by    map[string]int64
}

func read(path string) (column, error) {
	f, err := os.Open(path)
	if err != nil {
		return column{}, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return column{}, fmt.Errorf("cpushare: %s: %w", path, err)
	}
	return share(p, strings.TrimSuffix(filepath.Base(path), ".pprof"))
}

// share adds up p's CPU samples by kind.
func share(p *profile.Profile, name string) (column, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return column{}, fmt.Errorf("cpushare: %s is not a CPU profile", name)
	}
	c := column{name: name, by: map[string]int64{}}
	for _, s := range p.Sample {
		v := s.Value[idx]
		c.total += v
		c.by[classify(s)] += v
	}
	return c, nil
}

// classify walks a sample's stack from the leaf up (inlined frames too)
// and returns the first kind a frame belongs to.
func classify(s *profile.Sample) string {
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function == nil {
				continue
			}
			for _, k := range kinds {
				if k.re.MatchString(ln.Function.Name) {
					return k.name
				}
			}
		}
	}
	return other
}

func write(w io.Writer, cols []column, per float64) {
	fmt.Fprint(w, "| where the CPU went |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c.name)
	}
	fmt.Fprint(w, "\n| --- |")
	for range cols {
		fmt.Fprint(w, " ---: |")
	}
	fmt.Fprintln(w)
	names := make([]string, 0, len(kinds)+1)
	for _, k := range kinds {
		names = append(names, k.name)
	}
	for _, n := range append(names, other, "total") {
		fmt.Fprintf(w, "| %s |", n)
		for _, c := range cols {
			v := c.by[n]
			if n == "total" {
				v = c.total
			}
			cell := fmt.Sprintf("%.1f%%", 100*float64(v)/float64(max(c.total, 1)))
			if per > 0 {
				cell += fmt.Sprintf(" (%.1f µs)", float64(v)/1e3/per)
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}
}
