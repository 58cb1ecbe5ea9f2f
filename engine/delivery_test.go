package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/storage"
	"github.com/gobwas/ws"
	"github.com/google/uuid"
)

func wsDialer() ws.Dialer { return ws.Dialer{Timeout: 5 * time.Second} }

// connected returns a client that said hello and registered one channel.
func connected(t *testing.T, srv *engine.Server) (c *et.Client, uaid, chid string) {
	t.Helper()
	c = et.Dial(t, srv.Addr())
	uaid = c.Hello("")
	chid = uuid.NewString()
	if r := c.Register(chid, ""); r["status"] != 200.0 {
		t.Fatalf("register %v", r)
	}
	return c, uaid, chid
}

func wantNotification(t *testing.T, c *et.Client, chid, version, data string) {
	t.Helper()
	r := c.Read()
	if r["messageType"] != "notification" || r["channelID"] != chid || r["version"] != version {
		t.Fatalf("got %v, want notification %s/%s", r, chid, version)
	}
	if data == "" {
		if _, ok := r["data"]; ok {
			t.Fatalf("payload-less notification carries data: %v", r)
		}
		return
	}
	h, _ := r["headers"].(map[string]any)
	if r["data"] != data || h["encoding"] != "aes128gcm" {
		t.Fatalf("notification %v, want data %q with its headers", r, data)
	}
}

func storedMessage(chid, version, topic string, ttl int64) storage.Message {
	return storage.Message{CHID: uuid.MustParse(chid), Version: version, Topic: topic,
		SortKey: storage.NewSortKey(), TTL: ttl, Data: "c3RvcmVk", Headers: map[string]string{"encoding": "aes128gcm"}}
}

func TestDirectDeliveryAndAck(t *testing.T) {
	srv, store := node(t, nil)
	c, uaid, chid := connected(t, srv)
	if code := et.Push(t, srv, uaid, et.Notification(chid, "v1", "ZGF0YQ"), ""); code != http.StatusOK {
		t.Fatalf("push: %d", code)
	}
	wantNotification(t, c, chid, "v1", "ZGF0YQ")
	if code := et.Push(t, srv, uaid, et.Notification(chid, "v2", ""), ""); code != http.StatusOK {
		t.Fatalf("push without payload: %d", code)
	}
	wantNotification(t, c, chid, "v2", "")
	c.Ack(chid, "v1")
	c.Ack(chid, "v2")
	// The direct path writes nothing to storage.
	u := parseUAID(t, uaid)
	if ms, _ := store.TimestampMessages(context.Background(), u, 0, 10); len(ms) != 0 {
		t.Fatalf("direct delivery stored %d messages", len(ms))
	}
	if code := et.Push(t, srv, uuid.New().String(), et.Notification(chid, "v3", ""), ""); code != http.StatusNotFound {
		t.Fatalf("push to a uaid not connected here: %d, want 404", code)
	}
}

// TestFlowControl: beyond MaxUnacked the node answers 503; the endpoint
// stores and asks for a check (202 while busy); once acks drain, the node
// reads storage and delivers.
func TestFlowControl(t *testing.T) {
	srv, store := node(t, func(c *engine.Config) { c.MaxUnacked = 1 })
	c, uaid, chid := connected(t, srv)
	u := parseUAID(t, uaid)
	if code := et.Push(t, srv, uaid, et.Notification(chid, "first", "ZGF0YQ"), ""); code != 200 {
		t.Fatalf("first push %d", code)
	}
	wantNotification(t, c, chid, "first", "ZGF0YQ")
	if code := et.Push(t, srv, uaid, et.Notification(chid, "second", "ZGF0YQ"), ""); code != http.StatusServiceUnavailable {
		t.Fatalf("second push while one is unacked: %d, want 503", code)
	}
	// What the endpoint does on 503: store, then ask for a check.
	m := storedMessage(chid, "second", "", 60)
	et.Must(t, store.SaveMessage(context.Background(), u, m), "save")
	if code := et.NodeCall(t, http.MethodPut, srv.NodeURL()+"/notif/"+uaid, "", ""); code != http.StatusAccepted {
		t.Fatalf("notif while busy: %d, want 202", code)
	}
	et.NothingMore(t, srv.NodeURL(), c) // the check waits for the ack
	c.Ack(chid, "first")
	r := c.Read()
	if r["version"] != "second" || r["data"] != "c3RvcmVk" {
		t.Fatalf("after the ack: %v, want the stored message", r)
	}
	c.Ack(chid, "second")
	et.Eventually(t, 5*time.Second, "acked stored message deleted", func() bool {
		ms, _ := store.TimestampMessages(context.Background(), u, 0, 10)
		return len(ms) == 0
	})
}

// TestStoredDrainOnReconnect: messages stored while offline arrive after
// hello, topic messages first, expired ones never; acked ones never again.
func TestStoredDrainOnReconnect(t *testing.T) {
	// No cursor lag, so the cursor's advance can be seen at once.
	srv, store := node(t, func(c *engine.Config) { c.MessagePage, c.CursorLag = 3, 0 })
	c, uaid, chid := connected(t, srv)
	c.Close()
	u := parseUAID(t, uaid)
	ctx := context.Background()
	var want []string
	for i := range 7 {
		m := storedMessage(chid, fmt.Sprint("ts", i), "", 60)
		et.Must(t, store.SaveMessage(ctx, u, m), "save")
		want = append(want, m.Version)
	}
	et.Must(t, store.SaveMessage(ctx, u, storedMessage(chid, "topic-old", "news", 60)), "save")
	et.Must(t, store.SaveMessage(ctx, u, storedMessage(chid, "topic-new", "news", 60)), "save")
	expired := storedMessage(chid, "expired", "", 1)
	expired.SortKey = uint64(time.Now().Add(-2 * time.Second).UnixNano())
	et.Must(t, store.SaveMessage(ctx, u, expired), "save")

	c2 := et.Dial(t, srv.Addr())
	if got := c2.Hello(uaid); got != uaid {
		t.Fatalf("uaid changed on reconnect")
	}
	if r := c2.Read(); r["version"] != "topic-new" {
		t.Fatalf("first message %v, want the newest topic version", r)
	}
	c2.Ack(chid, "topic-new")
	var got []string
	for len(got) < len(want) {
		r := c2.Read()
		v := r["version"].(string)
		got = append(got, v)
		c2.Ack(chid, v)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored messages %v, want %v in order", got, want)
	}
	et.NothingMore(t, srv.NodeURL(), c2)
	et.Eventually(t, 5*time.Second, "cursor advanced past the drained messages", func() bool {
		rec, err := store.GetUser(ctx, u)
		return err == nil && rec.Cursor > 0
	})
	c2.Close()

	// No redelivery after ack.
	c3 := et.Dial(t, srv.Addr())
	c3.Hello(uaid)
	et.NothingMore(t, srv.NodeURL(), c3)
}

// TestSlowWriteBehindAckedMessageIsDelivered: a message stamped before
// another but written after it (a slow endpoint write) must still be
// delivered once the newer one was read, acked, and the cursor moved.
// With no cursor lag it is hidden behind the cursor for good: the default
// lag is what keeps it readable.
func TestSlowWriteBehindAckedMessageIsDelivered(t *testing.T) {
	for _, tc := range []struct {
		lag  time.Duration
		want bool
	}{{engine.DefaultConfig().CursorLag, true}, {0, false}} {
		t.Run(fmt.Sprint("lag=", tc.lag), func(t *testing.T) {
			srv, store := node(t, func(c *engine.Config) { c.CursorLag = tc.lag })
			c, uaid, chid := connected(t, srv)
			c.Close()
			u := parseUAID(t, uaid)
			ctx := context.Background()
			slow := storedMessage(chid, "stamped-first", "", 60) // its write is slow
			fast := storedMessage(chid, "stamped-second", "", 60)
			et.Must(t, store.SaveMessage(ctx, u, fast), "save")

			c2 := et.Dial(t, srv.Addr())
			c2.Hello(uaid)
			wantNotification(t, c2, chid, fast.Version, "c3RvcmVk")
			c2.Ack(chid, fast.Version)
			et.Eventually(t, 5*time.Second, "acked message deleted", func() bool {
				list, err := store.TimestampMessages(ctx, u, 0, 10)
				return err == nil && len(list) == 0
			})
			if !tc.want {
				et.Eventually(t, 5*time.Second, "cursor moved past the acked message", func() bool {
					rec, err := store.GetUser(ctx, u)
					return err == nil && rec.Cursor >= fast.SortKey
				})
			}
			et.Must(t, store.SaveMessage(ctx, u, slow), "the slow write lands")
			c2.Close()

			c3 := et.Dial(t, srv.Addr())
			c3.Hello(uaid)
			if !tc.want {
				// The failure the lag prevents, shown so this test cannot
				// pass for the wrong reason.
				et.NothingMore(t, srv.NodeURL(), c3)
				return
			}
			wantNotification(t, c3, chid, slow.Version, "c3RvcmVk")
			c3.Ack(chid, slow.Version)
			et.NothingMore(t, srv.NodeURL(), c3)
		})
	}
}

// TestStoredDrainKeepsFlowControl: a drain never has more than MaxUnacked
// notifications unacked, even with a larger page, and topic messages
// beyond one page are all delivered (not only the first page of them).
func TestStoredDrainKeepsFlowControl(t *testing.T) {
	srv, store := node(t, func(c *engine.Config) { c.MaxUnacked, c.MessagePage = 2, 10 })
	c, uaid, chid := connected(t, srv)
	c.Close()
	u := parseUAID(t, uaid)
	ctx := context.Background()
	want := map[string]bool{}
	for i := range 5 {
		m := storedMessage(chid, fmt.Sprint("topic", i), fmt.Sprint("t", i), 60)
		et.Must(t, store.SaveMessage(ctx, u, m), "save")
		want[m.Version] = true
	}
	for i := range 4 {
		m := storedMessage(chid, fmt.Sprint("ts", i), "", 60)
		et.Must(t, store.SaveMessage(ctx, u, m), "save")
		want[m.Version] = true
	}

	c2 := et.Dial(t, srv.Addr())
	c2.Hello(uaid)
	for len(want) > 0 {
		// Read what is in flight, check the limit, then ack it all.
		var batch []string
		for len(batch) < 2 {
			batch = append(batch, c2.Read()["version"].(string))
		}
		et.NothingMore(t, srv.NodeURL(), c2) // nothing beyond MaxUnacked
		for _, v := range batch {
			if !want[v] {
				t.Fatalf("%s delivered twice or never stored", v)
			}
			delete(want, v)
			c2.Ack(chid, v)
		}
		if len(want) == 1 {
			r := c2.Read()
			delete(want, r["version"].(string))
			c2.Ack(chid, r["version"].(string))
		}
	}
	et.NothingMore(t, srv.NodeURL(), c2)
}

// TestUnackedDirectStoredOnClose: a client that leaves without acking does
// not lose what the endpoint was told was delivered.
func TestUnackedDirectStoredOnClose(t *testing.T) {
	srv, store := node(t, nil)
	c, uaid, chid := connected(t, srv)
	if code := et.Push(t, srv, uaid, et.Notification(chid, "unacked", "ZGF0YQ"), ""); code != 200 {
		t.Fatalf("push %d", code)
	}
	wantNotification(t, c, chid, "unacked", "ZGF0YQ")
	c.Close()
	u := parseUAID(t, uaid)
	et.Eventually(t, 5*time.Second, "unacked direct notification stored and node cleared", func() bool {
		ms, _ := store.TimestampMessages(context.Background(), u, 0, 10)
		rec, _ := store.GetUser(context.Background(), u)
		return len(ms) == 1 && ms[0].Version == "unacked" && rec.NodeID == ""
	})
	c2 := et.Dial(t, srv.Addr())
	c2.Hello(uaid)
	wantNotification(t, c2, chid, "unacked", "ZGF0YQ")
}

func TestKeepaliveAndHelloTimeout(t *testing.T) {
	srv, _ := node(t, func(c *engine.Config) {
		c.PingInterval, c.PongTimeout, c.HelloTimeout = time.Second, time.Second, time.Second
	})
	// No hello in time: closed.
	silent := et.Dial(t, srv.Addr())
	if code := silent.ExpectClose(); code != 1008 {
		t.Fatalf("hello timeout close %d, want 1008", code)
	}
	// A client that answers pings stays...
	alive, _, _ := connected(t, srv)
	alive.AnswerPingsUntil(2, 10*time.Second)
	alive.SendRaw(`{}`)
	if r := alive.Read(); len(r) != 0 {
		t.Fatalf("ping reply %v", r)
	}
	// ...one that does not is closed.
	dead, _, _ := connected(t, srv)
	dead.AnswerPings = false
	text, _, err := dead.Next(et.Patience)
	if err != nil || text != "<ping>" {
		t.Fatalf("no server ping: %q %v", text, err)
	}
	if code := dead.ExpectClose(); code != 1001 {
		t.Fatalf("pong timeout close %d, want 1001", code)
	}
}

func TestLocalEviction(t *testing.T) {
	srv, store := node(t, nil)
	first, uaid, _ := connected(t, srv)
	second := et.Dial(t, srv.Addr())
	second.Hello(uaid)
	if code := first.ExpectClose(); code != 4000 {
		t.Fatalf("older connection closed with %d, want 4000", code)
	}
	// The newer connection still owns the record after the old one's
	// cleanup ran.
	et.Eventually(t, 10*time.Second, "the evicted connection closed", func() bool { return sample(t, srv, "autoconnect_connections") == 1 })
	et.Settle(t, srv.NodeURL())
	rec, err := store.GetUser(context.Background(), parseUAID(t, uaid))
	if err != nil || rec.NodeID != srv.NodeURL() {
		t.Fatalf("record after eviction: %+v %v", rec, err)
	}
	second.SendRaw(`{}`)
	second.Read()
}

func TestNodeAPIAuth(t *testing.T) {
	srv, _ := node(t, func(c *engine.Config) { c.NodeSecret = "s3cret" })
	_, uaid, chid := connected(t, srv)
	n := et.Notification(chid, "v", "")
	if code := et.Push(t, srv, uaid, n, et.NoSecret); code != http.StatusUnauthorized {
		t.Fatalf("no secret: %d", code)
	}
	if code := et.Push(t, srv, uaid, n, "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d", code)
	}
	if code := et.Push(t, srv, uaid, n, "s3cret"); code != http.StatusOK {
		t.Fatalf("right secret: %d", code)
	}
	if code := et.NodeCall(t, http.MethodPut, srv.NodeURL()+"/push/nonsense", "{}", "s3cret"); code != http.StatusBadRequest {
		t.Fatalf("bad uaid: %d", code)
	}
	if code := et.NodeCall(t, http.MethodPut, srv.NodeURL()+"/push/"+uaid, "{not json", "s3cret"); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d", code)
	}
}

func TestDrainStoresUnacked(t *testing.T) {
	store := newStore(t)
	cfg := et.Config()
	srv, err := engine.New(cfg, store, nil)
	et.Must(t, err, "new")
	et.Must(t, srv.Start(), "start")
	c, uaid, chid := connected(t, srv)
	if code := et.Push(t, srv, uaid, et.Notification(chid, "in-flight", "ZGF0YQ"), ""); code != 200 {
		t.Fatalf("push %d", code)
	}
	wantNotification(t, c, chid, "in-flight", "ZGF0YQ")
	done := make(chan error, 1)
	go func() { done <- srv.Drain(context.Background()) }()
	if code := c.ExpectClose(); code != 1001 {
		t.Fatalf("drain close %d, want 1001", code)
	}
	c.AnswerClose()
	et.Must(t, <-done, "drain")
	ms, err := store.TimestampMessages(context.Background(), parseUAID(t, uaid), 0, 10)
	if err != nil || len(ms) != 1 || ms[0].Version != "in-flight" || ms[0].Data != "ZGF0YQ" {
		t.Fatalf("after drain: %+v %v", ms, err)
	}
}

// TestDrainReadsAcksSentAfterItsClose: the acks a client sends after the
// drain's 1001 close frame left the node, and before its own close frame
// answers it (acks crossing the close on the wire), count: the acked
// stored message is deleted and the acked direct one is not stored by the
// leave; only the unacked direct one is. Closing the socket right after
// the close frame dropped such acks, and the restarted node delivered
// those messages again (docs/engine.md, Shutdown).
func TestDrainReadsAcksSentAfterItsClose(t *testing.T) {
	store := newStore(t)
	srv, err := engine.New(et.Config(), store, nil)
	et.Must(t, err, "new")
	et.Must(t, srv.Start(), "start")
	c, uaid, chid := connected(t, srv)
	c.Leave()
	u := parseUAID(t, uaid)
	et.Must(t, store.SaveMessage(context.Background(), u, storedMessage(chid, "stored", "", 600)), "save")
	c = et.Dial(t, srv.Addr())
	c.Hello(uaid)
	wantNotification(t, c, chid, "stored", "c3RvcmVk")
	for _, v := range []string{"acked", "unacked"} {
		if code := et.Push(t, srv, uaid, et.Notification(chid, v, "ZGF0YQ"), ""); code != http.StatusOK {
			t.Fatalf("push %s: %d", v, code)
		}
		wantNotification(t, c, chid, v, "ZGF0YQ")
	}
	done := make(chan error, 1)
	go func() { done <- srv.Drain(context.Background()) }()
	if code := c.ExpectClose(); code != 1001 {
		t.Fatalf("drain close %d, want 1001", code)
	}
	c.Ack(chid, "stored")
	c.Ack(chid, "acked")
	c.AnswerClose()
	et.Must(t, <-done, "drain")
	ms, err := store.TimestampMessages(context.Background(), u, 0, 10)
	var got []string
	for _, m := range ms {
		got = append(got, m.Version)
	}
	if err != nil || !slices.Equal(got, []string{"unacked"}) {
		t.Fatalf("stored after the drain: %v %v, want only the unacked direct message", got, err)
	}
}

func TestMaxConnectionsRefusesUpgrade(t *testing.T) {
	srv, _ := node(t, func(c *engine.Config) { c.MaxConnections = 1 })
	first := et.Dial(t, srv.Addr())
	first.Hello("")
	if _, _, _, err := (wsDialer()).Dial(context.Background(), "ws://"+srv.Addr()+"/"); err == nil {
		t.Fatal("upgrade beyond max-connections accepted")
	} else if !strings.Contains(err.Error(), "503") {
		t.Fatalf("refusal: %v, want a 503", err)
	}
	first.SendRaw(`{}`)
	first.Read()
}

// heldDeletes holds acked-message deletes until the test releases them,
// opening the window in which a reconnect could read a message its client
// already acked.
type heldDeletes struct {
	storage.Store
	started chan struct{}
	release chan struct{}
}

func (s heldDeletes) DeleteMessage(ctx context.Context, uaid uuid.UUID, k storage.MessageKey) error {
	s.started <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.DeleteMessage(ctx, uaid, k)
}

func TestAckThenImmediateReconnectIsNotRedelivered(t *testing.T) {
	store := heldDeletes{newStore(t), make(chan struct{}, 1), make(chan struct{})}
	srv := et.Start(t, store, et.Config())
	c, uaid, chid := connected(t, srv)
	c.Close()
	et.Must(t, store.SaveMessage(context.Background(), parseUAID(t, uaid), storedMessage(chid, "once", "", 60)), "save")

	c1 := et.Dial(t, srv.Addr())
	c1.Hello(uaid)
	if r := c1.Read(); r["version"] != "once" {
		t.Fatalf("got %v", r)
	}
	c1.Ack(chid, "once")
	<-store.started
	c1.Close() // and reconnect while the delete is still running
	c2 := et.Dial(t, srv.Addr())
	c2.Hello(uaid)
	close(store.release)
	et.NothingMore(t, srv.NodeURL(), c2)
}

// TestUnackedDirectBehindCursorStillDelivered: a direct message whose sort
// key lies behind the user's cursor (a lagging endpoint clock, a delayed
// node call) is stored on close where the next read finds it.
func TestUnackedDirectBehindCursorStillDelivered(t *testing.T) {
	srv, store := node(t, nil)
	c, uaid, chid := connected(t, srv)
	u := parseUAID(t, uaid)
	et.Must(t, store.AdvanceCursor(context.Background(), u, storage.NewSortKey()), "advance cursor")
	n := et.Notification(chid, "behind", "ZGF0YQ")
	n.SortKey, n.TTL = uint64(time.Now().Add(-time.Minute).UnixNano()), 600
	if code := et.Push(t, srv, uaid, n, ""); code != 200 {
		t.Fatalf("push %d", code)
	}
	wantNotification(t, c, chid, "behind", "ZGF0YQ")
	c.Close() // without acking
	et.Eventually(t, 10*time.Second, "the unacked message stored on close", func() bool {
		rec, err := store.GetUser(context.Background(), u)
		return err == nil && rec.NodeID == ""
	})
	c2 := et.Dial(t, srv.Addr())
	c2.Hello(uaid)
	wantNotification(t, c2, chid, "behind", "ZGF0YQ")
}

// TestNodeAPIRefusesAtOnce: a call refused before its body is read (no
// secret, a wrong one, an invalid uaid, a call that takes no body) is
// answered at once and the connection closed, though the caller
// announced a body it never sends: the node does not wait for the body
// (the node API's timeouts here are a minute, the client's wait for an
// answer far less). A right secret with a stalled body is read, and
// times out.
func TestNodeAPIRefusesAtOnce(t *testing.T) {
	srv, _ := node(t, func(c *engine.Config) {
		c.NodeSecret = "s3cret"
		c.NodeAPIHeaderTimeout, c.NodeAPIBodyTimeout = time.Minute, time.Minute
	})
	uaid := strings.Repeat("ab", 16)
	for name, tc := range map[string]struct {
		head string
		code int
	}{
		"no secret":                {"PUT /push/" + uaid + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", 401},
		"wrong secret":             {"PUT /push/" + uaid + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Length: 100\r\n\r\n", 401},
		"no secret, chunked":       {"PUT /push/" + uaid + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nab", 401},
		"invalid uaid":             {"PUT /push/nonsense HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\nContent-Length: 100\r\n\r\n", 400},
		"a body notif never reads": {"PUT /notif/" + uaid + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\nContent-Length: 100\r\n\r\n", 404},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.RouterAddr())
			et.Must(t, err, "dial")
			defer c.Close()
			io.WriteString(c, tc.head)
			// Far below the minute the node would wait for the body.
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			et.Must(t, err, "answer")
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.code)
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
				t.Fatalf("after the answer: %q, %v (want the connection closed)", rest, err)
			}
		})
	}
}
