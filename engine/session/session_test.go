package session

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

var testUAID = [16]byte(uuid.MustParse("f4b0b3c1-8d1a-4c2e-9a5b-0c1d2e3f4a5b"))

func TestUpgrade(t *testing.T) {
	t.Run("accepted", func(t *testing.T) {
		h := newHarness(t, nil).open()
		if !bytes.Contains(h.out, []byte("Sec-WebSocket-Protocol: push-notification")) || h.counter("Upgrades") != 1 {
			t.Fatalf("upgrade %q", h.out)
		}
		if h.s.state != stHello || h.close {
			t.Fatalf("state %d close %v", h.s.state, h.close)
		}
	})
	t.Run("partial request waits", func(t *testing.T) {
		h := newHarness(t, nil)
		h.step(h.s.Open)
		var n int
		h.step(func(x *Ctx) { n = h.s.Consume(x, []byte(upgradeRequest[:40])) })
		if n != 0 || len(h.out) != 0 || h.close {
			t.Fatalf("partial: consumed %d, wrote %q", n, h.out)
		}
	})
	t.Run("bad request", func(t *testing.T) {
		h := newHarness(t, nil)
		h.step(h.s.Open)
		h.feed([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		if !bytes.HasPrefix(h.out, []byte("HTTP/1.1 4")) || !h.close || h.counter("UpgradesBad") != 1 {
			t.Fatalf("bad upgrade: %q close %v", h.out, h.close)
		}
	})
	for name, refuse := range map[string]func(*Env){
		"draining": func(e *Env) { e.Draining.Store(true) },
		"full":     func(e *Env) { e.Full = func() bool { return true } },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, nil)
			refuse(h.env)
			h.step(h.s.Open)
			h.feed([]byte(upgradeRequest))
			if !bytes.HasPrefix(h.out, []byte("HTTP/1.1 503 ")) || !bytes.Contains(h.out, []byte("Retry-After: 30")) || !h.close {
				t.Fatalf("refused upgrade: %q", h.out)
			}
			if h.counter("UpgradesRefused") != 1 {
				t.Fatal("refusal not counted")
			}
		})
	}
}

func TestHelloNewAndKnown(t *testing.T) {
	// A new user agent's hello is answered at once: its uaid is made
	// here, and nothing is written until it registers (the reference's
	// deferred user record).
	h := newHarness(t, nil).open()
	h.send(`{"messageType":"hello","use_webpush":true}`)
	h.noJobs()
	m := h.message()
	uaid, ok := protocol.ParseUAID(fmt.Sprint(m["uaid"]))
	if !ok || uaid == ([16]byte{}) || uaid[6]>>4 != 4 || m["status"] != 200.0 || h.s.UAID() != uaid {
		t.Fatalf("hello reply %v, session uaid %x", m, h.s.UAID())
	}
	if !h.enrolled || h.s.Registered() || h.counter("HelloNewUAID") != 1 {
		t.Fatalf("enrolled %v registered %v: want enrolled, no record to clear yet", h.enrolled, h.s.Registered())
	}
	if h.due != h.now.Add(testConfig.PingInterval).UnixMilli() {
		t.Fatalf("due %d", h.due)
	}
	// Its first register writes the record of this connection, and counts
	// no channels (it has none); once done, the session's leave clears it.
	h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
	j := h.job(JobRegister)
	if !j.NewUser || j.ConnectedAt != h.s.ConnectedAt() || j.UAID != uaid || j.MaxChannels != 0 {
		t.Fatalf("a new user agent's first register: %+v", j)
	}
	h.done(&Result{Job: j, Err: errors.New("timeout")})
	if m := h.message(); m["status"] != 500.0 || h.s.Registered() {
		t.Fatalf("failed first register: %v, registered %v", m, h.s.Registered())
	}
	h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
	j = h.job(JobRegister)
	if !j.NewUser {
		t.Fatalf("after a failed first register the record is still owed: %+v", j)
	}
	h.done(&Result{Job: j, Endpoint: "https://push.example/x"})
	if m := h.message(); m["status"] != 200.0 || !h.s.Registered() {
		t.Fatalf("first register: %v, registered %v", m, h.s.Registered())
	}
	h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
	if j := h.job(JobRegister); j.NewUser {
		t.Fatalf("the record is written: %+v", j)
	}
	if _, ok := h.s.Close(h.env, 0); !ok {
		t.Fatal("a registered new user agent leaves nothing to clear")
	}
	// One that never registers leaves nothing.
	h = newHarness(t, nil).open()
	h.send(`{"messageType":"hello","use_webpush":true}`)
	h.message()
	if _, ok := h.s.Close(h.env, 0); ok {
		t.Fatal("a hello without a register has a leave: its record was never written")
	}

	// A known uaid is enrolled from the hello on, before storage answers.
	h = newHarness(t, nil).open()
	h.send(`{"messageType":"hello","uaid":"` + protocol.FormatUAID(testUAID) + `","use_webpush":true}`)
	if job := h.job(JobHello); job.UAID != testUAID || !h.enrolled {
		t.Fatalf("known uaid: job %+v enrolled %v", job, h.enrolled)
	}
	if got := deliver(h, "early"); got != Busy {
		t.Fatalf("a push during the hello was %v, want busy (check owed)", got)
	}
	h.done(&Result{Job: Job{Kind: JobHello}, UAID: testUAID, Cursor: 42})
	if h.s.cursor != 42 || h.counter("HelloNewUAID") != 0 {
		t.Fatalf("cursor %d", h.s.cursor)
	}
	h.job(JobCheck)
}

func TestHelloFailures(t *testing.T) {
	cases := []struct {
		name  string
		setup func(*harness)
		res   Result
		code  ws.StatusCode
	}{
		{"storage down", nil, Result{Err: errors.New("timeout")}, ws.StatusTryAgainLater},
		{"newer connection in storage", nil, Result{Err: storage.ErrConflict}, ws.StatusPolicyViolation},
		{"newer connection on this node", func(h *harness) { h.newer = true }, Result{UAID: testUAID}, ws.StatusPolicyViolation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil).open()
			h.send(`{"messageType":"hello","uaid":"` + protocol.FormatUAID(testUAID) + `"}`)
			if tc.setup != nil {
				tc.setup(h)
			}
			tc.res.Job = h.job(JobHello)
			h.done(&tc.res)
			h.closedWith(tc.code)
			h.noJobs()
			if h.errorsOf("storage") != 1 || h.s.Registered() {
				t.Fatal("hello failure not counted, or registered")
			}
		})
	}
	t.Run("draining", func(t *testing.T) {
		h := newHarness(t, nil).open()
		h.send(`{"messageType":"hello","uaid":"` + protocol.FormatUAID(testUAID) + `"}`)
		h.env.Draining.Store(true)
		h.done(&Result{Job: h.job(JobHello), UAID: testUAID})
		if ms := h.frames(); len(ms) != 2 || ms[0].Header.OpCode != gws.OpText {
			t.Fatalf("want the hello reply then a close: %q", h.out)
		}
		h.wentAway()
		if !h.s.Registered() {
			t.Fatal("a hello closed by the drain must still leave (clear its node_id)")
		}
		// A new user agent's too, with nothing to clear.
		h = newHarness(t, nil).open()
		h.env.Draining.Store(true)
		h.send(`{"messageType":"hello"}`)
		if ms := h.frames(); len(ms) != 2 || ms[0].Header.OpCode != gws.OpText {
			t.Fatalf("want the hello reply then a close: %q", h.out)
		}
		h.wentAway()
		h.noJobs()
	})
	t.Run("protocol", func(t *testing.T) {
		h := newHarness(t, nil).open()
		h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
		h.closedWith(ws.StatusPolicyViolation)
		if h.errorsOf("no_hello") != 1 {
			t.Fatal("not counted")
		}
		h = newHarness(t, nil).ready(testUAID)
		h.send(`{"messageType":"hello"}`)
		h.closedWith(ws.StatusPolicyViolation)
	})
}

func TestRegisterUnregister(t *testing.T) {
	h := newHarness(t, nil).ready(testUAID)
	chid := uuid.NewString()
	h.send(`{"messageType":"register","channelID":"` + chid + `"}`)
	j := h.job(JobRegister)
	if j.CHID != [16]byte(uuid.MustParse(chid)) || j.ChannelID != chid || j.Key != nil || len(h.out) != 0 {
		t.Fatalf("register job %+v", j)
	}
	h.done(&Result{Job: j, Endpoint: "https://push.example/wpush/v1/abc"})
	if m := h.message(); m["status"] != 200.0 || m["pushEndpoint"] != "https://push.example/wpush/v1/abc" || m["channelID"] != chid {
		t.Fatalf("register reply %v", m)
	}
	h.done(&Result{Job: j, Err: errors.New("down")})
	if m := h.message(); m["status"] != 500.0 || m["pushEndpoint"] != nil {
		t.Fatalf("failed register reply %v", m)
	}

	key := "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4="
	h.send(`{"messageType":"register","channelID":"` + chid + `","key":"` + key + `"}`)
	if j := h.job(JobRegister); len(j.Key) != 65 {
		t.Fatalf("v2 key %d bytes", len(j.Key))
	}
	h.send(`{"messageType":"register","channelID":"` + chid + `","key":"not-a-key"}`)
	h.noJobs()
	if m := h.message(); m["status"] != 400.0 || h.close || h.errorsOf("bad_key") != 1 {
		t.Fatalf("bad key: %v (close %v)", m, h.close)
	}

	h.send(`{"messageType":"unregister","channelID":"` + chid + `","code":200}`)
	u := h.job(JobUnregister)
	h.done(&Result{Job: u})
	if m := h.message(); m["messageType"] != "unregister" || m["status"] != 200.0 || m["channelID"] != chid {
		t.Fatalf("unregister reply %v", m)
	}
	h.done(&Result{Job: u, Err: errors.New("down")})
	if m := h.message(); m["status"] != 500.0 {
		t.Fatalf("failed unregister reply %v", m)
	}
	if h.counter("Registers") != 2 || h.counter("Unregisters") != 1 {
		t.Fatalf("registers %d unregisters %d", h.counter("Registers"), h.counter("Unregisters"))
	}

	h.send(`{"messageType":"register","channelID":"nope"}`)
	h.closedWith(ws.StatusUnsupportedData)
	if h.errorsOf("bad_channel") != 1 {
		t.Fatal("bad channel not counted")
	}
}

// deliver routes a direct notification with version v to h's session.
func deliver(h *harness, v string) Outcome {
	n := protocol.Notification{ChannelID: "3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f", Version: v, TTL: 60, SortKey: uint64(h.now.UnixNano())}
	var got Outcome
	h.step(func(x *Ctx) { got = h.s.Deliver(x, &n) })
	return got
}

func ackMsg(versions ...string) string {
	var ups []string
	for _, v := range versions {
		ups = append(ups, `{"channelID":"3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f","version":"`+v+`","code":100}`)
	}
	return `{"messageType":"ack","updates":[` + strings.Join(ups, ",") + `]}`
}

func TestDeliverFlowControlAndAck(t *testing.T) {
	h := newHarness(t, nil)
	h.step(h.s.Open)
	if got := deliver(h, "v"); got != NotHere {
		t.Fatalf("before hello: %v", got)
	}
	h.ready(testUAID)
	for i := range testConfig.MaxUnacked {
		if got := deliver(h, fmt.Sprint("v", i)); got != Delivered {
			t.Fatalf("delivery %d: %v", i, got)
		}
		if m := h.message(); m["messageType"] != "notification" || m["version"] != fmt.Sprint("v", i) {
			t.Fatalf("notification %v", m)
		}
		if h.x.SentDirect != 1 || h.x.Pending != 1 {
			t.Fatalf("sent %d pending %d", h.x.SentDirect, h.x.Pending)
		}
	}
	if h.env.InFlight.Load() != int64(testConfig.MaxUnacked) {
		t.Fatalf("in flight %d", h.env.InFlight.Load())
	}
	if got := deliver(h, "over"); got != Busy || len(h.out) != 0 {
		t.Fatalf("beyond max-unacked: %v, wrote %q", got, h.out)
	}
	h.now = h.now.Add(20 * time.Millisecond)
	h.send(ackMsg("v0", "v0", "never-sent"))
	h.noJobs()
	if h.env.InFlight.Load() != int64(testConfig.MaxUnacked-1) || h.counter("Acked") != 1 {
		t.Fatalf("after one ack: in flight %d, acked %d", h.env.InFlight.Load(), h.counter("Acked"))
	}
	// The busy delivery left a storage check owed: it runs once the rest
	// is acked, not before.
	h.send(ackMsg("v1"))
	h.noJobs()
	h.send(ackMsg("v2"))
	h.job(JobCheck)
	if h.env.InFlight.Load() != 0 {
		t.Fatalf("in flight %d", h.env.InFlight.Load())
	}

	h.env.Draining.Store(true)
	h.done(&Result{Job: Job{Kind: JobCheck}})
	if got := deliver(h, "late"); got != Busy {
		t.Fatalf("draining: %v, want busy", got)
	}
}

func storedMsg(version, topic string, sortKey uint64, ttl int64) storage.Message {
	return storage.Message{CHID: uuid.MustParse("3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f"), Version: version, Topic: topic,
		SortKey: sortKey, TTL: ttl, Data: "ZGF0YQ", Headers: map[string]string{"encoding": "aes128gcm"}}
}

func TestStoredDrain(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxUnacked = 2 })
	h.ready(testUAID)
	if got := h.askCheck(); got != Checking {
		t.Fatalf("check when idle: %v", got)
	}
	check := h.job(JobCheck)
	if check.Page != 2 || check.Cursor != 0 {
		t.Fatalf("check %+v", check)
	}
	if got := h.askCheck(); got != CheckLater {
		t.Fatalf("check while checking: %v, want check later", got)
	}
	old := uint64(h.now.Add(-2 * time.Hour).UnixNano())
	expired := storedMsg("gone", "", old, 60)
	topic := storedMsg("t1", "weather", old+1, 3600*4)
	stamp := storedMsg("s1", "", old+2, 3600*4)
	h.done(&Result{Job: check, Topics: []storage.Message{topic}, Stamps: []storage.Message{expired, stamp}, More: true})
	ms := h.messages()
	if len(ms) != 2 || ms[0]["version"] != "t1" || ms[1]["version"] != "s1" || ms[1]["data"] != "ZGF0YQ" {
		t.Fatalf("page %v: topic first, expired skipped", ms)
	}
	if h.counter("Expired") != 1 || h.x.SentStored != 2 {
		t.Fatalf("expired %d sent %d", h.counter("Expired"), h.x.SentStored)
	}
	if got := deliver(h, "d"); got != Busy {
		t.Fatalf("delivery while a page is unacked: %v", got)
	}
	h.send(ackMsg("t1"))
	if d := h.job(JobDelete); d.Message != topic.Key() || d.UAID != testUAID {
		t.Fatalf("delete %+v", d)
	}
	h.send(ackMsg("s1"))
	h.job(JobDelete)
	// The next page waits for both deletes.
	h.done(&Result{Job: Job{Kind: JobDelete}})
	h.noJobs()
	h.done(&Result{Job: Job{Kind: JobDelete}})
	if len(h.jobs) != 2 || h.jobs[0].Kind != JobCursor || h.jobs[0].Cursor != stamp.SortKey || h.jobs[1].Kind != JobCheck {
		t.Fatalf("after the page: %+v, want the cursor past s1, then the next page", h.jobs)
	}
	if h.jobs[1].Cursor != stamp.SortKey {
		t.Fatalf("next page reads after %d", h.jobs[1].Cursor)
	}
	// A page that ends the backlog leaves the flow idle.
	h.done(&Result{Job: h.jobs[1]})
	h.noJobs()
	if h.s.flow != nil {
		t.Fatal("flow kept while idle")
	}
	// A check failure keeps everything stored, and reads again from Tick
	// once the node holds storage reachable: a message stored meanwhile
	// does not wait for the client's next reconnect.
	h.askCheck()
	h.done(&Result{Job: Job{Kind: JobCheck}, Err: errors.New("down")})
	if len(h.out) != 0 || h.close || h.s.flow == nil || !h.s.flow.retry {
		t.Fatalf("failed check: wrote %q close %v, retry owed %v", h.out, h.close, h.s.flow != nil && h.s.flow.retry)
	}
	if want := h.now.Add(checkRetry).UnixMilli(); h.due != want {
		t.Fatalf("failed check: next tick at %d, want %d (in %s)", h.due, want, checkRetry)
	}
	h.env.StorageDown.Store(true)
	h.now = h.now.Add(checkRetry)
	h.step(func(x *Ctx) { h.s.Tick(x) })
	h.noJobs()
	if want := h.now.Add(checkRetry).UnixMilli(); h.due != want || !h.s.flow.retry {
		t.Fatalf("storage down at the retry: next tick at %d, want %d; retry owed %v", h.due, want, h.s.flow.retry)
	}
	h.env.StorageDown.Store(false)
	h.now = h.now.Add(checkRetry)
	h.step(func(x *Ctx) { h.s.Tick(x) })
	h.job(JobCheck)
	if h.s.flow.retry || h.due <= h.now.Add(checkRetry).UnixMilli() {
		t.Fatalf("retried: retry still owed %v, next tick at %d (want the keepalive's)", h.s.flow.retry, h.due)
	}
	h.done(&Result{Job: Job{Kind: JobCheck}})
	if h.s.flow != nil {
		t.Fatal("flow kept while idle after the retried read")
	}
}

func (h *harness) askCheck() Outcome {
	var got Outcome
	h.step(func(x *Ctx) { got = h.s.Check(x) })
	return got
}

// The cursor never comes closer to now than CursorLag: a message stamped
// earlier may still be on its way to storage.
func TestCursorLag(t *testing.T) {
	h := newHarness(t, nil).ready(testUAID)
	h.askCheck()
	recent := storedMsg("r", "", uint64(h.now.Add(-time.Second).UnixNano()), 60)
	h.done(&Result{Job: h.job(JobCheck), Stamps: []storage.Message{recent}})
	h.send(ackMsg("r"))
	h.done(&Result{Job: Job{Kind: JobDelete}})
	lag := uint64(h.now.Add(-testConfig.CursorLag).UnixNano())
	if j := h.job(JobCursor); j.Cursor != lag {
		t.Fatalf("cursor %d, want now-lag %d", j.Cursor, lag)
	}
}

func TestTimers(t *testing.T) {
	h := newHarness(t, nil)
	h.step(h.s.Open)
	if h.due != h.now.Add(testConfig.HelloTimeout).UnixMilli() {
		t.Fatalf("hello deadline %d", h.due)
	}
	h.now = h.now.Add(testConfig.HelloTimeout)
	h.step(h.s.Tick)
	if !h.close || h.errorsOf("hello_timeout") != 1 {
		t.Fatal("no hello in time must close")
	}

	h = newHarness(t, nil).ready(testUAID)
	h.now = h.now.Add(time.Minute)
	h.send(`{}`) // activity
	h.now = h.now.Add(4 * time.Minute)
	h.step(h.s.Tick)
	if len(h.out) != 0 || h.due != h.now.Add(time.Minute).UnixMilli() {
		t.Fatalf("tick after activity: wrote %q, due in %dms", h.out, h.due-h.now.UnixMilli())
	}
	h.now = h.now.Add(time.Minute)
	h.step(h.s.Tick)
	if fs := h.frames(); len(fs) != 1 || fs[0].Header.OpCode != gws.OpPing || h.due != h.now.Add(testConfig.PongTimeout).UnixMilli() {
		t.Fatalf("keepalive ping: %q due %d", h.out, h.due)
	}
	h.feed(clientFrame(gws.OpPong, nil))
	h.now = h.now.Add(testConfig.PongTimeout)
	h.step(h.s.Tick)
	if h.close {
		t.Fatal("an answered ping must not close")
	}
	h.now = h.now.Add(testConfig.PingInterval)
	h.step(h.s.Tick)
	h.now = h.now.Add(testConfig.PongTimeout)
	h.step(h.s.Tick)
	h.closedWith(ws.StatusGoingAway)
	if h.errorsOf("pong_timeout") != 1 || h.counter("Pings") != 2 {
		t.Fatal("pong timeout not counted")
	}
}

func TestClientPingAndFrames(t *testing.T) {
	h := newHarness(t, nil).ready(testUAID)
	h.send(`{"messageType":"ping"}`)
	if m := h.message(); len(m) != 0 {
		t.Fatalf("ping reply %v", m)
	}
	h.feed(clientFrame(gws.OpPing, []byte("hi")))
	if fs := h.frames(); len(fs) != 1 || fs[0].Header.OpCode != gws.OpPong || string(fs[0].Payload) != "hi" {
		t.Fatalf("pong %q", h.out)
	}
	// A fragmented message is reassembled; the assembler is dropped after.
	first := gws.MaskFrameInPlace(gws.NewFrame(gws.OpText, false, []byte(`{"messageT`)))
	rest := gws.MaskFrameInPlace(gws.NewFrame(gws.OpContinuation, true, []byte(`ype":"nack","version":"x"}`)))
	var b bytes.Buffer
	gws.WriteFrame(&b, first)
	h.feed(b.Bytes())
	if h.s.asm == nil {
		t.Fatal("no assembler while fragmented")
	}
	b.Reset()
	gws.WriteFrame(&b, rest)
	h.feed(b.Bytes())
	if h.s.asm != nil || h.counter("Nacked") != 1 || h.close {
		t.Fatalf("fragmented nack: asm %v nacked %d", h.s.asm, h.counter("Nacked"))
	}
	h.send(`{"messageType":"ping"}`)
	h.closedWith(4774)
	if h.errorsOf("ping_abuse") != 1 {
		t.Fatal("ping abuse not counted")
	}
	// Input after the close is consumed and ignored.
	h.send(`{"messageType":"ping"}`)
	if len(h.out) != 0 {
		t.Fatalf("wrote after closing: %q", h.out)
	}
}

func TestMalformedInputCloses(t *testing.T) {
	cases := []struct {
		name  string
		input []byte
		code  ws.StatusCode
		kind  string
	}{
		{"bad json", clientFrame(gws.OpText, []byte(`{"messageType":"ping",`)), ws.StatusUnsupportedData, "bad_json"},
		{"unknown type", clientFrame(gws.OpText, []byte(`{"messageType":"subscribe"}`)), ws.StatusUnsupportedData, "unknown_type"},
		{"binary", clientFrame(gws.OpBinary, []byte{1}), ws.StatusUnsupportedData, "binary_frame"},
		{"too large", clientFrame(gws.OpText, bytes.Repeat([]byte("a"), 5000)), ws.StatusMessageTooBig, "too_large"},
		{"unmasked", []byte{0x81, 0x02, '{', '}'}, ws.StatusProtocolError, "bad_frame"},
		{"close", clientFrame(gws.OpClose, gws.NewCloseFrameBody(1000, "")), ws.StatusNormalClosure, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil).ready(testUAID)
			h.feed(tc.input)
			h.closedWith(tc.code)
			if tc.kind != "" && h.errorsOf(tc.kind) != 1 {
				t.Fatalf("%s not counted", tc.kind)
			}
		})
	}
}

func TestEvictSlowReaderOverloaded(t *testing.T) {
	h := newHarness(t, nil).ready(testUAID)
	var got Outcome
	h.step(func(x *Ctx) { got = h.s.Evict(x, h.s.connectedAt-1) })
	if got != NotHere || h.close {
		t.Fatalf("evict by an older connection: %v", got)
	}
	h.step(func(x *Ctx) { got = h.s.Evict(x, h.s.connectedAt) })
	if got != Evicted || h.counter("Evictions") != 1 {
		t.Fatalf("evict: %v", got)
	}
	h.closedWith(4000)

	h = newHarness(t, nil).ready(testUAID)
	h.step(h.s.SlowReader)
	if len(h.out) != 0 || !h.close || h.errorsOf("slow_reader") != 1 {
		t.Fatalf("slow reader: wrote %q", h.out)
	}

	h = newHarness(t, nil).ready(testUAID)
	h.step(h.s.Overloaded)
	h.closedWith(ws.StatusTryAgainLater)
	if h.counter("Overloaded") != 1 {
		t.Fatal("overload not counted")
	}
}

func TestCloseLeavesUnackedDirect(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxUnacked = 10 })
	h.ready(testUAID)
	deliver(h, "keep")
	n := protocol.Notification{ChannelID: "3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f", Version: "ttl0", TTL: 0}
	h.step(func(x *Ctx) { h.s.Deliver(x, &n) })
	h.now = h.now.Add(30 * time.Second)
	deliver(h, "acked")
	h.send(ackMsg("acked"))
	deliver(h, "written")
	deliver(h, "unsent") // its write is the one that fails
	leave, ok := h.s.Close(h.env, 1)
	if !ok || leave.UAID != testUAID || leave.ConnectedAt != h.s.connectedAt {
		t.Fatalf("leave %+v %v", leave, ok)
	}
	var kept []string
	for _, m := range leave.Keep {
		kept = append(kept, fmt.Sprint(m.Version, "/", m.TTL))
	}
	if got := strings.Join(kept, " "); got != "keep/30 written/60" {
		t.Fatalf("kept %q: want the written, unacked, storable ones with the TTL they have left", got)
	}
	if h.env.InFlight.Load() != 0 || !h.s.Closed() {
		t.Fatalf("in flight %d after close", h.env.InFlight.Load())
	}
	// Nothing runs once closed.
	h.done(&Result{Job: Job{Kind: JobCheck}})
	if got := deliver(h, "after"); got != NotHere || len(h.out) != 0 {
		t.Fatalf("after close: %v, wrote %q", got, h.out)
	}

	// A session that never finished its hello leaves nothing to do.
	h = newHarness(t, nil).open()
	if _, ok := h.s.Close(h.env, 0); ok {
		t.Fatal("leave for an unregistered session")
	}

	// The TTL left is what is stored: a direct message restamped later.
	h = newHarness(t, nil).ready(testUAID)
	deliver(h, "old")
	h.now = h.now.Add(45 * time.Second)
	leave, _ = h.s.Close(h.env, 0)
	if len(leave.Keep) != 1 || leave.Keep[0].TTL != 15 {
		t.Fatalf("restamped %+v, want 15s left", leave.Keep)
	}
}

// Results for a session that is closing write nothing: no data frame ever
// follows a close frame.
func TestNothingWrittenWhileClosing(t *testing.T) {
	h := newHarness(t, nil).ready(testUAID)
	h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
	reg := h.job(JobRegister)
	h.askCheck()
	check := h.job(JobCheck)
	h.step(func(x *Ctx) { h.s.Evict(x, h.s.connectedAt) })
	h.closedWith(4000)
	for _, r := range []*Result{{Job: reg, Endpoint: "x"}, {Job: check, Stamps: []storage.Message{storedMsg("s", "", 1, 60)}}} {
		h.done(r)
		if len(h.out) != 0 || len(h.jobs) != 0 {
			t.Fatalf("closing session wrote %q / asked %+v", h.out, h.jobs)
		}
	}
	for name, fn := range map[string]func(x *Ctx){
		"tick": h.s.Tick, "shutdown": h.s.Shutdown, "slow": h.s.SlowReader,
		"deliver": func(x *Ctx) { deliver(h, "x") }, "check": func(x *Ctx) { h.s.Check(x) },
	} {
		h.step(fn)
		if len(h.out) != 0 {
			t.Fatalf("%s wrote %q while closing", name, h.out)
		}
	}
}

// TestRegisterNilChannel: the nil UUID is an invalid channelID (no store
// takes it): the connection closes with 1003, as for any other invalid
// one, and no storage call is made.
func TestRegisterNilChannel(t *testing.T) {
	for _, typ := range []string{"register", "unregister"} {
		h := newHarness(t, nil).ready(testUAID)
		h.send(`{"messageType":"` + typ + `","channelID":"00000000-0000-0000-0000-000000000000"}`)
		h.noJobs()
		h.closedWith(ws.StatusUnsupportedData)
		if h.errorsOf("bad_channel") != 1 {
			t.Fatalf("%s: bad channel not counted", typ)
		}
	}
}

// TestChannelLimit: the first register counts the user's channels; from
// then on the session refuses registers past max-channels with status 429
// without a storage call; an unregister makes room again.
func TestChannelLimit(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxChannels = 3 }).ready(testUAID)
	register := func() Job {
		t.Helper()
		h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
		return h.job(JobRegister)
	}
	j := register()
	if j.MaxChannels != 3 {
		t.Fatalf("first register does not count: %+v", j)
	}
	h.done(&Result{Job: j, Channels: 1, Endpoint: "https://push.example/1"})
	if m := h.message(); m["status"] != 200.0 {
		t.Fatalf("reply %v", m)
	}
	j = register()
	if j.MaxChannels != 0 {
		t.Fatalf("count known, register counts again: %+v", j)
	}
	h.done(&Result{Job: j, Endpoint: "https://push.example/2"})
	h.message()
	// 3 channels now: the next is refused at once.
	h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
	h.noJobs()
	if m := h.message(); m["status"] != float64(StatusTooManyChannels) || m["pushEndpoint"] != nil || h.close {
		t.Fatalf("over the limit: %v (close %v)", m, h.close)
	}
	if h.errorsOf("too_many_channels") != 1 {
		t.Fatal("refusal not counted")
	}
	h.send(`{"messageType":"unregister","channelID":"` + uuid.NewString() + `"}`)
	h.done(&Result{Job: h.job(JobUnregister)})
	h.message()
	j = register()
	h.done(&Result{Job: j, Endpoint: "https://push.example/3"})
	if m := h.message(); m["status"] != 200.0 {
		t.Fatalf("after an unregister: %v", m)
	}

	// A worker that finds the user at the limit added nothing: 429.
	h = newHarness(t, func(c *Config) { c.MaxChannels = 3 }).ready(testUAID)
	j = register()
	h.done(&Result{Job: j, Channels: 3, Full: true})
	if m := h.message(); m["status"] != float64(StatusTooManyChannels) {
		t.Fatalf("full store: %v", m)
	}
	h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
	h.noJobs()
	h.message()

	// Registers waiting for storage are bounded, and count against the
	// limit.
	h = newHarness(t, func(c *Config) { c.MaxChannels = 1000 }).ready(testUAID)
	for range maxRegsInFlight {
		register()
	}
	h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
	h.noJobs()
	if m := h.message(); m["status"] != float64(StatusTooManyChannels) {
		t.Fatalf("register %d in flight: %v", maxRegsInFlight+1, m)
	}
}

// TestChannelLimitNewUserAgent: a uaid made by the hello has no channels,
// so the session counts from zero without asking storage, and still
// refuses the register past max-channels.
func TestChannelLimitNewUserAgent(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxChannels = 2 }).open()
	h.send(`{"messageType":"hello","use_webpush":true}`)
	h.noJobs()
	h.message()
	for range 2 {
		h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
		j := h.job(JobRegister)
		if j.MaxChannels != 0 {
			t.Fatalf("register of a new user agent asks for a count: %+v", j)
		}
		h.done(&Result{Job: j, Endpoint: "https://push.example/x"})
		if m := h.message(); m["status"] != 200.0 {
			t.Fatalf("register reply %v", m)
		}
	}
	h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
	h.noJobs()
	if m := h.message(); m["status"] != float64(StatusTooManyChannels) {
		t.Fatalf("register past max-channels: %v", m)
	}
}

// TestStale: a push naming a connection (a cached route) is refused
// unless it names this one and the client has sent no unregister on it.
func TestStale(t *testing.T) {
	h := newHarness(t, nil)
	h.ready([16]byte{7})
	at := h.s.ConnectedAt()
	if at == 0 || h.s.Stale(at) || h.s.Stale(0) {
		t.Fatalf("fresh connection %d: stale for itself or for no expectation", at)
	}
	if !h.s.Stale(at-1) || !h.s.Stale(at+1) {
		t.Fatal("another connection's connected_at not stale")
	}
	h.send(`{"messageType":"unregister","channelID":"3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f"}`)
	if !h.s.Stale(at) {
		t.Fatal("stale not set by an unregister")
	}
	if h.s.Stale(0) {
		t.Fatal("a push expecting no connection refused")
	}
}

// TestTrackedFates: a tracked notification's write and ack become fate
// jobs (direct: JobFate transmitted, then delivered; stored: one JobFate
// transmitted for the page's, then the delete settles each), and
// untracked ones ask for none. The client sees a tracked one's fate id
// as reliability_id, and no such member in an untracked one.
func TestTrackedFates(t *testing.T) {
	h := newHarness(t, nil)
	h.ready(testUAID)
	n := protocol.Notification{ChannelID: "3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f", Version: "tv", TTL: 60,
		SortKey: uint64(h.now.UnixNano()), Tracked: true}
	h.step(func(x *Ctx) { h.s.Deliver(x, &n) })
	wantReliabilityID := func(m map[string]any, version string) {
		t.Helper()
		id := storage.NewFateID(version)
		if m["tracked"] != nil || m["reliability_id"] != hex.EncodeToString(id[:]) {
			t.Fatalf("tracked notification %v, want reliability_id %x and no more", m, id)
		}
	}
	wantReliabilityID(h.message(), "tv")
	if j := h.job(JobFate); j.State != storage.FateTransmitted || j.Fate != storage.NewFateID("tv") || j.UAID != testUAID {
		t.Fatalf("write of a tracked notification: %+v", j)
	}
	h.send(ackMsg("tv"))
	if j := h.job(JobFate); j.State != storage.FateDelivered || j.Fate != storage.NewFateID("tv") {
		t.Fatalf("ack of a tracked notification: %+v", j)
	}
	deliver(h, "untracked")
	if m := h.message(); m["reliability_id"] != nil {
		t.Fatalf("untracked notification %v has a reliability_id", m)
	}
	h.noJobs()
	h.send(ackMsg("untracked"))
	h.noJobs()

	h.askCheck()
	check := h.job(JobCheck)
	m := storedMsg("ts", "", uint64(h.now.UnixNano()), 3600)
	m.Tracked = true
	plain := storedMsg("tu", "", uint64(h.now.UnixNano())+1, 3600)
	m2 := storedMsg("ts2", "", uint64(h.now.UnixNano())+2, 3600)
	m2.Tracked = true
	h.done(&Result{Job: check, Stamps: []storage.Message{m, plain, m2}})
	ms := h.messages()
	if len(ms) != 3 {
		t.Fatalf("a page of 3 stored messages wrote %d", len(ms))
	}
	wantReliabilityID(ms[0], "ts")
	wantReliabilityID(ms[2], "ts2")
	// The page's tracked messages: one job for them all.
	if j := h.job(JobFate); j.State != storage.FateTransmitted || j.UAID != testUAID ||
		len(j.Fates) != 2 || j.Fates[0] != storage.NewFateID("ts") || j.Fates[1] != storage.NewFateID("ts2") {
		t.Fatalf("write of a page with two stored tracked messages: %+v", j)
	}
	h.send(ackMsg("ts"))
	if d := h.job(JobDelete); !d.Tracked || d.Fate != storage.NewFateID("ts") || d.Message != m.Key() {
		t.Fatalf("ack of a stored tracked message: %+v", d)
	}
}
