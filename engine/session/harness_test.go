package session

import (
	"bytes"
	"encoding/json"
	"github.com/autopush-go/autopush/internal/protocol"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	gws "github.com/gobwas/ws"

	"github.com/autopush-go/autopush/engine/broadcast"
	"github.com/autopush-go/autopush/engine/ws"
)

// The tests drive a Session through its transitions with no socket: a
// fake clock, a fake registry (Host), and the effects read back from each
// Ctx.

const upgradeRequest = "GET / HTTP/1.1\r\nHost: push.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
	"Sec-WebSocket-Protocol: push-notification\r\n\r\n"

var testConfig = Config{
	HelloTimeout:   10 * time.Second,
	PingInterval:   5 * time.Minute,
	PongTimeout:    30 * time.Second,
	MinClientPing:  45 * time.Second,
	MaxUnacked:     3,
	MaxMessageSize: 4096,
	MessagePage:    10,
	CursorLag:      time.Minute,
}

// newTestMetrics registers every session counter under a name of its own.
func newTestMetrics() (*Metrics, *metrics.Set) {
	set := metrics.NewSet()
	var names MetricNames
	v := reflect.ValueOf(&names).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			f.SetString("session_test_" + strings.ToLower(v.Type().Field(i).Name))
		}
	}
	names.DeliveryAckBuckets = []float64{.01, 1}
	return NewMetrics(set, names), set
}

// harness is one session and the node around it.
type harness struct {
	t        testing.TB
	env      *Env
	set      *metrics.Set
	now      time.Time
	s        Session
	enrolls  int  // Enroll calls
	newer    bool // a newer connection holds the uaid: Enroll fails
	enrolled bool

	// The effects of the last transition.
	out   []byte
	jobs  []Job
	close bool
	due   int64
	x     Ctx // reused: a loop reuses its Ctx too
}

func (h *harness) Enroll() bool {
	h.enrolls++
	if h.newer {
		return false
	}
	h.enrolled = true
	return true
}

func (h *harness) Unenroll() { h.enrolled = false }

func newHarness(t testing.TB, mutate func(*Config)) *harness {
	m, set := newTestMetrics()
	h := &harness{t: t, set: set, now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	h.env = &Env{Config: testConfig, Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Epoch: h.now.Add(-time.Hour),
		Broadcasts: broadcast.New()}
	if mutate != nil {
		mutate(&h.env.Config)
	}
	h.env.Now = func() time.Time { return h.now }
	return h
}

// step runs one transition and keeps its effects.
func (h *harness) step(fn func(x *Ctx)) *harness {
	h.x.Reset()
	h.x.Env, h.x.Host = h.env, h
	fn(&h.x)
	h.out, h.jobs, h.close, h.due = h.x.Out, h.x.Jobs, h.x.Close, h.x.Due
	return h
}

// send feeds a client text message as one masked frame.
func (h *harness) send(msg string) *harness {
	return h.feed(clientFrame(gws.OpText, []byte(msg)))
}

// feed hands raw client bytes to Consume; all must be consumed.
func (h *harness) feed(b []byte) *harness {
	h.t.Helper()
	b = bytes.Clone(b)
	var n int
	h.step(func(x *Ctx) { n = h.s.Consume(x, b) })
	if n != len(b) {
		h.t.Fatalf("consumed %d of %d bytes", n, len(b))
	}
	return h
}

func clientFrame(op gws.OpCode, payload []byte) []byte {
	f := gws.MaskFrameInPlace(gws.NewFrame(op, true, bytes.Clone(payload)))
	var b bytes.Buffer
	if err := gws.WriteFrame(&b, f); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// open upgrades a new session to the websocket (state hello).
func (h *harness) open() *harness {
	h.t.Helper()
	h.step(h.s.Open)
	h.feed([]byte(upgradeRequest))
	if !bytes.HasPrefix(h.out, []byte("HTTP/1.1 101 ")) {
		h.t.Fatalf("upgrade answered %q", h.out)
	}
	return h
}

// ready opens a session and completes its hello as user agent uaid.
func (h *harness) ready(uaid [16]byte) *harness {
	h.t.Helper()
	// A returning user agent (a new one's hello reads nothing more:
	// TestHelloNewAndKnown).
	h.open().send(`{"messageType":"hello","uaid":"` + protocol.FormatUAID(uaid) + `","use_webpush":true}`)
	job := h.job(JobHello)
	h.done(&Result{Job: job, UAID: uaid})
	if m := h.message(); m["messageType"] != "hello" || m["status"] != 200.0 {
		h.t.Fatalf("hello reply %v", m)
	}
	// The hello's storage check finds nothing.
	h.done(&Result{Job: h.job(JobCheck)})
	return h
}

func (h *harness) done(r *Result) *harness { return h.step(func(x *Ctx) { h.s.Done(x, r) }) }

// job returns the last transition's only job, which must be of kind k.
func (h *harness) job(k JobKind) Job {
	h.t.Helper()
	if len(h.jobs) != 1 || h.jobs[0].Kind != k {
		h.t.Fatalf("jobs %+v, want one of kind %d", h.jobs, k)
	}
	return h.jobs[0]
}

// noJobs fails if the last transition asked for storage work.
func (h *harness) noJobs() {
	h.t.Helper()
	if len(h.jobs) != 0 {
		h.t.Fatalf("unexpected jobs %+v", h.jobs)
	}
}

// frames parses what the last transition wrote as server frames.
func (h *harness) frames() []gws.Frame {
	h.t.Helper()
	var out []gws.Frame
	r := bytes.NewReader(h.out)
	for r.Len() > 0 {
		hdr, err := gws.ReadHeader(r)
		if err != nil || hdr.Length > int64(r.Len()) {
			h.t.Fatalf("server wrote a bad frame: %v (%q)", err, h.out)
		}
		if hdr.Masked {
			h.t.Fatal("server frame masked")
		}
		f := gws.Frame{Header: hdr, Payload: make([]byte, hdr.Length)}
		r.Read(f.Payload)
		out = append(out, f)
	}
	return out
}

// messages decodes the text frames the last transition wrote.
func (h *harness) messages() []map[string]any {
	h.t.Helper()
	var out []map[string]any
	for _, f := range h.frames() {
		if f.Header.OpCode != gws.OpText {
			h.t.Fatalf("frame op %v, want text", f.Header.OpCode)
		}
		out = append(out, h.decode(f.Payload))
	}
	return out
}

func (h *harness) decode(p []byte) map[string]any {
	h.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		h.t.Fatalf("bad JSON %q", p)
	}
	return m
}

// message is the one message the last transition wrote.
func (h *harness) message() map[string]any {
	h.t.Helper()
	ms := h.messages()
	if len(ms) != 1 {
		h.t.Fatalf("wrote %d messages, want 1: %q", len(ms), h.out)
	}
	return ms[0]
}

// closedWith checks the last transition sent a close frame with code and
// asked for the close.
func (h *harness) closedWith(code ws.StatusCode) {
	h.t.Helper()
	fs := h.frames()
	if len(fs) == 0 || fs[len(fs)-1].Header.OpCode != gws.OpClose {
		h.t.Fatalf("no close frame in %q", h.out)
	}
	got, _ := gws.ParseCloseFrameData(fs[len(fs)-1].Payload)
	if got != code || !h.close {
		h.t.Fatalf("closed with %d (close asked: %v), want %d", got, h.close, code)
	}
	if !h.s.Closing() {
		h.t.Fatal("session not closing")
	}
}

// wentAway checks the last transition sent the node's 1001 close frame
// and keeps the connection open for the client's answer (Shutdown).
func (h *harness) wentAway() {
	h.t.Helper()
	fs := h.frames()
	if len(fs) == 0 || fs[len(fs)-1].Header.OpCode != gws.OpClose {
		h.t.Fatalf("no close frame in %q", h.out)
	}
	if got, _ := gws.ParseCloseFrameData(fs[len(fs)-1].Payload); got != ws.StatusGoingAway || h.close || h.s.state != stGoingAway {
		h.t.Fatalf("closed with %d (close asked: %v, state %d), want 1001 and the connection open", got, h.close, h.s.state)
	}
}

// counter reads a session counter by its field name in MetricNames.
func (h *harness) counter(field string) uint64 {
	return h.set.GetOrCreateCounter("session_test_" + strings.ToLower(field)).Get()
}

func (h *harness) errorsOf(kind string) uint64 {
	return h.set.GetOrCreateCounter(`session_test_errors{kind="` + kind + `"}`).Get()
}
