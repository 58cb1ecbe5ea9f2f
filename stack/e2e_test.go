package stack_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage"
)

// End-to-end: user agents on the connection node, pushes through the API
// tier, one store, all in this process (stacktest).

// maxUnacked starts a stack whose connection node lets n notifications
// be in flight unacked per client.
func maxUnacked(n int) stacktest.Options {
	return stacktest.Options{Config: func(c *stack.Config) { c.Engine.MaxUnacked = n }}
}

// push sends data (encrypted for sub; nothing when "") to sub's endpoint
// with ttl and the headers kv, and returns the message id of the 201.
func push(t testing.TB, st *stacktest.Stack, sub *stacktest.Subscriber, ttl, data string, kv ...string) string {
	t.Helper()
	r := st.Push(t, sub.Endpoint, sub, data, nil, append([]string{"TTL", ttl}, kv...)...)
	return apitiertest.WantCreated(t, r, st.EndpointURL(), ttl)
}

// wantNotification reads the next message: a notification of version
// carrying data (aes128gcm), or no data at all when data is "". It does
// not ack.
func wantNotification(t testing.TB, sub *stacktest.Subscriber, version, data string) {
	t.Helper()
	n := sub.Notification(t)
	if n.Version != version {
		t.Fatalf("got notification %s, want %s", n.Version, version)
	}
	if data == "" {
		if n.Data != nil {
			t.Fatalf("payload-less push arrived with data %q", n.Data)
		}
		return
	}
	if string(n.Data) != data || n.Encoding != "aes128gcm" {
		t.Fatalf("notification %q (%s), want %q (aes128gcm)", n.Data, n.Encoding, data)
	}
}

func storedCount(t testing.TB, st *stacktest.Stack, uaid string) int { return len(st.Stored(t, uaid)) }

func TestE2EDirectDelivery(t *testing.T) {
	st := stacktest.Start(t)
	a := st.Subscribe(t, "")
	id := push(t, st, a, "60", "direct payload")
	wantNotification(t, a, id, "direct payload")
	if n := storedCount(t, st, a.UAID); n != 0 {
		t.Fatalf("direct delivery stored %d messages", n)
	}
	a.Ack(a.CHID, id)
	// Without payload, and with TTL 0: still direct.
	id = push(t, st, a, "0", "")
	wantNotification(t, a, id, "")
	a.Ack(a.CHID, id)
	// Legacy aesgcm: the client gets the crypto headers it decrypts with,
	// under the reference's names, quotes and padding stripped.
	r := apitiertest.Send(t, "POST", a.Endpoint, []byte("legacy"), "TTL", "60", "Content-Encoding", "aesgcm",
		"Encryption", `salt="c2FsdHNhbHQ="`, "Crypto-Key", `dh="BDw9T0eImd4ax818VcYqDK_DOhcuDswKeroYyNkdhYmygoLSDlSiWpuoWYUSSFxi25cyyNTR5k9Ny93DzZc0UI4="`)
	id = apitiertest.WantCreated(t, r, st.EndpointURL(), "60")
	m := a.Read()
	h, _ := m["headers"].(map[string]any)
	if m["version"] != id || m["data"] != base64.RawURLEncoding.EncodeToString([]byte("legacy")) || h["encoding"] != "aesgcm" ||
		h["encryption"] != "salt=c2FsdHNhbHQ" ||
		h["crypto_key"] != "dh=BDw9T0eImd4ax818VcYqDK_DOhcuDswKeroYyNkdhYmygoLSDlSiWpuoWYUSSFxi25cyyNTR5k9Ny93DzZc0UI4" {
		t.Fatalf("aesgcm notification %v", m)
	}
	a.Ack(a.CHID, id)
	// The API tier handed them to the node in this process by method
	// calls: it never opened a connection to the node API (over HTTP its
	// kept-alive connection would be open). Read through metrics-listen,
	// which serves the node's series too, not through the node API.
	api := string(apitiertest.Send(t, "GET", "http://"+st.MetricsAddr()+"/metrics", nil).Body)
	if !strings.Contains(api, "\nautoconnect_node_api_connections 0\n") ||
		!strings.Contains(api, `autoendpoint_node_calls_total{call="push",result="ok"} 3`) {
		t.Errorf("node API connections or node calls:\n%s", grepLines(api, "autoconnect_node_api_connections", "autoendpoint_node_calls_total"))
	}
	et.NothingMore(t, st.NodeURL(), a.Client)
}

// grepLines returns text's lines that start with one of prefixes.
func grepLines(text string, prefixes ...string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, "\n")
}

func TestE2EStoredThenReconnect(t *testing.T) {
	st := stacktest.Start(t)
	a := st.Left(t) // pushes to the closing socket: TestE2EReconnectRace
	first := push(t, st, a, "600", "one")
	second := push(t, st, a, "600", "two")
	push(t, st, a, "600", "topic v1", "Topic", "score")
	topic2 := push(t, st, a, "600", "topic v2", "Topic", "score")
	push(t, st, a, "0", "dropped")
	if n := storedCount(t, st, a.UAID); n != 3 {
		t.Fatalf("stored %d messages, want 3 (2 + the newest topic version)", n)
	}
	if node := st.NodeID(t, a.UAID); node != "" {
		t.Fatalf("node_id %q after the agent left", node)
	}
	b := st.Reconnect(t, a)
	wantNotification(t, b, topic2, "topic v2") // topic messages first
	wantNotification(t, b, first, "one")
	wantNotification(t, b, second, "two")
	et.NothingMore(t, st.NodeURL(), b.Client) // neither the replaced topic version nor the TTL 0 push
	for _, id := range []string{topic2, first, second} {
		b.Ack(b.CHID, id)
	}
	et.Eventually(t, 5*time.Second, "acked messages deleted", func() bool { return storedCount(t, st, a.UAID) == 0 })
	b.Close()
	c := st.Reconnect(t, a)
	et.NothingMore(t, st.NodeURL(), c.Client)
}

func TestE2ENodeUnreachable(t *testing.T) {
	st := stacktest.Start(t)
	a := st.Left(t)
	// The record names a node that is gone (crashed, say), connected
	// after the agent's connection (a later connected_at wins).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	et.Must(t, err, "listen")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	ctx := context.Background()
	uaid := uuid.MustParse(a.UAID)
	u, err := st.Store.GetUser(ctx, uaid)
	et.Must(t, err, "get user")
	deadAt := max(time.Now().UnixMilli(), u.ConnectedAt+1)
	et.Must(t, st.Store.Connect(ctx, storage.User{UAID: uaid, RouterType: storage.RouterWebPush, NodeID: dead, ConnectedAt: deadAt}),
		"connect to a dead node")
	id := push(t, st, a, "60", "for later")
	if node := st.NodeID(t, a.UAID); node != "" {
		t.Fatalf("node_id %q not cleared", node)
	}
	if n := storedCount(t, st, a.UAID); n != 1 {
		t.Fatalf("stored %d", n)
	}
	// The agent's hello stamps its connection with the clock, and must be
	// newer than the dead node's.
	et.Eventually(t, 5*time.Second, "the clock past the dead node's connected_at", func() bool { return time.Now().UnixMilli() > deadAt })
	b := st.Reconnect(t, a)
	wantNotification(t, b, id, "for later")
	b.Ack(b.CHID, id)
	et.Eventually(t, 5*time.Second, "acked message deleted", func() bool { return storedCount(t, st, a.UAID) == 0 })
}

func TestE2ENodeBusy(t *testing.T) {
	st := stacktest.StartWith(t, maxUnacked(1))
	a := st.Subscribe(t, "")
	// The hello's storage check done: until then a push is busy too, and
	// the first would be stored (CI saw "stored 2").
	et.Settle(t, st.NodeURL())
	first := push(t, st, a, "60", "first")
	wantNotification(t, a, first, "first")
	// One unacked: the node is busy, the endpoint stores and asks for a
	// check, which the node runs once the ack arrives.
	second := push(t, st, a, "60", "second")
	if n := storedCount(t, st, a.UAID); n != 1 {
		t.Fatalf("busy: stored %d, want 1", n)
	}
	if node := st.NodeID(t, a.UAID); node != st.NodeURL() {
		t.Fatalf("busy node lost its node_id: %q", node)
	}
	et.NothingMore(t, st.NodeURL(), a.Client)
	a.Ack(a.CHID, first)
	wantNotification(t, a, second, "second")
	a.Ack(a.CHID, second)
	et.Eventually(t, 5*time.Second, "acked stored message deleted", func() bool { return storedCount(t, st, a.UAID) == 0 })
	et.NothingMore(t, st.NodeURL(), a.Client)
}

func TestE2ETTLZero(t *testing.T) {
	st := stacktest.Start(t)
	a := st.Subscribe(t, "")
	id := push(t, st, a, "0", "now or never")
	wantNotification(t, a, id, "now or never")
	a.Ack(a.CHID, id)
	a.Close()
	push(t, st, a, "0", "never")
	if n := storedCount(t, st, a.UAID); n != 0 {
		t.Fatalf("TTL 0 stored %d", n)
	}
	b := st.Reconnect(t, a)
	et.NothingMore(t, st.NodeURL(), b.Client)
}

func TestE2EDeleteStoredMessage(t *testing.T) {
	st := stacktest.Start(t)
	a := st.Left(t) // so the endpoint stores, under the id it answers
	cancelled := push(t, st, a, "600", "cancelled")
	kept := push(t, st, a, "600", "kept")
	if r := apitiertest.Send(t, "DELETE", st.EndpointURL()+"/m/"+cancelled, nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	b := st.Reconnect(t, a)
	wantNotification(t, b, kept, "kept")
	b.Ack(b.CHID, kept)
	et.NothingMore(t, st.NodeURL(), b.Client)
}

func TestE2EVAPIDv2(t *testing.T) {
	st := stacktest.Start(t)
	key, other := stacktest.NewSigner(t), stacktest.NewSigner(t)
	a := st.Subscribe(t, key.Public)
	if !strings.HasPrefix(a.Endpoint, st.EndpointURL()+"/wpush/v2/") {
		t.Fatalf("endpoint %s is not v2", a.Endpoint)
	}
	apitiertest.WantError(t, apitiertest.Send(t, "POST", a.Endpoint, nil, "TTL", "60"), 401, errno.InvalidAuth)
	apitiertest.WantError(t, apitiertest.Send(t, "POST", a.Endpoint, nil, "TTL", "60", "Authorization", st.Authorization(t, other)),
		401, errno.InvalidAuth)
	id := apitiertest.WantCreated(t, st.Push(t, a.Endpoint, a, "signed", key), st.EndpointURL(), "60")
	wantNotification(t, a, id, "signed")
	a.Ack(a.CHID, id)
	et.NothingMore(t, st.NodeURL(), a.Client)
}

// TestE2EReconnectRace: pushes keep coming while the agent drops and
// re-establishes its connection, sometimes with notifications unacked.
// Every push answered 201 arrives, and none arrives again after an ack the
// server is known to have read.
//
// Which acks are known to be read: those before a clean close (Leave
// waits for the server's close frame), and those on a connection that
// stays open. Acks sent just before an abortive close are not: the client
// resets a connection it closes with unread data, and a reset may discard
// what the server had not read yet (gnet writes before it reads a broken
// connection). Those messages are "uncertain": they may come back once,
// which is at-least-once delivery working, not a duplicate.
func TestE2EReconnectRace(t *testing.T) {
	const pushes = 40
	st := stacktest.StartWith(t, maxUnacked(3))
	a := st.Subscribe(t, "")

	// The reader paces the pusher: each push takes a turn, and the reader
	// gives one back each time round its loop (a notification handled, or
	// a read that timed out). So pushes keep coming while the agent
	// reconnects, up to `ahead` in front of the reader (more than the
	// node's 3 unacked: some find it busy), whatever the machine's speed.
	const ahead = 4
	turns := make(chan struct{}, ahead)
	for range ahead {
		turns <- struct{}{}
	}
	ids := make(chan string, pushes)
	var pushErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ids)
		for i := range pushes {
			<-turns
			req, _ := http.NewRequest("POST", a.Endpoint, strings.NewReader(fmt.Sprint("msg ", i)))
			req.Header.Set("TTL", "600")
			req.Header.Set("Content-Encoding", "aes128gcm")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				pushErr = err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				pushErr = fmt.Errorf("push %d: status %d", i, resp.StatusCode)
				return
			}
			loc, _ := url.Parse(resp.Header.Get("Location"))
			ids <- strings.TrimPrefix(loc.Path, "/m/")
		}
	}()

	acked := map[string]bool{}     // acks the server has read
	uncertain := map[string]bool{} // acked just before an abortive close
	var connAcks []string          // acks sent on the current connection
	var history []string           // for the failure message
	received, reconnects := 0, 0
	c := a
	retried := 0
	// seen checks a notification that arrived and returns its version.
	seen := func(text string) string {
		t.Helper()
		var m map[string]any
		et.Must(t, json.Unmarshal([]byte(text), &m), "notification JSON")
		if m["messageType"] != "notification" {
			t.Fatalf("unexpected message %v", m)
		}
		v := m["version"].(string)
		history = append(history, fmt.Sprintf("conn %d: got %s", reconnects, v[len(v)-8:]))
		if acked[v] {
			t.Fatalf("%s delivered again after its ack:\n%s", v, strings.Join(history, "\n"))
		}
		if uncertain[v] {
			retried++
		}
		return v
	}
	// leave closes cleanly; what arrived meanwhile stays unacked.
	leave := func() {
		for _, text := range c.Leave() {
			seen(text)
			history = append(history, "(unread at leave)")
		}
		c = st.Reconnect(t, a)
		connAcks = connAcks[:0]
		reconnects++
	}
	deliver := func(text string) {
		t.Helper()
		v := seen(text)
		received++
		delete(uncertain, v)
		switch {
		case received%7 == 0:
			// Drop the connection with this one unacked: it must come back.
			history = append(history, "abortive close")
			for _, v := range connAcks {
				delete(acked, v)
				uncertain[v] = true
			}
			c.Close()
			c = st.Reconnect(t, a)
			connAcks = connAcks[:0]
			reconnects++
		case received%5 == 0:
			c.Ack(a.CHID, v)
			acked[v] = true
			history = append(history, "ack, leave")
			leave()
		default:
			c.Ack(a.CHID, v)
			acked[v] = true
			connAcks = append(connAcks, v)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	pusherDone := false
	var all []string
	for time.Now().Before(deadline) {
		// Collect the ids answered so far.
		for drained := false; !drained; {
			select {
			case id, ok := <-ids:
				if !ok {
					pusherDone, ids = true, nil
					drained = true
					break
				}
				all = append(all, id)
			default:
				drained = true
			}
		}
		if pusherDone && len(acked)+len(uncertain) == pushes {
			break
		}
		text, _, err := c.Next(300 * time.Millisecond)
		select {
		case turns <- struct{}{}:
		default:
		}
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			if pusherDone {
				// Quiet with pushes outstanding: reconnect, which checks
				// storage.
				leave()
			}
			continue
		case err != nil:
			t.Fatalf("read: %v", err)
		}
		deliver(text)
	}
	wg.Wait()
	if pushErr != nil {
		t.Fatal(pushErr)
	}
	for _, id := range all {
		if !acked[id] && !uncertain[id] {
			t.Fatalf("push %s answered 201 was never delivered (%d of %d acked, %d reconnects)", id, len(acked), len(all), reconnects)
		}
	}
	if len(all) != pushes {
		t.Fatalf("%d pushes answered", len(all))
	}
	// A new connection gets back at most the uncertain ones, once each;
	// after that nothing comes back and storage is empty.
	leave()
	et.Drain(t, st.NodeURL(), c.Client, func(text string) {
		v := seen(text)
		if !uncertain[v] {
			t.Fatalf("%s came back, but was neither unacked nor uncertain:\n%s", v, strings.Join(history, "\n"))
		}
		delete(uncertain, v)
		acked[v] = true
		c.Ack(a.CHID, v)
	})
	leave()
	et.NothingMore(t, st.NodeURL(), c.Client)
	et.Eventually(t, 5*time.Second, "storage empty", func() bool { return storedCount(t, st, a.UAID) == 0 })
	t.Logf("%d pushes, %d deliveries, %d reconnects, %d redelivered after an ack lost to a reset", pushes, received, reconnects, retried)
}

// helloGate orders the three calls of a push that races a reconnecting
// user agent's hello: the hello's router write is held until the push's
// save starts, and the save until the hello's storage check has read.
type helloGate struct {
	storage.Store
	armed       atomic.Bool
	connectOnce sync.Once
	readOnce    sync.Once
	saving      chan struct{}
	read        chan struct{}
}

func (g *helloGate) Connect(ctx context.Context, u storage.User) error {
	err := g.Store.Connect(ctx, u)
	if g.armed.Load() {
		g.connectOnce.Do(func() { <-g.saving })
	}
	return err
}

func (g *helloGate) SaveMessage(ctx context.Context, uaid uuid.UUID, m storage.Message) error {
	if g.armed.Load() {
		close(g.saving)
		<-g.read
	}
	return g.Store.SaveMessage(ctx, uaid, m)
}

func (g *helloGate) TimestampMessages(ctx context.Context, uaid uuid.UUID, after uint64, limit int) ([]storage.Message, error) {
	ms, err := g.Store.TimestampMessages(ctx, uaid, after, limit)
	if g.armed.Load() {
		g.readOnce.Do(func() { close(g.read) })
	}
	return ms, err
}

// TestE2EPushDuringHello: a push that reaches the node after a
// reconnecting agent's hello wrote the router record, and is stored after
// the hello's storage check read, is still delivered on that connection,
// and the router record keeps naming the node. (The node used to answer
// "not here" before its registry had the session: the endpoint cleared
// node_id and the push waited for the next reconnect. The load tester's
// churn scenario found it.)
func TestE2EPushDuringHello(t *testing.T) {
	gate := &helloGate{saving: make(chan struct{}), read: make(chan struct{})}
	st := stacktest.StartWith(t, stacktest.Options{Through: func(s storage.Store) storage.Store {
		gate.Store = s
		return gate
	}})
	a := st.Left(t)

	gate.armed.Store(true)
	b := *a
	b.Client = et.Dial(t, st.WSAddr())
	b.Send(map[string]any{"messageType": "hello", "use_webpush": true, "uaid": a.UAID})
	et.Eventually(t, 5*time.Second, "the hello's router record written", func() bool { return st.NodeID(t, a.UAID) != "" })
	id := push(t, st, &b, "600", "during hello")
	if r := b.Read(); r["messageType"] != "hello" || r["uaid"] != a.UAID {
		t.Fatalf("hello reply %v", r)
	}
	wantNotification(t, &b, id, "during hello")
	b.Ack(b.CHID, id)
	if node := st.NodeID(t, a.UAID); node != st.NodeURL() {
		t.Fatalf("router record names %q while the agent is connected to %s", node, st.NodeURL())
	}
	et.Eventually(t, 5*time.Second, "acked message deleted", func() bool { return storedCount(t, st, a.UAID) == 0 })
}

// TestE2ERouteCache: the second push to a subscription goes on the cached
// route (no storage read); a cached route to a connection that is gone,
// or to one whose client unsubscribed a channel since, is refused by the
// node (409) and the push is routed from storage: delivered once to the
// new connection, and 410 for the channel that is gone.
func TestE2ERouteCache(t *testing.T) {
	st := stacktest.Start(t)
	a := st.Subscribe(t, "")
	counts := func(want string) {
		t.Helper()
		eng, api := st.Metrics(t)
		got := grepLines(api, "autoendpoint_route_cache_total") + "\n" + grepLines(eng, `autoconnect_direct_total{result="stale"}`)
		if got != want {
			t.Fatalf("route cache and stale counts:\n%s\nwant\n%s", got, want)
		}
	}
	// deliver pushes data to sub once the node has no storage job queued
	// or running: a client whose hello's storage check or an ack's delete
	// is still running is answered busy, and its push stored instead.
	// Reports whether the node answered busy all the same (the moment
	// between a job's end and its client taking the result).
	deliver := func(sub *stacktest.Subscriber, data string) (busy bool) {
		t.Helper()
		waitFor(t, "the node's storage jobs to finish", func() bool { return engineMetric(t, st, "autoconnect_pending_work") == 0 })
		before := engineMetric(t, st, `autoconnect_direct_total{result="busy"}`)
		id := push(t, st, sub, "60", data)
		wantNotification(t, sub, id, data)
		sub.Ack(sub.CHID, id)
		return engineMetric(t, st, `autoconnect_direct_total{result="busy"}`) > before
	}
	// learn delivers from storage until a push goes straight to sub's
	// connection, which the cache then learns (a busy one was stored and
	// teaches it nothing; it is not counted either, a cache miss).
	learn := func(sub *stacktest.Subscriber, data string) {
		t.Helper()
		for deliver(sub, data) {
		}
	}
	learn(a, "learned")
	if deliver(a, "cached") {
		t.Fatal("the cached push was answered busy with no storage job running")
	}
	counts(`autoendpoint_route_cache_total{result="delivered"} 1` + "\n" +
		`autoendpoint_route_cache_total{result="fallback"} 0` + "\n" + `autoconnect_direct_total{result="stale"} 0`)

	// The user agent connects again (the node evicts the old connection):
	// the cached route names the old one.
	before := st.NodeConnectedAt(t, a.UAID)
	for time.Now().UnixMilli() <= before {
		time.Sleep(time.Millisecond) // a new connection's connected_at is a later millisecond
	}
	b := st.Reconnect(t, a)
	if after := st.NodeConnectedAt(t, a.UAID); after <= before {
		t.Fatalf("connected_at %d after reconnecting, was %d", after, before)
	}
	learn(b, "after reconnect")
	counts(`autoendpoint_route_cache_total{result="delivered"} 1` + "\n" +
		`autoendpoint_route_cache_total{result="fallback"} 1` + "\n" + `autoconnect_direct_total{result="stale"} 1`)

	// Cached again; the client unsubscribes on this connection: the next
	// push is refused on the cached route, and storage says 410.
	if deliver(b, "cached again") {
		t.Fatal("the cached push was answered busy with no storage job running")
	}
	b.Send(map[string]any{"messageType": "unregister", "channelID": b.CHID})
	if r := b.Read(); r["messageType"] != "unregister" || r["status"] != 200.0 {
		t.Fatalf("unregister reply %v", r)
	}
	r := st.Push(t, b.Endpoint, b, "gone", nil, "TTL", "60")
	if r.Status != http.StatusGone {
		t.Fatalf("push to the unsubscribed channel: %d %s, want 410", r.Status, r.Body)
	}
	counts(`autoendpoint_route_cache_total{result="delivered"} 2` + "\n" +
		`autoendpoint_route_cache_total{result="fallback"} 2` + "\n" + `autoconnect_direct_total{result="stale"} 2`)
	et.NothingMore(t, st.NodeURL(), b.Client)
}
