package loadtest

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPayloadRoundTrip(t *testing.T) {
	id := pushID{run: 7, worker: 3, ua: 1234, seq: 99999, at: 123456789}
	for _, size := range []int{payloadHeader, payloadHeader + 1, 512, 1000, maxPayload} {
		p := appendPayload(nil, id, size)
		if len(p) != size {
			t.Fatalf("size %d: got %d bytes", size, len(p))
		}
		got, err := parsePayload(p, size)
		if err != nil || got != id {
			t.Fatalf("size %d: %+v %v", size, got, err)
		}
		if size == payloadHeader {
			continue
		}
		for _, at := range []int{payloadHeader, size - 1, (payloadHeader + size) / 2} {
			bad := bytes.Clone(p)
			bad[at] ^= 1
			if _, err := parsePayload(bad, size); !errors.Is(err, errContent) {
				t.Errorf("size %d: flipped byte %d accepted", size, at)
			}
		}
	}
	if _, err := parsePayload(appendPayload(nil, id, 100), 101); err == nil {
		t.Error("wrong length accepted")
	}
	other := id
	other.seq++
	if bytes.Equal(appendPayload(nil, id, 200)[payloadHeader:], appendPayload(nil, other, 200)[payloadHeader:]) {
		t.Error("two pushes share their padding")
	}
}

// TestLedger: how arrivals are classified, and the accounting.
func TestLedger(t *testing.T) {
	var l ledger
	a, b, c, d, e := l.add(1), l.add(1), l.add(2), l.add(2), l.add(3)
	l.answered(a, 201, "")
	l.answered(b, 201, "")
	l.answered(c, 201, "")
	l.answered(d, 503, "")
	l.answered(e, statusNotSent, "")

	steps := []struct {
		seq  uint64
		ua   int32
		conn uint32
		want receipt
	}{
		{a, 1, 1, rcptFirst},
		{a, 2, 1, rcptUnknown}, // not this user agent's
		{99, 1, 1, rcptUnknown},
	}
	for _, s := range steps {
		if got := l.receive(s.seq, s.ua, s.conn); got != s.want {
			t.Errorf("receive(%d, ua %d) = %d, want %d", s.seq, s.ua, got, s.want)
		}
	}
	if l.outstanding(0, 5) != 2 || l.unacked() != 3 {
		t.Errorf("outstanding %d (want 2: b, c), unacked %d (want 3)", l.outstanding(0, 5), l.unacked())
	}
	// a acked on connection 1, which then breaks: a repeat is allowed.
	l.ack(a, 1)
	if got := l.receive(a, 1, 2); got != rcptAgainAckUnverified {
		t.Errorf("after an unverified ack: %d", got)
	}
	// A repeat on the connection that acked is a server bug.
	if got := l.receive(a, 1, 1); got != rcptAfterAck {
		t.Errorf("on the acking connection: %d", got)
	}
	// b arrives, is not acked (the user agent was leaving), arrives again.
	l.receive(b, 1, 1)
	if got := l.receive(b, 1, 2); got != rcptAgainUnacked {
		t.Errorf("repeat before any ack: %d", got)
	}
	l.ack(b, 2)
	l.confirm([]uint64{b})
	if got := l.receive(b, 1, 3); got != rcptAfterAck {
		t.Errorf("after a certain ack: %d", got)
	}
	l.receive(d, 2, 1) // refused, yet delivered
	acc := l.account(0, l.len())
	want := Accounting{Sent: 4, Accepted: 3, Rejected: 1, NotSent: 1, Delivered: 2, Lost: 1, DeliveredDespiteError: 1}
	if acc != want {
		t.Errorf("account\n got %+v\nwant %+v", acc, want)
	}
	if acc.Exact() {
		t.Error("a lost push is not exact")
	}
}

func TestFlags(t *testing.T) {
	var help bytes.Buffer
	if _, err := ParseFlags(Hold, []string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"-uas", "-connect-rate", "-steps", "-settle", "-ping-interval", "-cql-hosts"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("hold help lacks %s", want)
		}
	}
	for _, notHold := range []string{"-rates", "-messages", "-session"} {
		if strings.Contains(help.String(), notHold+" ") {
			t.Errorf("hold help lists %s", notHold)
		}
	}
	cfg, err := ParseFlags(Notify, []string{"-uas", "3_000", "-rates", "100, 200,400", "-stage-time", "20s", "-cql-hosts", "", "-keep-keyspace"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UAs != 3000 || len(cfg.Rates) != 3 || cfg.Rates[2] != 400 || cfg.StageTime != 20*time.Second || !cfg.KeepKeyspace {
		t.Errorf("parsed %+v", cfg)
	}
	for _, args := range [][]string{
		{"-uas", "0"}, {"-rates", "100,-1"}, {"-stage-time", "1s", "-warmup", "2s"}, {"-payload", "10"},
		{"-uas", "30000", "-cql-hosts", ""}, {"-engines", "2", "-cql-hosts", ""}, {"extra"}, {"-messages", "5"},
	} {
		if _, err := ParseFlags(Notify, args, io.Discard); err == nil {
			t.Errorf("ParseFlags(notify, %q) accepted", args)
		}
	}
	if cfg := DefaultConfig(Hold); cfg.Validate() != nil && len(cfg.CQLHosts) == 0 {
		t.Errorf("hold defaults: %v", cfg.Validate())
	}
}

// TestProfileCommands: the capacity profile's runs are recorded as the
// commands that repeat them (docs/capacity.md, docs/benchmarks.md).
func TestProfileCommands(t *testing.T) {
	var got []string
	for _, c := range DefaultProfile().configs() {
		got = append(got, strings.TrimPrefix(c.Command, "go run ./loadtest/cmd/loadtest "))
	}
	want := []string{
		"hold -uas 200000 -connect-rate 1500 -steps 5 -settle 15s -hold 1m0s",
		"notify -uas 10000 -rates 100,250,500,750,1000,2000,4000 -stage-time 20s -warmup 5s",
		"stored -engines 2 -push-rate 800",
		"churn -engines 2 -uas 5000 -push-rate 600 -duration 2m50s -session 20s -offline 5s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("commands\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSizing(t *testing.T) {
	cfg := DefaultConfig(Hold)
	cfg.CQLHosts = []string{"127.0.0.1:9042"}
	cfg.UAs = 200000
	if cfg.engines() != 12 || cfg.workers() != 12 {
		t.Errorf("200k: %d engines, %d workers; want 12, 12", cfg.engines(), cfg.workers())
	}
	cfg.UAs, cfg.Workers = 5, 8
	if cfg.workers() != 5 {
		t.Errorf("more workers than user agents: %d", cfg.workers())
	}
}

func TestParseMetrics(t *testing.T) {
	in := "# HELP x\ngo_goroutines 85\nautoconnect_connections 19000\n" +
		`autoconnect_direct_total{result="busy"} 3` + "\ngo_memstats_heap_inuse_bytes 1.2345e+07\n"
	m, err := parseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if m["go_goroutines"] != 85 || m["autoconnect_connections"] != 19000 || m[`autoconnect_direct_total{result="busy"}`] != 3 ||
		m["go_memstats_heap_inuse_bytes"] != 12345000 {
		t.Errorf("%v", m)
	}
}

func TestSumEngines(t *testing.T) {
	a := EngineSample{procMem: procMem{RSS: 10, Anon: 5}, Goroutines: 80, HeapInuse: 7, Connections: 3, Clients: 2}
	b := a
	s := sumEngines([]EngineSample{a, b})
	if s.RSS != 20 || s.Goroutines != 160 || s.Connections != 6 || s.HeapInuse != 14 {
		t.Errorf("sum %+v", s)
	}
	b.Goroutines = -1 // a failed scrape
	if s := sumEngines([]EngineSample{a, b}); s.Goroutines != -1 || s.Connections != 6 {
		t.Errorf("sum with a gap %+v", s)
	}
}

func TestSlope(t *testing.T) {
	xs := []float64{0, 100, 200, 300}
	ys := []float64{5000, 5000 + 900*100 + 3, 5000 + 900*200 - 3, 5000 + 900*300}
	if s := slope(xs, ys); math.Abs(s-900) > 0.1 {
		t.Errorf("slope %v", s)
	}
	if !math.IsNaN(slope([]float64{1, 1}, []float64{1, 2})) {
		t.Error("vertical slope is not NaN")
	}
	h := &HoldReport{Points: []MemPoint{{Connections: 0}, {Connections: 100}}}
	h.Points[1].Engine.RSS = 100 * 1000
	h.slopes()
	if float64(h.RSSPerConn) != 1000 {
		t.Errorf("two points: %v", h.RSSPerConn)
	}
}

func TestHistogramsTravel(t *testing.T) {
	r := newRecorder()
	r.startStage(1000, 5000)
	for at := int64(0); at < 10000; at += 10 {
		r.record(at, at+2_000_000) // 2 ms each
	}
	stage, interval := newHist(), newHist()
	if err := mergeEncoded(stage, r.takeStage()); err != nil {
		t.Fatal(err)
	}
	if err := mergeEncoded(interval, r.takeInterval()); err != nil {
		t.Fatal(err)
	}
	if stage.TotalCount() != 400 || interval.TotalCount() != 1000 {
		t.Errorf("stage %d (want 400 in the window), interval %d", stage.TotalCount(), interval.TotalCount())
	}
	if l := summarize(stage); math.Abs(l.P99-2) > 0.01 || l.Max < 2 {
		t.Errorf("summary %+v", l)
	}
	if mergeEncoded(stage, []byte("junk")) == nil {
		t.Error("junk decoded")
	}
}

func TestChartSVG(t *testing.T) {
	c := chart{title: "t", xlabel: "x", logY: true, lines: []line{{name: "p99", color: "#000", pts: [][2]float64{{0, 0.5}, {10, 80}}}},
		marks: []mark{{5, "phase"}}, hline: 50, hlabel: "50 ms"}
	svg := c.svg()
	if !strings.HasPrefix(svg, "<svg") || strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") || !strings.Contains(svg, "polyline") {
		t.Errorf("svg:\n%s", svg)
	}
	if got := (chart{}).svg(); !strings.Contains(got, "no data") {
		t.Errorf("empty chart: %s", got)
	}
	for _, r := range [][2]float64{{0, 1}, {0, 200000}, {3.5, 3.50001}, {-5, 5}} {
		ticks := niceTicks(r[0], r[1])
		if len(ticks) < 2 || ticks[0] > r[0] || ticks[len(ticks)-1] < r[1]*0.999 || len(ticks) > 12 {
			t.Errorf("ticks of %v: %v", r, ticks)
		}
	}
}

func TestNum(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 200000: "200,000", -1234567: "-1,234,567", 12.6: "13"} {
		if got := num(in); got != want {
			t.Errorf("num(%v) = %s, want %s", in, got, want)
		}
	}
}

func TestAppendUUIDAndJSONString(t *testing.T) {
	u := [16]byte{0xde, 0xad, 0xbe, 0xef, 0, 1, 0x40, 2, 0x80, 3, 4, 5, 6, 7, 8, 9}
	if got := string(appendUUID(nil, u)); got != "deadbeef-0001-4002-8003-040506070809" {
		t.Errorf("uuid %s", got)
	}
	if id, ok := parseUAID("deadbeef00014002800304050607080 9"); ok {
		t.Errorf("bad uaid parsed: %x", id)
	}
	if id, ok := parseUAID("deadbeef-0001-4002-8003-040506070809"); !ok || id != u {
		t.Errorf("dashed uaid: %x %v", id, ok)
	}
	if got := string(appendJSONString(nil, "a\"b\\c\n")); got != `"a\"b\\c\u000a"` {
		t.Errorf("json string %s", got)
	}
}
