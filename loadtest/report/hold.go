package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/autopush-go/autopush/loadtest/agent"
	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/scenario"
)

// HoldReport is the engines' memory as connections grew.
type HoldReport struct {
	Points []MemPoint `json:"points"`
	// Least-squares slopes over the points with connections, per
	// connection: the engines' user-space cost of one idle connection.
	RSSPerConn       Slope   `json:"rss_bytes_per_conn"`
	AnonPerConn      Slope   `json:"anon_bytes_per_conn"`
	HeapPerConn      Slope   `json:"heap_inuse_bytes_per_conn"`
	GoroutinesStart  int     `json:"goroutines_start"`
	GoroutinesEnd    int     `json:"goroutines_end"`
	HeldSeconds      float64 `json:"held_seconds"`
	ConnectedEnd     int     `json:"connected_end"`
	DroppedDuringRun int64   `json:"dropped"`
	// IdleCPU is the engines' CPU (user + system, from /proc) over the
	// hold, in percent of one core; IdleCPUPer10k the same per 10,000
	// connections held. Every sample the load tester takes (-sample-every)
	// scrapes each engine's /metrics, so it counts in: a slower sampling
	// is a fairer picture of a node scraped by Prometheus.
	IdleCPU       float64 `json:"idle_cpu_percent"`
	IdleCPUPer10k float64 `json:"idle_cpu_percent_per_10k_conns"`
	// Pings are the keepalives both ways over the whole run: the user
	// agents' {} pings and the engines' answers, the engines' websocket
	// pings and the user agents' pongs. EnginePings is what the engines
	// counted sending (-1: not known).
	Pings       agent.Pings `json:"pings"`
	EnginePings int         `json:"engine_pings"`
	// MostMaps is the most memory mappings an engine or worker had at the
	// end (vm.max_map_count bounds each process's).
	MostMaps       int   `json:"most_maps"`
	WorkerRSSPerUA Slope `json:"worker_rss_bytes_per_ua"`
	// The breakdown of anon (per connection, same fit): the Go heap's
	// resident share, what the last GC found live (whole MB, from the
	// runtime's gctrace; over the points that have it), the rest of anon
	// (memory outside the Go heap and stacks), and heap objects.
	ResidentPerConn  Slope `json:"heap_resident_bytes_per_conn"`
	HeapLivePerConn  Slope `json:"heap_live_bytes_per_conn"`
	OtherAnonPerConn Slope `json:"other_anon_bytes_per_conn"`
	ObjectsPerConn   Slope `json:"heap_objects_per_conn"`
	// Kernel is the kernel's memory per connection, same fit; nil when
	// the points lack it. Both ends of every connection are on this
	// machine (the worker's socket and the engine's), so it is the cost
	// of two sockets.
	Kernel *KernelPerConn `json:"kernel,omitempty"`
}

// KernelPerConn is the machine's kernel memory per connection (slopes of
// probe.Kernel's figures over the points), with the slab caches that
// grew by at least CacheSlopeMin bytes a connection, largest first.
type KernelPerConn struct {
	Total        Slope        `json:"total_bytes_per_conn"` // probe.Kernel.Total
	Slab         Slope        `json:"slab_bytes_per_conn"`
	SReclaimable Slope        `json:"sreclaimable_bytes_per_conn"`
	SUnreclaim   Slope        `json:"sunreclaim_bytes_per_conn"`
	KernelStack  Slope        `json:"kernel_stack_bytes_per_conn"`
	PageTables   Slope        `json:"page_tables_bytes_per_conn"`
	TCPMem       Slope        `json:"tcp_mem_bytes_per_conn"`
	Used         Slope        `json:"machine_used_bytes_per_conn"` // processes and kernel
	TCPSockets   Slope        `json:"tcp_sockets_per_conn"`        // 2: both ends here
	Caches       []CacheSlope `json:"slab_caches,omitempty"`
}

// CacheSlope is one slab cache's growth per connection.
type CacheSlope struct {
	Name    string `json:"name"`
	Objects Slope  `json:"objects_per_conn"`
	Bytes   Slope  `json:"bytes_per_conn"` // objects × object size
}

// CacheSlopeMin is the least growth per connection, bytes, for a slab
// cache to be listed.
const CacheSlopeMin = 16

// MemPoint is the engines measured at one connection count (medians of
// Samples samples).
type MemPoint struct {
	Connections int                  `json:"connections"` // user agents ready
	Engine      probe.EngineSample   `json:"engine"`      // summed
	PerEngine   []probe.EngineSample `json:"per_engine"`
	WorkerRSS   int64                `json:"worker_rss_bytes"`
	// Kernel is the machine's kernel memory (the sample taken with the
	// engines' median); MemTotal 0 when it could not be read.
	Kernel probe.Kernel `json:"kernel"`
}

// Slopes fits memory against connections over the points with
// connections (the first step also absorbs one-time set-up, such as
// storage pools and tables growing; the zero point is kept when there is
// only one step).
func (h *HoldReport) Slopes() {
	pts := h.Points
	if len(pts) > 2 {
		pts = pts[1:]
	}
	// fit is the slope of one figure; NaN when a point lacks it, or, with
	// some, when fewer than two points have it.
	fit := func(some bool, get func(p MemPoint) int64) Slope {
		var xs, ys []float64
		for _, p := range pts {
			v := get(p)
			switch {
			case v >= 0:
				xs, ys = append(xs, float64(p.Connections)), append(ys, float64(v))
			case !some:
				return Slope(math.NaN())
			}
		}
		if len(xs) < 2 {
			return Slope(math.NaN())
		}
		return Slope(slope(xs, ys))
	}
	h.RSSPerConn = fit(false, func(p MemPoint) int64 { return p.Engine.RSS })
	h.AnonPerConn = fit(false, func(p MemPoint) int64 { return p.Engine.Anon })
	h.HeapPerConn = fit(false, func(p MemPoint) int64 { return p.Engine.HeapInuse })
	h.ResidentPerConn = fit(false, func(p MemPoint) int64 { return p.Engine.HeapResident })
	h.HeapLivePerConn = fit(true, func(p MemPoint) int64 { return p.Engine.HeapLive })
	h.OtherAnonPerConn = fit(false, func(p MemPoint) int64 { return p.Engine.OtherAnon() })
	h.ObjectsPerConn = fit(false, func(p MemPoint) int64 { return p.Engine.HeapObjects })
	h.WorkerRSSPerUA = fit(false, func(p MemPoint) int64 { return p.WorkerRSS })
	h.Kernel = kernelSlopes(pts, fit)
	first, last := h.Points[0], h.Points[len(h.Points)-1]
	h.GoroutinesStart, h.GoroutinesEnd = first.Engine.Goroutines, last.Engine.Goroutines
}

// kernelSlopes fits the kernel's figures (fit: Slopes'), nil when a point
// lacks them.
func kernelSlopes(pts []MemPoint, fit func(bool, func(MemPoint) int64) Slope) *KernelPerConn {
	for _, p := range pts {
		if p.Kernel.MemTotal <= 0 {
			return nil
		}
	}
	k := &KernelPerConn{
		Total:        fit(false, func(p MemPoint) int64 { return p.Kernel.Total() }),
		Slab:         fit(false, func(p MemPoint) int64 { return p.Kernel.Slab }),
		SReclaimable: fit(false, func(p MemPoint) int64 { return p.Kernel.SReclaimable }),
		SUnreclaim:   fit(false, func(p MemPoint) int64 { return p.Kernel.SUnreclaim }),
		KernelStack:  fit(false, func(p MemPoint) int64 { return p.Kernel.KernelStack }),
		PageTables:   fit(false, func(p MemPoint) int64 { return p.Kernel.PageTables }),
		TCPMem:       fit(false, func(p MemPoint) int64 { return p.Kernel.TCPMem }),
		Used:         fit(false, func(p MemPoint) int64 { return p.Kernel.Used() }),
		TCPSockets:   fit(false, func(p MemPoint) int64 { return p.Kernel.TCPInuse }),
	}
	// The caches every point has (slabinfo is root's; a cache may come
	// and go between points).
	for name, c := range pts[len(pts)-1].Kernel.Slabs {
		objs := fit(false, func(p MemPoint) int64 {
			if pc, ok := p.Kernel.Slabs[name]; ok {
				return pc.Objects
			}
			return -1
		})
		if b := float64(objs) * float64(c.Size); b >= CacheSlopeMin {
			k.Caches = append(k.Caches, CacheSlope{Name: name, Objects: objs, Bytes: Slope(b)})
		}
	}
	slices.SortFunc(k.Caches, func(a, b CacheSlope) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return k
}

// GoroutinesGrew reports whether the engines gained more goroutines
// between the first and the last point than engines × GoroutineSlack: a
// goroutine per connection (false when unknown).
func (h *HoldReport) GoroutinesGrew(engines int) bool {
	return h.GoroutinesStart >= 0 && h.GoroutinesEnd >= 0 && h.GoroutinesEnd-h.GoroutinesStart > scenario.GoroutineSlack*max(engines, 1)
}

func (r *Report) printHold(w io.Writer) {
	h := r.Hold
	fmt.Fprintln(w, "over time:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "s\tphase\tconnected\tconnects/s\tfailures\tengines rss MiB\tgoroutines\tcpu% machine/engines/endpoint/workers/storage\t")
	prev := Sample{}
	for _, s := range everyNth(r.Series, 12) {
		rate := "-"
		if dt := s.T - prev.T; prev.T > 0 && dt > 0 {
			rate = Num(float64(s.Connects-prev.Connects) / dt)
		}
		fmt.Fprintf(tw, "%.0f\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t\n", s.T, s.Phase, Num(s.Connected), rate, Num(s.ConnectFail),
			float64(s.Engine.RSS)/(1<<20), OptNum(s.Engine.Goroutines), s.CPU)
		prev = s
	}
	tw.Flush()
	fmt.Fprintln(w, "memory after each step (medians):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "connections\tengine conns\trss MiB\tanon MiB\theap in use MiB\tgoroutines\tworkers rss MiB\t")
	for _, p := range h.Points {
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%s\t%s\t%.1f\t\n", Num(p.Connections), OptNum(p.Engine.Connections),
			float64(p.Engine.RSS)/(1<<20), float64(p.Engine.Anon)/(1<<20), optMiB(p.Engine.HeapInuse),
			OptNum(p.Engine.Goroutines), float64(p.WorkerRSS)/(1<<20))
	}
	tw.Flush()
	fmt.Fprintf(w, "engines' user-space memory per connection (least-squares slope over the points): rss %s B, anon %s B, Go heap in use %s B\n",
		f0(float64(h.RSSPerConn)), f0(float64(h.AnonPerConn)), f0(float64(h.HeapPerConn)))
	fmt.Fprintf(w, "goroutines (all engines) %d -> %d; held %s connections for %.0fs; %d dropped during the run; load generator %s B per user agent\n",
		h.GoroutinesStart, h.GoroutinesEnd, Num(h.ConnectedEnd), h.HeldSeconds, h.DroppedDuringRun, f0(float64(h.WorkerRSSPerUA)))
	fmt.Fprintf(w, "engines' CPU over the hold: %.2f%% of a core, %.2f%% per 10,000 connections (sampled every %s)\n",
		h.IdleCPU, h.IdleCPUPer10k, r.Config.SampleEvery)
	p := h.Pings
	fmt.Fprintf(w, "keepalives: user agents sent %s {} pings, %s answered, %s unanswered when the next was due; engines sent %s websocket pings, user agents received %s and answered %s\n",
		Num(p.Sent), Num(p.Answered), Num(p.Unanswered), OptNum(h.EnginePings), Num(p.Server), Num(p.Pongs))
	fmt.Fprintf(w, "memory mappings: at most %s in one engine or worker (vm.max_map_count %s)\n", Num(h.MostMaps), r.Machine.MaxMapCount)
	r.printBreakdown(w)
	r.printKernel(w)
}

// printKernel prints the machine's kernel memory after each step and per
// connection.
func (r *Report) printKernel(w io.Writer) {
	h := r.Hold
	k := h.Kernel
	if k == nil {
		fmt.Fprintln(w, "kernel memory: not read")
		return
	}
	fmt.Fprintln(w, "kernel memory after each step (the whole machine's: /proc/meminfo, /proc/net/sockstat):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "connections\tslab MiB\treclaimable MiB\tunreclaimable MiB\tkernel stacks MiB\tpage tables MiB\ttcp sockets\ttcp buffers KiB\tconntrack\tmachine used MiB\t")
	for _, p := range h.Points {
		x := p.Kernel
		mib := func(v int64) string { return fmt.Sprintf("%.1f", float64(v)/(1<<20)) }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", Num(p.Connections), mib(x.Slab), mib(x.SReclaimable),
			mib(x.SUnreclaim), mib(x.KernelStack), mib(x.PageTables), Num(x.TCPInuse), Num(x.TCPMem>>10), optShift(x.Conntrack, 0),
			mib(x.Used()))
	}
	tw.Flush()
	fmt.Fprintf(w, "kernel per connection (both ends are on this machine: the worker's socket and the engine's): %s B = slab %s B "+
		"(reclaimable %s, unreclaimable %s) + kernel stacks %s + page tables %s + tcp buffers %s; tcp sockets %.2f per connection; "+
		"machine used %s B per connection (processes and kernel)\n",
		f0(float64(k.Total)), f0(float64(k.Slab)), f0(float64(k.SReclaimable)), f0(float64(k.SUnreclaim)), f0(float64(k.KernelStack)),
		f0(float64(k.PageTables)), f0(float64(k.TCPMem)), float64(k.TCPSockets), f0(float64(k.Used)))
	if len(k.Caches) > 0 {
		var parts []string
		for _, c := range k.Caches {
			parts = append(parts, fmt.Sprintf("%s %.2f × = %s B", c.Name, float64(c.Objects), f0(float64(c.Bytes))))
		}
		fmt.Fprintf(w, "slab caches per connection (objects in use × size, from %d B): %s\n", CacheSlopeMin, strings.Join(parts, ", "))
	}
}

// printBreakdown prints where the engines' memory goes at each point and
// per connection, and the budget's verdict.
func (r *Report) printBreakdown(w io.Writer) {
	h := r.Hold
	fmt.Fprintln(w, "engine memory breakdown after each step (summed over the engines; \"-\": not known):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "connections\trss KiB\tanon KiB\tfile KiB\tGo heap resident KiB\theap in use KiB\tlive heap MiB\tstacks KiB\tother anon KiB\theap objects\tGCs\tgoroutines\t")
	for _, p := range h.Points {
		e := p.Engine
		kib := func(v int64) string { return optShift(v, 10) }
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.Connections, e.RSS>>10, e.Anon>>10, e.File()>>10,
			kib(e.HeapResident), kib(e.HeapInuse), optShift(e.HeapLive, 20), kib(e.StackInuse), kib(e.OtherAnon()),
			optShift(e.HeapObjects, 0), OptNum(e.GCs), OptNum(e.Goroutines))
	}
	tw.Flush()
	fmt.Fprintf(w, "per connection: rss %s B = anon %s B (+ file-backed); anon: Go heap resident %s B (in use %s B, live at last GC %s B), other anon %s B; heap objects %s\n",
		f0(float64(h.RSSPerConn)), f0(float64(h.AnonPerConn)), f0(float64(h.ResidentPerConn)), f0(float64(h.HeapPerConn)),
		f0(float64(h.HeapLivePerConn)), f0(float64(h.OtherAnonPerConn)), f0(float64(h.ObjectsPerConn)))
	fmt.Fprintln(w, r.budgetLine())
}

// budgetLine is the verdict on the memory budget (docs/benchmarks.md): RSS per
// connection (checked from scenario.BudgetFrom user agents) and no
// goroutine per connection.
func (r *Report) budgetLine() string {
	h, c := r.Hold, r.Config
	rss := "PASS"
	switch {
	case c.Budget <= 0:
		rss = "no budget"
	case c.UAs < scenario.BudgetFrom:
		rss = "not checked below " + Num(scenario.BudgetFrom) + " user agents"
	case float64(h.RSSPerConn) > float64(c.Budget):
		rss = "FAIL"
	}
	g := "PASS"
	if h.GoroutinesGrew(r.Cluster.Engines) {
		g = "FAIL"
	}
	return fmt.Sprintf("budget: rss %s B per connection, at most %s B: %s; goroutines %d -> %d, at most %d more per engine: %s",
		f0(float64(h.RSSPerConn)), Num(c.Budget), rss, h.GoroutinesStart, h.GoroutinesEnd, scenario.GoroutineSlack, g)
}

// optShift is v>>shift, or "-" for an unknown (negative) figure.
func optShift(v int64, shift uint) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v>>shift, 10)
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
