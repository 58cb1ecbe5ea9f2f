package report

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/autopush-go/autopush/loadtest/scenario"
)

// CapacityDoc renders docs/capacity.md from the capacity profile's
// reports: out is where their files are, storageNote what the CQL server
// was, errs the scenarios that did not complete.
func CapacityDoc(out, storageNote string, reps []*Report, errs []error) ([]byte, error) {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Capacity\n\n")
	w("Measured by the load tester (`loadtest/`) with `make capacity`, which runs\n")
	w("`go run ./loadtest/cmd/loadtest capacity` (the standard profile below) and rewrites this file. Each scenario\n")
	w("starts its own engine processes (autoconnect) and endpoint (autoendpoint) from this commit, on a fresh keyspace,\n")
	w("and drives them from forked worker processes; nothing here is estimated. The JSON and HTML reports (latency over\n")
	w("time, memory against connections) are under `%s/<scenario>/`.\n\n", out)
	if len(reps) == 0 {
		w("No scenario ran.\n")
	} else {
		m := reps[0].Machine
		first, last := reps[0].Started, reps[0].Started
		for _, r := range reps {
			first, last = minTime(first, r.Started), maxTime(last, r.Started)
		}
		w("- **Date:** %s to %s (each section gives its run's date and commit).\n", first.UTC().Format("2006-01-02 15:04 MST"),
			last.UTC().Format("2006-01-02 15:04 MST"))
		w("- **Machine:** %s, %d CPUs, %s RAM, %s, kernel %s, %s. Open files per process: %d (hard).\n",
			m.CPU, m.CPUs, gib(m.MemTotal), m.OS, m.Kernel, m.Go, m.FDLimit)
		w("  Ephemeral ports %s, somaxconn %s, file-max %s", m.PortRange, m.Somaxconn, m.FileMax)
		if m.Conntrack != "" {
			w(", conntrack %s", m.Conntrack)
		}
		w("; no sysctl was changed.\n")
		w("- **Storage:** the CQL server at %s, consistency %s, replication %s", strings.Join(reps[0].Config.CQLHosts, ","),
			reps[0].Config.CQLConsistency, reps[0].Config.CQLReplication)
		if storageNote != "" {
			w(" (%s)", storageNote)
		}
		w(", on the same machine.\n")
		w("- **Shared machine:** the load generator, the service, the storage server (and, while these ran, other\n")
		w("  work) share the same %d cores. Each table gives the machine's load average and CPU use so a figure can be\n", m.CPUs)
		w("  read against how busy the machine was. A dedicated storage cluster and separate load-generator hosts\n")
		w("  would raise every rate here.\n\n")
	}
	for _, e := range errs {
		w("**A scenario did not complete:** `%s`\n\n", strings.ReplaceAll(e.Error(), "\n", " "))
	}
	w("## Summary\n\n| scenario | result |\n| --- | --- |\n")
	for _, r := range reps {
		w("| %s | %s |\n", r.Scenario, headline(r))
	}
	for _, r := range reps {
		w("\n## %s\n\n", r.Scenario)
		commit := r.Commit
		if commit == "" {
			commit = "(not recorded)"
		}
		w("Run %s at commit %s.\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"), commit)
		w("```\n%s\n```\n\n", r.Command)
		w("%s; load average %s at the start, %s at the end; %.0f s in all.\n\n", systemLine(r), r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd, r.Seconds)
		if c := r.Connect; c != nil {
			w("Connect: %s of %s user agents in %.1f s: **%s/s achieved** (%s/s offered, at most %s handshakes in progress), %s failed attempts. Handshake (connect to the last register reply) p50 %.0f ms, p99 %.0f ms, max %.0f ms. CPU during the ramp (%% of one core) machine %.0f, engines %.0f, endpoint %.0f, load generator %.0f, storage %s.\n\n",
				Num(c.Connected), Num(c.Target), c.Seconds, Num(c.Achieved), Num(c.Offered), Num(r.Config.MaxPending), Num(c.Failures),
				c.Handshake.P50, c.Handshake.P99, c.Handshake.Max, c.CPU.Machine, c.CPU.Engines, c.CPU.Endpoint, c.CPU.Workers, c.CPU.StorageText())
		}
		if len(r.Reasons) > 0 {
			w("Failed handshakes and dropped connections by reason: %s.\n\n", Counts(r.Reasons))
		}
		switch {
		case r.Hold != nil:
			holdDoc(&b, r)
		case r.Notify != nil:
			notifyDoc(&b, r)
		case r.Delivery != nil:
			deliveryDoc(&b, r)
		}
		if !r.Pass {
			w("**FAIL:** %s\n", strings.Join(r.Problems, "; "))
		}
	}
	w("\n## How these are measured\n\n")
	w("- **User agents** are state machines on epoll event loops (a few per worker process, not a goroutine each), speaking\n")
	w("  the Mozilla push protocol over real websockets from 127.0.0.2-127.0.0.251 (bound before connect), spread over the\n")
	w("  engines round-robin. Each worker holds at most %s (a process may open 20,000 files here).\n", Num(scenario.Default(scenario.Hold).PerWorker))
	w("- **Memory per connection** is the least-squares slope of the engines' summed RSS (`/proc/<pid>/status`; anon is\n")
	w("  the user-space heap) over the measurement points after the first step, each the median of samples 1 s apart\n")
	w("  after an idle settle, so the processes' fixed cost is left out. Goroutines and heap come from each engine's `/metrics`.\n")
	w("- **Pushes** are VAPID-signed (a new ES256 JWT per push, as the web-push libraries do) and aes128gcm-encrypted\n")
	w("  (RFC 8291, a fresh application-server key per push); the user agent decrypts, checks every byte, and acks. The send schedule is\n")
	w("  open loop: each push has a time fixed in advance and latency counts from it, so a slow server cannot hide its\n")
	w("  queueing by slowing the application server. Latency is an HDR histogram (3 significant digits) of scheduled send to arrival.\n")
	w("- **Exactly once:** every push answered 201 must arrive; an arrival after the user agent's ack was certainly\n")
	w("  seen (the ack's connection closed with a close handshake, or it arrives on the acking connection) is counted as\n")
	w("  duplicated after ack; after the drain every user agent reconnects once more and must receive nothing.\n")
	return b.Bytes(), nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func systemLine(r *Report) string {
	c := r.Cluster
	s := fmt.Sprintf("%d %s process(es) on %s storage, %d load-generator worker(s)", c.Engines, c.EngineKind, c.Storage, c.Workers)
	if c.Endpoint != "" && c.EngineKind == "autoconnect" {
		s += ", one autoendpoint"
	}
	return s
}

// headline is a scenario's one-line result.
func headline(r *Report) string {
	switch {
	case r.Hold != nil:
		h := r.Hold
		return fmt.Sprintf("%s idle user agents held on %d engines (%s connected/s); engines' user-space memory **%s B per connection** (RSS slope; anon %s B); goroutines %d → %d",
			Num(h.ConnectedEnd), r.Cluster.Engines, Num(r.Connect.Achieved), f0(float64(h.RSSPerConn)), f0(float64(h.AnonPerConn)), h.GoroutinesStart, h.GoroutinesEnd)
	case r.Notify != nil:
		n := r.Notify
		var parts []string
		for _, s := range n.Stages {
			parts = append(parts, fmt.Sprintf("%s/s: p99 %.0f ms", Num(s.Offered), s.Latency.P99))
		}
		cross := "p99 stayed under the limit"
		if n.CrossedAt > 0 {
			cross = fmt.Sprintf("**p99 passes %.0f ms at %s/s offered**", n.P99Limit, Num(n.CrossedAt))
		}
		return cross + "; " + strings.Join(parts, ", ")
	case r.Delivery != nil:
		a := r.Delivery.Account
		s := fmt.Sprintf("%s pushes accepted, **%d lost, %d duplicated after ack**, %d stalled", Num(a.Accepted), a.Lost, a.DuplicatedAfterAck, r.Delivery.Stalled)
		if r.Scenario == scenario.Stored {
			s += fmt.Sprintf("; drained at %s/s", Num(r.Delivery.DrainRate))
		} else {
			s += fmt.Sprintf("; %s connects/s of churn", Num(r.Delivery.ChurnRate))
		}
		return s
	}
	return "did not complete"
}

func holdDoc(b *bytes.Buffer, r *Report) {
	h := r.Hold
	fmt.Fprintf(b, "| user agents | engine connections | engines RSS MiB | anon MiB | Go heap in use MiB | goroutines | load generator RSS MiB |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range h.Points {
		fmt.Fprintf(b, "| %s | %s | %.1f | %.1f | %s | %s | %.1f |\n", Num(p.Connections), OptNum(p.Engine.Connections),
			float64(p.Engine.RSS)/(1<<20), float64(p.Engine.Anon)/(1<<20), optMiB(p.Engine.HeapInuse), OptNum(p.Engine.Goroutines),
			float64(p.WorkerRSS)/(1<<20))
	}
	fmt.Fprintf(b, "\n**Engines' user-space memory per connection: %s B** (RSS slope), anon %s B, Go heap in use %s B. The load generator costs %s B per user agent. All %s stayed connected for %.0f s (%d dropped during the run).\n\n",
		f0(float64(h.RSSPerConn)), f0(float64(h.AnonPerConn)), f0(float64(h.HeapPerConn)), f0(float64(h.WorkerRSSPerUA)),
		Num(h.ConnectedEnd), h.HeldSeconds, h.DroppedDuringRun)
	if k := h.Kernel; k != nil {
		fmt.Fprintf(b, "**Kernel memory per connection: %s B** (both ends are on this machine, the worker's socket and the engine's; slopes from /proc/meminfo and /proc/net/sockstat): slab %s B (reclaimable %s, unreclaimable %s), kernel stacks %s, page tables %s, TCP buffers %s; %.2f TCP sockets a connection.",
			f0(float64(k.Total)), f0(float64(k.Slab)), f0(float64(k.SReclaimable)), f0(float64(k.SUnreclaim)), f0(float64(k.KernelStack)),
			f0(float64(k.PageTables)), f0(float64(k.TCPMem)), float64(k.TCPSockets))
		var parts []string
		for _, c := range k.Caches {
			parts = append(parts, fmt.Sprintf("%s %.2f × %s B", c.Name, float64(c.Objects), f0(float64(c.Bytes)/float64(c.Objects))))
		}
		if len(parts) > 0 {
			fmt.Fprintf(b, " Slab caches a connection: %s.", strings.Join(parts, ", "))
		}
		fmt.Fprintf(b, "\n\n")
	}
	p := h.Pings
	fmt.Fprintf(b, "Keepalives: the user agents sent %s `{}` pings (%s answered, %s unanswered a whole interval); the engines sent %s websocket pings, the user agents answered %s.\n\n",
		Num(p.Sent), Num(p.Answered), Num(p.Unanswered), OptNum(h.EnginePings), Num(p.Pongs))
}

func notifyDoc(b *bytes.Buffer, r *Report) {
	n := r.Notify
	fmt.Fprintf(b, "%s connected user agents. Latency from the scheduled send to arrival at the user agent, in ms, over each stage after a %s warm-up; CPU in %% of one core (machine = everything on it).\n\n",
		Num(n.UAs), r.Config.Warmup)
	fmt.Fprintf(b, "| offered/s | accepted/s | delivered/s | p50 | p90 | p99 | p99.9 | max | POST answer p99 | lost | CPU machine/engines/endpoint/load gen./storage | errors |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n")
	for _, s := range n.Stages {
		fmt.Fprintf(b, "| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %s | %s |\n", Num(s.Offered), Num(s.Achieved), Num(s.Delivered),
			s.Latency.P50, s.Latency.P90, s.Latency.P99, s.Latency.P999, s.Latency.Max, s.Response.P99, s.Account.Lost, s.CPU, CountsOrNone(s.Errors))
	}
	if n.CrossedAt > 0 {
		fmt.Fprintf(b, "\n**p99 passes %.0f ms at %s pushes/s offered.**\n\n", n.P99Limit, Num(n.CrossedAt))
	} else {
		fmt.Fprintf(b, "\np99 stayed within %.0f ms at every offered rate.\n\n", n.P99Limit)
	}
}

func deliveryDoc(b *bytes.Buffer, r *Report) {
	d := r.Delivery
	a := d.Account
	fmt.Fprintf(b, "%s pushes to %s user agents at %s/s offered: %s accepted in %.1f s (%s/s); errors: %s.",
		Num(d.Scheduled), Num(d.UAs), Num(d.Offered), Num(a.Accepted), d.SendSeconds, Num(d.Achieved), CountsOrNone(d.Errors))
	if r.Scenario == scenario.Churn {
		fmt.Fprintf(b, " Meanwhile %s connects and %s disconnects (%s connects/s; online %s and offline %s on average, each reconnect to a random engine).",
			Num(d.ChurnConnects), Num(d.ChurnCloses), Num(d.ChurnRate), r.Config.SessionMean, r.Config.OfflineMean)
	}
	fmt.Fprintf(b, "\nDrain after everyone reconnected: last first arrival %.1f s after the reconnect began (%s arrivals/s).", d.DrainSeconds, Num(d.DrainRate))
	if d.Stalled > 0 {
		fmt.Fprintf(b, " **%d pushes stalled:** still not delivered after %s with their user agent connected (they arrived, if at all, only after a further reconnect).", d.Stalled, r.Config.DrainTimeout)
	}
	fmt.Fprintf(b, " Scheduled send to first arrival (time waiting offline included): p50 %.0f ms, p99 %.0f ms, max %.0f ms.\n\n",
		d.Latency.P50, d.Latency.P99, d.Latency.Max)
	fmt.Fprintf(b, "| accepted | delivered | **lost** | **duplicated after ack** | unacked | redelivered before any ack | after an unverified ack | bad content / misrouted / unknown |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	fmt.Fprintf(b, "| %s | %s | **%d** | **%d** | %d | %d | %d | %d / %d / %d |\n\n", Num(a.Accepted), Num(a.Delivered), a.Lost, a.DuplicatedAfterAck,
		a.Unacked, a.RedeliveredUnacked, a.RedeliveredAckUnverified, a.BadContent, a.Misrouted, a.Unknown)
}
