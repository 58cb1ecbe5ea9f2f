package apitier

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

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// stack is a connection node and an endpoint node on one embedded store,
// in this process, on 127.0.0.1.
type stack struct {
	store *embedded.Store
	node  *engine.Server
	api   *Server
}

func startStack(t testing.TB, mutateNode func(*engine.Config), mutateAPI func(*Config)) *stack {
	t.Helper()
	store := newStore(t)
	return startStackOn(t, store, store, mutateNode, mutateAPI)
}

// startStackOn runs both tiers on through, a view of store (a test's
// wrapper that orders calls); the stack's checks read store directly.
func startStackOn(t testing.TB, store *embedded.Store, through storage.Store, mutateNode func(*engine.Config), mutateAPI func(*Config)) *stack {
	t.Helper()
	ncfg := et.Config()
	if mutateNode != nil {
		mutateNode(&ncfg)
	}
	node := et.Start(t, through, ncfg)
	api := startServer(t, through, mutateAPI)
	return &stack{store: store, node: node, api: api}
}

// agent is a user agent: a websocket client with one subscription.
type agent struct {
	*et.Client
	uaid, chid string
	path       string // the push endpoint's path
}

// connect says hello (with uaid unless "") and, when chid is not "",
// registers it (with a VAPID key unless "").
func (st *stack) connect(t testing.TB, uaid, chid, key string) *agent {
	t.Helper()
	a := &agent{Client: et.Dial(t, st.node.Addr())}
	a.uaid = a.Hello(uaid)
	if uaid != "" && a.uaid != uaid {
		t.Fatalf("hello: uaid %s, want %s", a.uaid, uaid)
	}
	if chid == "" {
		return a
	}
	a.chid = chid
	r := a.Register(chid, key)
	if r["status"] != 200.0 {
		t.Fatalf("register: %v", r)
	}
	ep, _ := r["pushEndpoint"].(string)
	if !strings.HasPrefix(ep, testEndpointURL+"/wpush/") {
		t.Fatalf("push endpoint %q", ep)
	}
	a.path = ep[len(testEndpointURL):]
	return a
}

// reconnect opens a new connection for the same user agent.
func (st *stack) reconnect(t testing.TB, a *agent) *agent {
	t.Helper()
	b := st.connect(t, a.uaid, "", "")
	b.chid, b.path = a.chid, a.path
	return b
}

// push POSTs data (aes128gcm) or nothing to a's endpoint and returns the
// message id.
func (st *stack) push(t testing.TB, a *agent, ttl, data string, kv ...string) string {
	t.Helper()
	h := append([]string{"TTL", ttl}, kv...)
	var body []byte
	if data != "" {
		body = []byte(data)
		h = append(h, "Content-Encoding", "aes128gcm")
	}
	return wantCreated(t, st.api, send(t, st.api, "POST", a.path, body, h...), ttl)
}

// wantNotification reads the next message: a notification of version
// carrying data (base64url) and its encoding.
func (a *agent) wantNotification(t testing.TB, version, data string) {
	t.Helper()
	r := a.Read()
	if r["messageType"] != "notification" || r["channelID"] != a.chid || r["version"] != version {
		t.Fatalf("got %v, want notification %s", r, version)
	}
	if data == "" {
		if _, ok := r["data"]; ok {
			t.Fatalf("payload-less push arrived with data: %v", r)
		}
		return
	}
	h, _ := r["headers"].(map[string]any)
	if r["data"] != base64.RawURLEncoding.EncodeToString([]byte(data)) || h["encoding"] != "aes128gcm" {
		t.Fatalf("notification %v, want data %q", r, data)
	}
}

func (st *stack) storedCount(t testing.TB, uaid string) int {
	return len(stored(t, st.api, uuid.MustParse(uaid)))
}

func (st *stack) nodeID(t testing.TB, uaid string) string {
	u, err := st.store.GetUser(context.Background(), uuid.MustParse(uaid))
	et.Must(t, err, "get user")
	return u.NodeID
}

func TestE2EDirectDelivery(t *testing.T) {
	st := startStack(t, nil, nil)
	a := st.connect(t, "", uuid.NewString(), "")
	id := st.push(t, a, "60", "direct payload")
	a.wantNotification(t, id, "direct payload")
	if n := st.storedCount(t, a.uaid); n != 0 {
		t.Fatalf("direct delivery stored %d messages", n)
	}
	a.Ack(a.chid, id)
	// Without payload, and with TTL 0: still direct.
	id = st.push(t, a, "0", "")
	a.wantNotification(t, id, "")
	a.Ack(a.chid, id)
	// Legacy aesgcm: the client gets the crypto headers it decrypts with,
	// under the reference's names, quotes and padding stripped.
	r := send(t, st.api, "POST", a.path, []byte("legacy"), "TTL", "60", "Content-Encoding", "aesgcm",
		"Encryption", `salt="c2FsdHNhbHQ="`, "Crypto-Key", `dh="BDw9T0eImd4ax818VcYqDK_DOhcuDswKeroYyNkdhYmygoLSDlSiWpuoWYUSSFxi25cyyNTR5k9Ny93DzZc0UI4="`)
	id = wantCreated(t, st.api, r, "60")
	m := a.Read()
	h, _ := m["headers"].(map[string]any)
	if m["version"] != id || m["data"] != base64.RawURLEncoding.EncodeToString([]byte("legacy")) || h["encoding"] != "aesgcm" ||
		h["encryption"] != "salt=c2FsdHNhbHQ" ||
		h["crypto_key"] != "dh=BDw9T0eImd4ax818VcYqDK_DOhcuDswKeroYyNkdhYmygoLSDlSiWpuoWYUSSFxi25cyyNTR5k9Ny93DzZc0UI4" {
		t.Fatalf("aesgcm notification %v", m)
	}
	a.Ack(a.chid, id)
	a.Quiet(200 * time.Millisecond)
}

func TestE2EStoredThenReconnect(t *testing.T) {
	st := startStack(t, nil, nil)
	a := st.connect(t, "", uuid.NewString(), "")
	a.Close()
	// Pushed once the node noticed the agent left. (Before that, a push
	// is written to the closing socket and stored by the node as it
	// closes, under a new sort key: TestE2EReconnectRace covers that.)
	et.Eventually(t, 5*time.Second, "node_id cleared by the node", func() bool { return st.nodeID(t, a.uaid) == "" })
	first := st.push(t, a, "600", "one")
	second := st.push(t, a, "600", "two")
	st.push(t, a, "600", "topic v1", "Topic", "score")
	topic2 := st.push(t, a, "600", "topic v2", "Topic", "score")
	st.push(t, a, "0", "dropped")
	if n := st.storedCount(t, a.uaid); n != 3 {
		t.Fatalf("stored %d messages, want 3 (2 + the newest topic version)", n)
	}
	if node := st.nodeID(t, a.uaid); node != "" {
		t.Fatalf("node_id %q after the agent left", node)
	}
	b := st.reconnect(t, a)
	b.wantNotification(t, topic2, "topic v2") // topic messages first
	b.wantNotification(t, first, "one")
	b.wantNotification(t, second, "two")
	b.Quiet(200 * time.Millisecond) // neither the replaced topic version nor the TTL 0 push
	for _, id := range []string{topic2, first, second} {
		b.Ack(b.chid, id)
	}
	et.Eventually(t, 5*time.Second, "acked messages deleted", func() bool { return st.storedCount(t, a.uaid) == 0 })
	b.Close()
	c := st.reconnect(t, a)
	c.Quiet(300 * time.Millisecond)
}

func TestE2ENodeUnreachable(t *testing.T) {
	st := startStack(t, nil, nil)
	a := st.connect(t, "", uuid.NewString(), "")
	a.Close()
	et.Eventually(t, 5*time.Second, "node_id cleared by the node", func() bool { return st.nodeID(t, a.uaid) == "" })
	// The record names a node that is gone (crashed, say).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	et.Must(t, err, "listen")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	time.Sleep(2 * time.Millisecond)
	et.Must(t, st.store.Connect(context.Background(), storage.User{UAID: uuid.MustParse(a.uaid),
		RouterType: storage.RouterWebPush, NodeID: dead, ConnectedAt: time.Now().UnixMilli()}), "connect to a dead node")
	id := st.push(t, a, "60", "for later")
	if node := st.nodeID(t, a.uaid); node != "" {
		t.Fatalf("node_id %q not cleared", node)
	}
	if n := st.storedCount(t, a.uaid); n != 1 {
		t.Fatalf("stored %d", n)
	}
	time.Sleep(2 * time.Millisecond) // a newer connected_at than the dead node's
	b := st.reconnect(t, a)
	b.wantNotification(t, id, "for later")
	b.Ack(b.chid, id)
	et.Eventually(t, 5*time.Second, "acked message deleted", func() bool { return st.storedCount(t, a.uaid) == 0 })
}

func TestE2ENodeBusy(t *testing.T) {
	st := startStack(t, func(c *engine.Config) { c.MaxUnacked = 1 }, nil)
	a := st.connect(t, "", uuid.NewString(), "")
	first := st.push(t, a, "60", "first")
	a.wantNotification(t, first, "first")
	// One unacked: the node is busy, the endpoint stores and asks for a
	// check, which the node runs once the ack arrives.
	second := st.push(t, a, "60", "second")
	if n := st.storedCount(t, a.uaid); n != 1 {
		t.Fatalf("busy: stored %d, want 1", n)
	}
	if node := st.nodeID(t, a.uaid); node != st.node.NodeURL() {
		t.Fatalf("busy node lost its node_id: %q", node)
	}
	a.Quiet(200 * time.Millisecond)
	a.Ack(a.chid, first)
	a.wantNotification(t, second, "second")
	a.Ack(a.chid, second)
	et.Eventually(t, 5*time.Second, "acked stored message deleted", func() bool { return st.storedCount(t, a.uaid) == 0 })
	a.Quiet(200 * time.Millisecond)
}

func TestE2ETTLZero(t *testing.T) {
	st := startStack(t, nil, nil)
	a := st.connect(t, "", uuid.NewString(), "")
	id := st.push(t, a, "0", "now or never")
	a.wantNotification(t, id, "now or never")
	a.Ack(a.chid, id)
	a.Close()
	st.push(t, a, "0", "never")
	if n := st.storedCount(t, a.uaid); n != 0 {
		t.Fatalf("TTL 0 stored %d", n)
	}
	b := st.reconnect(t, a)
	b.Quiet(300 * time.Millisecond)
}

func TestE2EDeleteStoredMessage(t *testing.T) {
	st := startStack(t, nil, nil)
	a := st.connect(t, "", uuid.NewString(), "")
	a.Close()
	// Stored by the endpoint, under the id it answers: a push the node
	// wrote to the closing socket would be stored under a new sort key,
	// which that id no longer names.
	et.Eventually(t, 5*time.Second, "node_id cleared by the node", func() bool { return st.nodeID(t, a.uaid) == "" })
	cancelled := st.push(t, a, "600", "cancelled")
	kept := st.push(t, a, "600", "kept")
	if r := send(t, st.api, "DELETE", "/m/"+cancelled, nil); r.code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.code, r.body)
	}
	b := st.reconnect(t, a)
	b.wantNotification(t, kept, "kept")
	b.Ack(b.chid, kept)
	b.Quiet(300 * time.Millisecond)
}

func TestE2EVAPIDv2(t *testing.T) {
	st := startStack(t, nil, nil)
	key, other := newVAPIDKey(t), newVAPIDKey(t)
	a := st.connect(t, "", uuid.NewString(), key.b64)
	if !strings.HasPrefix(a.path, "/wpush/v2/") {
		t.Fatalf("endpoint %s is not v2", a.path)
	}
	wantError(t, send(t, st.api, "POST", a.path, nil, "TTL", "60"), 401, errno.InvalidAuth)
	wantError(t, send(t, st.api, "POST", a.path, nil, "TTL", "60", "Authorization", other.auth(t, testEndpointURL)), 401, errno.InvalidAuth)
	id := st.push(t, a, "60", "signed", "Authorization", key.auth(t, testEndpointURL))
	a.wantNotification(t, id, "signed")
	a.Ack(a.chid, id)
	a.Quiet(200 * time.Millisecond)
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
	st := startStack(t, func(c *engine.Config) { c.MaxUnacked = 3 }, nil)
	a := st.connect(t, "", uuid.NewString(), "")

	ids := make(chan string, pushes)
	var pushErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ids)
		for i := range pushes {
			req, _ := http.NewRequest("POST", "http://"+st.api.Addr()+a.path, strings.NewReader(fmt.Sprint("msg ", i)))
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
			time.Sleep(3 * time.Millisecond)
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
		c = st.reconnect(t, a)
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
			c = st.reconnect(t, a)
			connAcks = connAcks[:0]
			reconnects++
		case received%5 == 0:
			c.Ack(a.chid, v)
			acked[v] = true
			history = append(history, "ack, leave")
			leave()
		default:
			c.Ack(a.chid, v)
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
	for {
		text, _, err := c.Next(500 * time.Millisecond)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			break
		}
		et.Must(t, err, "read")
		v := seen(text)
		if !uncertain[v] {
			t.Fatalf("%s came back, but was neither unacked nor uncertain:\n%s", v, strings.Join(history, "\n"))
		}
		delete(uncertain, v)
		acked[v] = true
		c.Ack(a.chid, v)
	}
	leave()
	c.Quiet(300 * time.Millisecond)
	et.Eventually(t, 5*time.Second, "storage empty", func() bool { return st.storedCount(t, a.uaid) == 0 })
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
	store := newStore(t)
	gate := &helloGate{Store: store, saving: make(chan struct{}), read: make(chan struct{})}
	st := startStackOn(t, store, gate, nil, nil)
	a := st.connect(t, "", uuid.NewString(), "")
	a.Close()
	et.Eventually(t, 5*time.Second, "node_id cleared by the node", func() bool { return st.nodeID(t, a.uaid) == "" })

	gate.armed.Store(true)
	b := &agent{Client: et.Dial(t, st.node.Addr()), uaid: a.uaid, chid: a.chid, path: a.path}
	b.Send(map[string]any{"messageType": "hello", "use_webpush": true, "uaid": a.uaid})
	et.Eventually(t, 5*time.Second, "the hello's router record written", func() bool { return st.nodeID(t, a.uaid) != "" })
	id := st.push(t, b, "600", "during hello")
	if r := b.Read(); r["messageType"] != "hello" || r["uaid"] != a.uaid {
		t.Fatalf("hello reply %v", r)
	}
	b.wantNotification(t, id, "during hello")
	b.Ack(b.chid, id)
	if node := st.nodeID(t, a.uaid); node != st.node.NodeURL() {
		t.Fatalf("router record names %q while the agent is connected to %s", node, st.node.NodeURL())
	}
	et.Eventually(t, 5*time.Second, "acked message deleted", func() bool { return st.storedCount(t, a.uaid) == 0 })
}
