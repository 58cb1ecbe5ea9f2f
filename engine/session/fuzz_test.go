package session

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// fuzzModel is what the fuzz test knows the session was asked for and
// sent, to check what it does next against.
type fuzzModel struct {
	h        *harness
	queue    []Job                         // jobs asked for and not yet answered
	sent     map[string]storage.MessageKey // stored messages written, by version
	deleted  map[storage.MessageKey]bool
	closing  bool // a close was asked for or Close ran
	versions int
	chans    int // the user's channels in the modelled store
	// told is each broadcast id's version the client has (claimed in
	// hello or broadcast_subscribe, or sent to it).
	told map[string]string
	bgen int // versions published to the table so far
	// fanout is set while the step is a fan-out visit or a tick, which
	// must never repeat a version the client was sent; helloed once the
	// hello reply went out.
	fanout, helloed bool
	// frameClosed: a close frame was written (the node's, or its answer
	// to the client's); clientClosed: the client sent its close frame.
	frameClosed, clientClosed bool
	// owed: the last read found a full page and no read was asked since:
	// once all it sent is acked and deleted, the next page is owed (and,
	// with a msg-limit, must be read before the client's close is
	// answered).
	owed bool
	// backlog counts the messages received before the hello that reads
	// sent since storage was last found empty, or since the session was
	// last idle (its flow, which holds the count, went away); dropAllowed
	// is set while the step is the read that takes it past MsgLimit,
	// the only step that may ask for a drop.
	backlog     int
	dropAllowed bool
}

// FuzzSession drives a session with a sequence of inputs (client bytes and
// protocol messages, node-API deliveries and checks, storage results,
// timer ticks, closes) read from the fuzz input, and checks after each
// that it never panics, never writes after asking to close, never asks to
// delete a stored message it did not send (or twice), never has more than
// MaxUnacked notifications in flight, and gives every one back on Close;
// never asks to register the nil UUID, and never lets the user's channels
// pass MaxChannels by more than the registers it lets wait for storage.
// Once a close frame is written nothing more is, and only deletes are
// asked; an ack the session reads while registered, the drain's close
// sent or not, asks the delete of every stored message it names; the
// client's close is never answered while the deletes of its acks run or,
// with the msg-limit, while the page they made owed is unread. A user is
// dropped exactly when a read takes the messages received before its
// hello past the msg-limit: never for those received since, which reached
// storage only because its window was full. Each call of the node API
// has only its own outcomes: a delivery is Delivered exactly when it wrote
// the notification, a check is Checking exactly when it asks a read, an
// eviction is Evicted exactly when it asks the close.
func FuzzSession(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 3, 0, 3, 1, 2, 0, 1, 5, 3, 1, 1, 6, 4, 9})
	f.Add([]byte{0, 0, 1, 1, 3, 0, 5, 0, 3, 2, 1, 6, 1, 6, 3, 0, 3, 0, 9, 1})
	f.Add([]byte{0, 7, 1, 0, 3, 0, 2, 0, 2, 0, 2, 0, 2, 0, 1, 6, 4, 200, 4, 100, 6, 0})
	f.Add([]byte{0, 0, 1, 0, 3, 0, 1, 10, 1, 11, 1, 12, 10, 5, 0x81, 0x85, 1, 2, 3})
	f.Add([]byte{11, 0, 0, 0, 1, 16, 3, 0, 11, 1, 12, 0, 1, 17, 11, 2, 4, 90, 12, 0, 9, 0})
	f.Add([]byte{0, 0, 1, 0, 3, 0, 3, 0, 3, 0, 3, 8, 1, 5, 3, 0, 3, 8, 3, 0, 3, 0})
	f.Add([]byte{1, 18, 3, 0, 3, 1})
	f.Add([]byte{1, 19})
	// A returning client: a full page of its backlog acked, its close at
	// once, the deletes, the owed read (over the limit: the drop).
	f.Add([]byte{0, 0, 1, 1, 3, 0, 3, 38, 1, 5, 1, 14, 3, 0, 3, 0, 3, 0, 3, 38, 3, 0})
	// A returning client: two full pages received before its hello (each
	// acked: three deletes and a cursor move), the second past the limit
	// (the drop).
	f.Add([]byte{0, 0, 1, 1, 3, 0, 3, 38, 1, 5, 3, 0, 3, 0, 3, 0, 3, 0, 3, 38, 3, 0})
	// A connected client: four full pages received after its hello (a
	// burst its window could not take), then its close: no drop.
	f.Add([]byte{0, 0, 1, 1, 3, 0, 3, 6, 1, 5, 3, 0, 3, 0, 3, 0, 3, 0, 3, 6, 1, 5, 3, 0, 3, 0, 3, 0, 3, 0,
		3, 6, 1, 5, 3, 0, 3, 0, 3, 0, 3, 0, 3, 6, 1, 5, 1, 14, 3, 0, 3, 0, 3, 0, 3, 6})
	// The drain's close, then the client's ack and its close.
	f.Add([]byte{0, 0, 1, 0, 3, 0, 3, 6, 7, 2, 1, 5, 1, 14, 3, 0, 3, 0, 3, 0, 4, 20})
	// An idle client: the node API's check reads now, a delivery is
	// written, an older connection's eviction is not here, a newer one's
	// closes it.
	f.Add([]byte{0, 0, 1, 0, 3, 0, 3, 0, 5, 0, 3, 0, 2, 1, 6, 0, 6, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		h := newHarness(t, func(c *Config) {
			c.MaxUnacked, c.MessagePage, c.MaxMessageSize, c.MsgLimit, c.MaxChannels = 3, 4, 1024, 5, 3
		})
		h.env.Broadcasts.Update(map[string]string{"a": "1", "b": "1"})
		m := &fuzzModel{h: h, sent: map[string]storage.MessageKey{}, deleted: map[storage.MessageKey]bool{}, told: map[string]string{}}
		m.step(h.s.Open)
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%13, ops[i+1]
			if op == 10 { // raw client bytes: the rest of the input, up to arg bytes
				n := min(int(arg), len(ops)-i-2)
				raw := bytes.Clone(ops[i+2 : i+2+n])
				m.step(func(x *Ctx) { h.s.Consume(x, raw) })
				i += n
				continue
			}
			m.apply(op, arg)
		}
		if !h.s.Closed() {
			m.step(func(x *Ctx) {})
			h.s.Close(h.env, 0)
		}
		if n := h.env.InFlight.Load(); n != 0 {
			t.Fatalf("%d notifications still counted in flight after Close", n)
		}
		if n := h.env.Broadcasts.Subs(); n != 0 {
			t.Fatalf("%d broadcast subscriptions still held after Close", n)
		}
	})
}

func (m *fuzzModel) apply(op, arg byte) {
	h := m.h
	switch op {
	case 0: // the upgrade, possibly split in two
		req := []byte(upgradeRequest)
		cut := int(arg) % len(req)
		m.consume(req[:cut])
		m.consume(req[cut:])
	case 1:
		m.client(arg)
	case 2:
		m.versions++
		n := protocol.Notification{ChannelID: uuid.NewString(), Version: fmt.Sprint("direct-", m.versions), TTL: int64(arg % 3 * 30),
			Data: "ZGF0YQ", SortKey: uint64(h.now.UnixNano())}
		var got Outcome
		m.step(func(x *Ctx) { got = h.s.Deliver(x, &n) })
		wrote := len(h.out) > 0
		if got != Delivered && got != Busy && got != NotHere ||
			(got == Delivered) != wrote || (got == Delivered && h.s.state != stReady) {
			h.t.Fatalf("delivery was %v, wrote %v, state %d", got, wrote, h.s.state)
		}
	case 3:
		m.answer(arg)
	case 4:
		h.now = h.now.Add(time.Duration(arg) * 3 * time.Second)
		m.fanout = true
		m.step(h.s.Tick)
		m.fanout = false
	case 5:
		m.check()
	case 6:
		m.evict(h.s.connectedAt + int64(arg%3) - 1)
	case 7:
		m.step([]func(*Ctx){h.s.SlowReader, h.s.Overloaded, h.s.Shutdown}[arg%3])
	case 8:
		h.env.Draining.Store(arg%2 == 1)
	case 11: // a broadcast version changes (or a new id appears)
		m.bgen++
		id := []string{"a", "b", "c"}[arg%3]
		h.env.Broadcasts.Update(map[string]string{id: fmt.Sprint(m.bgen + 1)})
	case 12: // the node's fan-out visits the session
		m.fanout = true
		m.step(h.s.Broadcast)
		m.fanout = false
	case 9:
		if !h.s.Closed() {
			unsent := int(arg) % (h.x.Pending + 1)
			h.s.Close(h.env, unsent)
			m.closing = true
			if n := h.env.InFlight.Load(); n != 0 {
				h.t.Fatalf("Close left %d in flight", n)
			}
		}
	}
}

// check asks for a storage read: Checking exactly when it asks for one,
// CheckLater or NotHere otherwise.
func (m *fuzzModel) check() {
	h := m.h
	var got Outcome
	m.step(func(x *Ctx) { got = h.s.Check(x) })
	reads := slices.ContainsFunc(h.jobs, func(j Job) bool { return j.Kind == JobCheck })
	if got != Checking && got != CheckLater && got != NotHere || (got == Checking) != reads {
		h.t.Fatalf("check was %v, asked a read: %v", got, reads)
	}
}

// evict closes the connection for a newer one connected at: Evicted
// asks the close, NotHere changes nothing.
func (m *fuzzModel) evict(at int64) {
	h := m.h
	var got Outcome
	m.step(func(x *Ctx) { got = h.s.Evict(x, at) })
	if got != Evicted && got != NotHere || (got == Evicted) != h.close ||
		got == NotHere && (len(h.out) > 0 || len(h.jobs) > 0) {
		h.t.Fatalf("evict was %v, close asked %v, wrote %q, asked %+v", got, h.close, h.out, h.jobs)
	}
}

// client feeds the client frame chosen by arg. An ack of every stored
// message sent, read while the session is registered and neither side
// closed the connection, must ask each one's delete.
func (m *fuzzModel) client(arg byte) {
	h := m.h
	counts := (h.s.state == stReady || h.s.state == stGoingAway) && !h.s.leaving() && !m.closing &&
		(h.s.asm == nil || !h.s.asm.Fragmented())
	m.consume(m.clientInput(arg))
	switch arg % 21 {
	case 14:
		m.clientClosed = true
	case 5, 6:
		if counts && !h.close {
			for v, k := range m.sent {
				if !m.deleted[k] {
					h.t.Fatalf("ack of %s read in state %d: no delete asked", v, h.s.state)
				}
			}
		}
	}
}

// clientInput is one client frame chosen by arg.
func (m *fuzzModel) clientInput(arg byte) []byte {
	chid := "3b3c8a1e-5b0e-4c1c-9a3e-1d2b3c4d5e6f"
	text := func(s string) []byte { return clientFrame(gws.OpText, []byte(s)) }
	switch arg % 21 {
	case 0:
		return text(`{"messageType":"hello","use_webpush":true}`)
	case 15:
		return text(`{"messageType":"register","channelID":"00000000-0000-0000-0000-000000000000"}`)
	case 1:
		return text(`{"messageType":"hello","uaid":"` + protocol.FormatUAID(testUAID) + `"}`)
	case 2:
		return text(`{"messageType":"register","channelID":"` + chid + `"}`)
	case 3:
		return text(`{"messageType":"register","channelID":"` + chid + `","key":"bad"}`)
	case 4:
		return text(`{"messageType":"unregister","channelID":"` + chid + `"}`)
	case 5, 6: // ack what was sent, by version (stored ones and direct ones)
		var ups []byte
		for v := range m.sent {
			ups = fmt.Appendf(ups, `{"channelID":"%s","version":"%s","code":100},`, chid, v)
		}
		for i := max(m.versions-3, 1); i <= m.versions; i++ {
			ups = fmt.Appendf(ups, `{"channelID":"%s","version":"direct-%d","code":100},`, "x", i)
		}
		return text(`{"messageType":"ack","updates":[` + string(bytes.TrimSuffix(ups, []byte(","))) + `]}`)
	case 7:
		return text(`{"messageType":"ack","updates":[{"channelID":"` + chid + `","version":"never-sent"}]}`)
	case 8:
		return text(`{"messageType":"nack","version":"x","code":301}`)
	case 9:
		return text(`{}`)
	case 10:
		return text(`{"messageType":"broadcast_subscribe","broadcasts":{"a":"1"}}`)
	case 11:
		return clientFrame(gws.OpPing, []byte("p"))
	case 12:
		return gwsFrame(gws.NewFrame(gws.OpText, false, []byte(`{"messageType":`)))
	case 13:
		return gwsFrame(gws.NewFrame(gws.OpContinuation, true, []byte(`"ping"}`)))
	case 14:
		return clientFrame(gws.OpClose, gws.NewCloseFrameBody(1000, ""))
	case 16:
		return text(`{"messageType":"hello","broadcasts":{"a":"1","b":"0","zz":"1"}}`)
	case 17:
		return text(`{"messageType":"broadcast_subscribe","broadcasts":{"b":"0","c":"1"}}`)
	case 18: // plain HTTP: only meaningful before the upgrade
		return []byte("GET /__heartbeat__ HTTP/1.1\r\nHost: x\r\n\r\n")
	case 19:
		return []byte("PUT /notif/x HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	return text(`{"messageType":"subscribe"}`)
}

func gwsFrame(f gws.Frame) []byte {
	var b bytes.Buffer
	gws.WriteFrame(&b, gws.MaskFrameInPlace(f))
	return b.Bytes()
}

// answer completes the oldest job asked for: success, or a failure when
// arg is odd. A check finds a page of fresh stored messages (some topic,
// some expired).
func (m *fuzzModel) answer(arg byte) {
	if len(m.queue) == 0 {
		return
	}
	h := m.h
	j := m.queue[0]
	m.queue = m.queue[1:]
	r := &Result{Job: j}
	if arg%2 == 1 {
		r.Err = fmt.Errorf("storage down")
	}
	switch j.Kind {
	case JobHello:
		// Found, or (arg%8 >= 4) unknown to storage: a fresh uaid.
		r.UAID, r.Fresh = j.UAID, false
		if arg%8 >= 4 {
			r.UAID, r.Fresh = testUAID, true
		}
		if arg%4 == 2 {
			h.newer = !h.newer
		}
	case JobRegister:
		if r.Err == nil && j.MaxChannels > 0 {
			r.Channels = min(m.chans, j.MaxChannels)
			r.Full = r.Channels >= j.MaxChannels
		}
		if r.Err == nil && !r.Full {
			m.chans++
		}
	case JobUnregister:
		if r.Err == nil && m.chans > 0 {
			m.chans--
		}
	case JobCheck:
		// Received before the hello (the backlog): none, all, or every
		// other one, as arg's bits 5 and 6 say.
		hello := time.UnixMilli(h.s.connectedAt)
		early := func(i int) bool { return arg>>5&3 == 1 || arg>>5&3 >= 2 && i%2 == int(arg>>6&1) }
		for i := range min(int(arg/2)%(j.Page+1), j.Page) {
			m.versions++
			// Sort keys distinct from every earlier read's.
			msg := storedMsg(fmt.Sprint("stored-", m.versions), "", uint64(h.now.UnixNano())+uint64(m.versions), 60)
			if early(i) {
				at := hello.Add(-time.Duration(m.versions) * time.Microsecond)
				msg.SortKey, msg.TTL = uint64(at.UnixNano()), int64(h.now.Sub(at)/time.Second)+60
			}
			if i%3 == 1 {
				msg.Topic = fmt.Sprint("t", m.versions)
				r.Topics = append(r.Topics, msg)
				continue
			}
			if i%5 == 4 {
				msg.SortKey = uint64(h.now.Add(-time.Hour).UnixNano())
			}
			r.Stamps = append(r.Stamps, msg)
		}
		r.More = len(r.Topics)+len(r.Stamps) == j.Page
	}
	pageKeys := map[string]storage.MessageKey{}
	for _, list := range [][]storage.Message{r.Topics, r.Stamps} {
		for _, msg := range list {
			pageKeys[msg.Version] = msg.Key()
		}
	}
	if j.Kind == JobCheck && r.Err == nil && h.s.state == stReady && h.env.Config.MsgLimit > 0 {
		m.countBacklog(r)
	}
	m.step(func(x *Ctx) { h.s.Done(x, r) })
	if m.dropAllowed && !slices.ContainsFunc(h.jobs, func(j Job) bool { return j.Kind == JobDrop }) {
		h.t.Fatalf("a read took the backlog to %d, past msg-limit %d: no drop", m.backlog, h.env.Config.MsgLimit)
	}
	m.dropAllowed = false
	if j.Kind == JobCheck && h.s.state == stReady && !m.closing {
		m.owed = r.Err == nil && r.More && !slices.ContainsFunc(h.jobs, func(j Job) bool { return j.Kind == JobDrop })
	}
	for _, n := range h.messagesIfAny() {
		if v, _ := n["version"].(string); n["messageType"] == "notification" && pageKeys[v] != (storage.MessageKey{}) {
			m.sent[v] = pageKeys[v]
		}
	}
}

// countBacklog counts what the read r found received before the hello
// and not expired, as the session must (msglimit.go); an empty read
// starts the count again. It allows the step a drop once the count
// passes the limit.
func (m *fuzzModel) countBacklog(r *Result) {
	h := m.h
	if len(r.Topics)+len(r.Stamps) == 0 {
		m.backlog = 0
		return
	}
	hello := time.UnixMilli(h.s.connectedAt + 1) // the hello's millisecond counts whole
	for _, list := range [][]storage.Message{r.Topics, r.Stamps} {
		for _, msg := range list {
			if msg.Received().Before(hello) && !msg.Expired(h.now) {
				m.backlog++
			}
		}
	}
	m.dropAllowed = m.backlog > h.env.Config.MsgLimit
}

// consume feeds client bytes (those not consumed stay for the next call,
// as the loop keeps them).
func (m *fuzzModel) consume(b []byte) {
	buf := bytes.Clone(b)
	var n int
	m.step(func(x *Ctx) { n = m.h.s.Consume(x, buf) })
	if n < 0 || n > len(buf) {
		m.h.t.Fatalf("consumed %d of %d", n, len(buf))
	}
}

// step runs one transition and checks the invariants on its effects.
func (m *fuzzModel) step(fn func(x *Ctx)) {
	h := m.h
	closedBefore, frameBefore := m.closing, m.frameClosed
	h.step(fn)
	if h.s.Closed() {
		m.closing = true
	}
	if closedBefore && (len(h.out) > 0 || len(h.jobs) > 0) {
		h.t.Fatalf("after the close: wrote %q, asked %+v", h.out, h.jobs)
	}
	if frameBefore && (len(h.out) > 0 || slices.ContainsFunc(h.jobs, func(j Job) bool { return j.Kind != JobDelete })) {
		h.t.Fatalf("after a close frame: wrote %q, asked %+v", h.out, h.jobs)
	}
	if !bytes.HasPrefix(h.out, []byte("HTTP/1.1 ")) {
		frames := h.frames()
		for i, f := range frames {
			if f.Header.OpCode == gws.OpClose && i != len(frames)-1 {
				h.t.Fatalf("frames after a close frame: %q", h.out)
			}
			if f.Header.OpCode == gws.OpClose {
				m.frameClosed = true
				m.checkCloseAnswer(f.Payload)
			}
		}
		m.checkBroadcasts()
	}
	regs := 0
	for _, j := range m.queue {
		if j.Kind == JobRegister {
			regs++
		}
	}
	for _, j := range h.jobs {
		if j.Kind == JobCheck {
			m.owed = false
		}
		if j.Kind == JobRegister {
			if j.CHID == ([16]byte{}) {
				h.t.Fatalf("register job for the nil UUID")
			}
			if regs++; regs > maxRegsInFlight {
				h.t.Fatalf("%d registers waiting for storage", regs)
			}
		}
		if j.Kind == JobDrop && !m.dropAllowed {
			h.t.Fatalf("a drop asked with %d backlog messages counted (msg-limit %d)", m.backlog, h.env.Config.MsgLimit)
		}
		if j.Kind == JobDelete {
			if m.deleted[j.Message] || !m.sentKey(j.Message) {
				h.t.Fatalf("delete of %+v: never sent, or deleted before", j.Message)
			}
			m.deleted[j.Message] = true
		}
		m.queue = append(m.queue, j)
	}
	if limit := h.env.Config.MaxChannels; m.chans > limit+maxRegsInFlight {
		h.t.Fatalf("%d channels stored (max-channels %d)", m.chans, limit)
	}
	if n := h.env.InFlight.Load(); n < 0 || n > int64(h.env.Config.MaxUnacked) {
		h.t.Fatalf("%d in flight (max unacked %d)", n, h.env.Config.MaxUnacked)
	}
	if h.close {
		m.closing = true
	}
	if h.s.Idle() {
		m.backlog = 0
	}
}

// checkCloseAnswer checks a plain 1000 close written after the client's
// close frame (its answer): no delete of an acked message still runs and,
// with a msg-limit, no page is owed with everything acked.
func (m *fuzzModel) checkCloseAnswer(payload []byte) {
	h := m.h
	code, reason := gws.ParseCloseFrameData(payload)
	if code != gws.StatusNormalClosure || reason != "" || !m.clientClosed {
		return
	}
	if slices.ContainsFunc(m.queue, func(j Job) bool { return j.Kind == JobDelete }) {
		h.t.Fatalf("the client's close answered with a delete still running")
	}
	if h.env.Config.MsgLimit > 0 && m.owed && h.env.InFlight.Load() == 0 {
		h.t.Fatalf("the client's close answered with a page owed and unread (msg-limit %d)", h.env.Config.MsgLimit)
	}
}

// checkBroadcasts checks the broadcasts the step wrote: only after the
// hello reply, each at the table's current version, unknown ids only
// under "errors", and a fan-out or tick never repeating what was sent.
func (m *fuzzModel) checkBroadcasts() {
	h := m.h
	current := h.env.Broadcasts.Versions()
	for _, msg := range h.messagesIfAny() {
		b, _ := msg["broadcasts"].(map[string]any)
		switch msg["messageType"] {
		case "hello":
			m.helloed = true
		case "broadcast":
			if !m.helloed || len(b) == 0 {
				h.t.Fatalf("broadcast message %v before the hello reply, or empty", msg)
			}
		default:
			continue
		}
		for id, v := range b {
			if id == "errors" {
				for eid, ev := range v.(map[string]any) {
					if _, known := current[eid]; known || ev != protocol.BroadcastNotFound {
						h.t.Fatalf("error entry %s: %v (known %v)", eid, ev, known)
					}
				}
				continue
			}
			if v != current[id] {
				h.t.Fatalf("sent %s=%v, the table has %q", id, v, current[id])
			}
			if m.fanout && m.told[id] == v {
				h.t.Fatalf("a fan-out repeated %s=%v", id, v)
			}
			m.told[id] = v.(string)
		}
	}
}

func (m *fuzzModel) sentKey(k storage.MessageKey) bool {
	for _, s := range m.sent {
		if s == k {
			return true
		}
	}
	return false
}

// messagesIfAny decodes the text frames written, ignoring other frames.
func (h *harness) messagesIfAny() []map[string]any {
	if bytes.HasPrefix(h.out, []byte("HTTP/1.1 ")) {
		return nil // a plain HTTP answer
	}
	var out []map[string]any
	for _, f := range h.frames() {
		if f.Header.OpCode == gws.OpText {
			out = append(out, h.decode(f.Payload))
		}
	}
	return out
}
