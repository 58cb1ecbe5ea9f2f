package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/engine"
	"github.com/autopush-go/autopush/internal/nodeapi"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
	"github.com/gobwas/ws"
	"github.com/google/uuid"
)

// TestKey is a fixed CRYPTO_KEY for tests.
const TestKey = "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4="

// TestSecret is the node secret Config sets; Push and NodeCall send it
// when given "".
const TestSecret = "enginetest-node-secret"

// NoSecret makes Push and NodeCall send no Authorization header.
const NoSecret = "-"

// Config returns a node config for tests: loopback listeners on free
// ports, the test key, quick timeouts.
func Config() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.Listen, cfg.RouterListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.CryptoKey = TestKey
	cfg.NodeSecret = TestSecret
	cfg.EndpointURL = "http://127.0.0.1:8082"
	cfg.DrainWindow = 200 * time.Millisecond
	cfg.StorageTimeout = 10 * time.Second
	cfg.VersionFile = ""
	return cfg
}

// Start runs a node on store until the test ends.
func Start(t testing.TB, store storage.Store, cfg engine.Config) *engine.Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := engine.New(cfg, store, log)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("engine start: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Client is one user agent's websocket, read frame by frame so tests
// control pings and see every close.
type Client struct {
	t    testing.TB
	conn net.Conn
	// AnswerPings makes Read answer server pings (true by default); a test
	// of the keepalive turns it off.
	AnswerPings bool
	lastSent    string // the start of the last text sent, for failures
}

// FreeAddr reserves a loopback port and releases it: for a listener the
// caller must name before it starts (a process's flag, or an endpoint URL
// and so the VAPID audience).
//
// The port is drawn below the kernel's ephemeral range, which every
// outgoing connection and every listener on port 0 draws from: between
// the release and the caller's listen, only another FreeAddr picking the
// same port at random could take it, not the machine's other traffic (a
// port in the range was taken so under make test-stress: "address already
// in use").
func FreeAddr(t testing.TB) string {
	t.Helper()
	if lo, ok := ephemeralStart(); ok && lo > freeAddrFloor+1000 {
		for range 200 {
			port := freeAddrFloor + rand.IntN(lo-freeAddrFloor)
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				ln.Close()
				return ln.Addr().String()
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// HeldAddr is a loopback address a listener holds until the test ends:
// as another process's, for a node told to listen there.
func HeldAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// ConnectUntil opens a TCP connection to addr every 100 ms, keeping each
// open until the test ends, until done closes; it fails t if that takes
// longer than timeout. It is the crowd a node out of file descriptors
// meets: the kernel completes each connection and the node's accept
// fails, or, should a descriptor have come free meanwhile, takes one
// client and holds it, and the next finds none.
func ConnectUntil(t testing.TB, addr string, done <-chan struct{}, timeout time.Duration) {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	deadline := time.After(timeout)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conns = append(conns, c)
		}
		select {
		case <-done:
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("still running %v after the first connection to %s; %d connected", timeout, addr, len(conns))
		}
	}
}

// freeAddrFloor is the lowest port FreeAddr picks: above the well-known
// and common service ports.
const freeAddrFloor = 20000

// ephemeralStart is the first port of the kernel's ephemeral range.
func ephemeralStart() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	lo, err := strconv.Atoi(f[0])
	return lo, err == nil
}

// Dial opens a websocket to a node, offering Firefox's subprotocol.
func Dial(t testing.TB, addr string) *Client {
	t.Helper()
	return DialFrom(t, addr, "")
}

// DialFrom is Dial from the source address src (a 127.0.0.x: loopback
// takes any of them), or the kernel's choice when "".
func DialFrom(t testing.TB, addr, src string) *Client {
	t.Helper()
	c, err := TryDialFrom(t, addr, src)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TryDialFrom is DialFrom returning the failure (with what the node
// answered) instead of failing the test.
func TryDialFrom(t testing.TB, addr, src string) (*Client, error) {
	var rec *recConn
	nd := &net.Dialer{}
	if src != "" {
		nd.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	d := ws.Dialer{Protocols: []string{"push-notification"}, Timeout: 5 * time.Second,
		NetDial: func(ctx context.Context, network, a string) (net.Conn, error) {
			c, err := nd.DialContext(ctx, network, a)
			if err != nil {
				return nil, err
			}
			rec = &recConn{Conn: c}
			return rec, nil
		}}
	conn, _, _, err := d.Dial(context.Background(), "ws://"+addr+"/")
	if err != nil {
		if rec != nil {
			rec.Close()
			return nil, fmt.Errorf("dial %s: %w; read %q local %v", addr, err, rec.got, rec.LocalAddr())
		}
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Client{t: t, conn: conn, AnswerPings: true}, nil
}

// SendRaw sends one masked text frame.
func (c *Client) SendRaw(text string) {
	c.t.Helper()
	c.lastSent = text[:min(len(text), 96)]
	c.SendFrame(ws.OpText, []byte(text))
}

// SendFrame sends one masked frame of any opcode.
func (c *Client) SendFrame(op ws.OpCode, payload []byte) {
	c.t.Helper()
	if err := writeFrame(c.conn, op, payload); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// writeFrame writes one masked frame in one write, as a browser does:
// ws.WriteFrame writes the header and the payload apart, and a reset
// arriving between the two would fail a frame that was half sent.
func writeFrame(conn net.Conn, op ws.OpCode, payload []byte) error {
	var b bytes.Buffer
	if err := ws.WriteFrame(&b, ws.MaskFrameInPlace(ws.NewFrame(op, true, append([]byte(nil), payload...)))); err != nil {
		return err
	}
	_, err := conn.Write(b.Bytes())
	return err
}

// TrySendFrame is SendFrame returning the write error instead of failing.
func (c *Client) TrySendFrame(op ws.OpCode, payload []byte) error {
	c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return writeFrame(c.conn, op, payload)
}

// Send sends v as JSON.
func (c *Client) Send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.SendRaw(string(b))
}

// Patience is how long a helper waits for something that must happen: a
// reply, a close. Only a real failure reaches it; a CQL server or a
// race-instrumented node on a loaded CI machine can stall for seconds.
const Patience = 30 * time.Second

// ErrClosed is returned by Next once the server closed; CloseCode says how.
var ErrClosed = errors.New("closed by server")

// Next returns the next text message, answering pings when AnswerPings.
// A close frame returns ErrClosed with the code; a server ping not
// answered is returned as the message "<ping>".
func (c *Client) Next(timeout time.Duration) (string, ws.StatusCode, error) {
	deadline := time.Now().Add(timeout)
	for {
		c.conn.SetReadDeadline(deadline)
		f, err := readFrame(c.conn)
		if err != nil {
			return "", 0, err
		}
		switch f.Header.OpCode {
		case ws.OpText:
			return string(f.Payload), 0, nil
		case ws.OpPing:
			if !c.AnswerPings {
				return "<ping>", 0, nil
			}
			c.SendFrame(ws.OpPong, f.Payload)
		case ws.OpClose:
			code, _ := ws.ParseCloseFrameData(f.Payload)
			return "", code, ErrClosed
		}
	}
}

// Read returns the next message decoded as JSON, failing the test on
// anything else.
func (c *Client) Read() map[string]any {
	c.t.Helper()
	text, code, err := c.Next(Patience)
	if err != nil {
		// Which step stalled: the last message this client sent (a
		// notification awaited after a push names the one before it).
		c.t.Fatalf("read: %v (close code %d); the last message sent was %q", err, code, c.lastSent)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		c.t.Fatalf("not JSON: %q", text)
	}
	return m
}

// ExpectClose waits for the server's close frame and returns its code.
func (c *Client) ExpectClose() ws.StatusCode {
	c.t.Helper()
	for {
		text, code, err := c.Next(Patience)
		if errors.Is(err, ErrClosed) {
			return code
		}
		if err != nil {
			c.t.Fatalf("waiting for close: %v", err)
		}
		c.t.Logf("message before close: %s", text)
	}
}

// AnswerClose answers the node's close frame (after Next returned
// ErrClosed, or ExpectClose) as Firefox does: a close frame back, then
// reading until the node closes the connection. A draining node reads
// everything sent before this answer, acks included, and closes the
// connection once it has it (docs/protocol.md, Draining).
func (c *Client) AnswerClose() {
	c.t.Helper()
	c.SendFrame(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
	for {
		_, _, err := c.Next(Patience)
		if err == nil || errors.Is(err, ErrClosed) {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatalf("answered the close: the node did not close the connection: %v", err)
		}
		c.conn.Close()
		return
	}
}

// Close closes the TCP connection without a websocket close. With
// unread data in its buffer the kernel resets the connection, and the
// server may then drop what the client sent last (its acks): a test that
// needs its acks seen uses Leave.
func (c *Client) Close() { c.conn.Close() }

// Leave closes cleanly, as Firefox does: a close frame, then reading
// until the server's close answers it, so everything sent before (acks
// included) has been processed. It returns the text messages that arrived
// meanwhile, which the client did not ack.
func (c *Client) Leave() []string {
	c.t.Helper()
	c.SendFrame(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
	var unread []string
	for {
		text, _, err := c.Next(Patience)
		if err != nil {
			// ErrClosed, or EOF from a server that closed without answering.
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatalf("leave: no close from the server: %v", err)
			}
			c.conn.Close()
			return unread
		}
		unread = append(unread, text)
	}
}

// Hello sends hello (with uaid unless empty, omitting the key as Firefox
// does on first use) and returns the assigned uaid.
func (c *Client) Hello(uaid string) string {
	c.t.Helper()
	return c.HelloBroadcasts(uaid, nil)["uaid"].(string)
}

// HelloBroadcasts sends hello naming broadcasts (id -> the version the
// client has) and returns the reply.
func (c *Client) HelloBroadcasts(uaid string, broadcasts map[string]string) map[string]any {
	c.t.Helper()
	if broadcasts == nil {
		broadcasts = map[string]string{}
	}
	msg := map[string]any{"messageType": "hello", "use_webpush": true, "broadcasts": broadcasts}
	if uaid != "" {
		msg["uaid"] = uaid
	}
	c.Send(msg)
	r := c.Read()
	if r["messageType"] != "hello" || r["status"] != 200.0 {
		c.t.Fatalf("hello reply %v", r)
	}
	return r
}

// Register subscribes chid (with a VAPID key unless empty) and returns
// the reply.
func (c *Client) Register(chid, key string) map[string]any {
	c.t.Helper()
	msg := map[string]any{"messageType": "register", "channelID": chid}
	if key != "" {
		msg["key"] = key
	}
	c.Send(msg)
	return c.Read()
}

// Ack acks one notification.
func (c *Client) Ack(chid, version string) {
	c.t.Helper()
	c.Send(map[string]any{"messageType": "ack", "updates": []any{map[string]any{"channelID": chid, "version": version, "code": 100}}})
}

// Push delivers n through a node's internal API (as the endpoint tier
// does) and returns the status. secret "" sends TestSecret, NoSecret
// none.
func Push(t testing.TB, srv *engine.Server, uaid string, n *protocol.Notification, secret string) int {
	t.Helper()
	body := nodeapi.AppendNotification(nil, n)
	return NodeCall(t, http.MethodPut, srv.NodeURL()+"/push/"+uaid, string(body), secret)
}

// NodeCall makes one internal API call and returns the status. secret ""
// sends TestSecret, NoSecret none.
func NodeCall(t testing.TB, method, url, body, secret string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	switch secret {
	case "":
		req.Header.Set("Authorization", "Bearer "+TestSecret)
	case NoSecret:
	default:
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Notification builds a direct notification for chid.
func Notification(chid, version, data string) *protocol.Notification {
	n := &protocol.Notification{ChannelID: chid, Version: version, TTL: 60, Timestamp: time.Now().Unix(),
		SortKey: storage.NewSortKey(), Data: data}
	if data != "" {
		n.Headers = []protocol.Header{{Name: "encoding", Value: "aes128gcm"}}
	}
	return n
}

// Eventually polls cond until it holds or the timeout passes; the timeout
// is at least Patience, as cond is something that must happen.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(max(timeout, Patience))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Must fails the test on err.
func Must(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, fmt.Sprint(err))
	}
}

// maxTestFrame bounds what the test client reads from a server.
const maxTestFrame = 1 << 20

// readFrame reads one frame, refusing a declared length over maxTestFrame.
func readFrame(r io.Reader) (ws.Frame, error) {
	h, err := ws.ReadHeader(r)
	if err != nil {
		return ws.Frame{}, err
	}
	if h.Length > maxTestFrame {
		return ws.Frame{}, fmt.Errorf("server frame of %d bytes", h.Length)
	}
	payload := make([]byte, h.Length)
	if _, err := io.ReadFull(r, payload); err != nil {
		return ws.Frame{}, err
	}
	if h.Masked {
		ws.Cipher(payload, h.Mask, 0)
	}
	return ws.Frame{Header: h, Payload: payload}, nil
}

type recConn struct {
	net.Conn
	got []byte
}

func (r *recConn) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	if len(r.got) < 1024 {
		r.got = append(r.got, p[:n]...)
	}
	return n, err
}

// Settle waits until the node at nodeURL (its internal API) has no work
// of its own left: nothing queued or running on its storage workers, no
// result waiting for an event loop, no closed connection's leave work
// (autoconnect_pending_work is 0). What the node does by itself in answer
// to what came before (a stored page, an ack's delete, a leave) has then
// happened.
func Settle(t testing.TB, nodeURL string) {
	t.Helper()
	Eventually(t, 30*time.Second, "the node to settle", func() bool {
		v, ok := Metric(t, nodeURL, "autoconnect_pending_work")
		return ok && v == 0
	})
}

// Scrape reads the node's /metrics (nodeURL: its internal API) into
// series -> value, series as served (e.g. `x_total{kind="y"}`).
func Scrape(t testing.TB, nodeURL string) map[string]float64 {
	t.Helper()
	m, err := promtext.Scrape(context.Background(), nil, nodeURL+"/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return m
}

// Metric reads one series of the node's /metrics; false when absent.
func Metric(t testing.TB, nodeURL, series string) (float64, bool) {
	t.Helper()
	v, ok := Scrape(t, nodeURL)[series]
	return v, ok
}

// Barrier makes a round trip (a register): the node handles a client's
// messages in order, so once the reply is here everything the client sent
// before has been handled. The reply must be the next message: anything
// the node sent first fails the test. (Not a ping: a second one within
// min-client-ping closes the connection.)
func (c *Client) Barrier() {
	c.t.Helper()
	c.roundTrip(func(text string) { c.t.Fatalf("barrier: got %s before the register reply", text) })
}

// roundTrip registers a fresh channel and reads until its reply, handing
// every other message that arrives first to fn.
func (c *Client) roundTrip(fn func(text string)) {
	c.t.Helper()
	chid := uuid.NewString()
	c.Send(map[string]any{"messageType": "register", "channelID": chid})
	for {
		text, code, err := c.Next(Patience)
		if err != nil {
			c.t.Fatalf("round trip: %v (close code %d)", err, code)
		}
		var m map[string]any
		if json.Unmarshal([]byte(text), &m) == nil && m["messageType"] == "register" && m["channelID"] == chid {
			if m["status"] != 200.0 {
				c.t.Fatalf("round trip: register answered %s", text)
			}
			return
		}
		fn(text)
	}
}

// Drain hands fn every message the node sends c on its own until it has
// nothing more to send: a round trip (the node has handled everything c
// sent, acks included), the node settles (it has done all that caused),
// a second round trip (anything that work sent arrives before its reply);
// repeated until a round brings nothing. fn may ack what it gets. A
// positive check: it never waits for time to pass. It returns how many
// messages fn got.
func Drain(t testing.TB, nodeURL string, c *Client, fn func(text string)) int {
	t.Helper()
	total := 0
	for {
		n := 0
		count := func(text string) { n++; fn(text) }
		c.roundTrip(count)
		Settle(t, nodeURL)
		c.roundTrip(count)
		if total += n; n == 0 {
			return total
		}
	}
}

// NothingMore checks that the node sends c nothing more on its own (see
// Drain).
func NothingMore(t testing.TB, nodeURL string, c *Client) {
	t.Helper()
	Drain(t, nodeURL, c, func(text string) { t.Fatalf("expected nothing more from the node, got %s", text) })
}

// AnswerPingsUntil reads, answering the node's keepalive pings, until n
// were answered; any message or close before that fails the test.
func (c *Client) AnswerPingsUntil(n int, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for answered := 0; answered < n; answered++ {
		c.conn.SetReadDeadline(deadline)
		f, err := readFrame(c.conn)
		if err != nil {
			c.t.Fatalf("waiting for ping %d of %d: %v", answered+1, n, err)
		}
		if f.Header.OpCode != ws.OpPing {
			c.t.Fatalf("got %v %q while waiting for pings", f.Header.OpCode, f.Payload)
		}
		c.SendFrame(ws.OpPong, f.Payload)
	}
	c.conn.SetReadDeadline(time.Time{})
}
