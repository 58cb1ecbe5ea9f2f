//go:build linux

package firefox

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	webpushgo "github.com/SherClockHolmes/webpush-go"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// subscription is PushSubscription.toJSON() as the page reports it.
type subscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
}

// appServer pushes to one subscription with the npm web-push package and
// with webpush-go, both signing with the application server's VAPID key
// the subscription was made with.
type appServer struct {
	node string // tools/webpush-node
	keys e2etest.VAPIDKeys
	sub  subscription
}

// npm sends payload (nil: no payload) with web-push through send.js.
func (s *appServer) npm(payload *string, topic string) (e2etest.SendResult, error) {
	var res e2etest.SendResult
	err := e2etest.RunNodeJSON(s.node, "send.js", map[string]any{
		"endpoint": s.sub.Endpoint, "p256dh": s.sub.Keys.P256dh, "auth": s.sub.Keys.Auth,
		"payload": payload, "ttl": 300, "topic": topic, "subject": "mailto:ops@example.com",
		"vapidPublic": s.keys.Public, "vapidPrivate": s.keys.Private,
	}, &res)
	return res, err
}

// golang sends payload with webpush-go and returns the status code.
func (s *appServer) golang(payload []byte, topic string) (int, error) {
	resp, err := webpushgo.SendNotification(payload, &webpushgo.Subscription{
		Endpoint: s.sub.Endpoint, Keys: webpushgo.Keys{P256dh: s.sub.Keys.P256dh, Auth: s.sub.Keys.Auth},
	}, &webpushgo.Options{Subscriber: "ops@example.com", VAPIDPublicKey: s.keys.Public,
		VAPIDPrivateKey: s.keys.Private, TTL: 300, Topic: topic})
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func str(s string) *string { return &s }

// TestFirefox: a real Firefox (firefox-esr, headless, fresh profile)
// subscribes through the server and its service worker receives what
// the npm web-push package and webpush-go send. Each scenario is a
// subtest; the summary at the end lists them with their results.
func TestFirefox(t *testing.T) {
	if os.Getenv("AUTOPUSH_E2E_FIREFOX") != "1" {
		t.Skip("the real-Firefox run is make e2e (it sets AUTOPUSH_E2E_FIREFOX=1, installs firefox-esr); make test runs it")
	}
	ffBin := firefoxBinary(t)
	nodeDir := e2etest.WebPushNode(t)
	logs, err := os.MkdirTemp("", "autopush-e2e-firefox-")
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: after Firefox and the server
	// have stopped and written their logs.
	t.Cleanup(func() {
		switch {
		case t.Failed():
			t.Logf("logs kept in %s", logs)
			t.Logf("---- tail of %s ----\n%s", filepath.Join(logs, "firefox.log"), tail(filepath.Join(logs, "firefox.log"), 80))
		case os.Getenv("AUTOPUSH_E2E_KEEP_LOGS") == "":
			os.RemoveAll(logs)
		}
	})
	t.Logf("logs in %s (kept if the test fails, or with AUTOPUSH_E2E_KEEP_LOGS=1)", logs)

	d := newServer(t, filepath.Join(logs, "bin"), logs)
	d.start(t, d.ws)
	pg := startPage(t)
	profile := filepath.Join(logs, "profile")
	writeProfile(t, profile, "ws://"+d.ws+"/")
	launched := time.Now()
	ff := launch(t, ffBin, profile, pg.url(), filepath.Join(logs, "firefox.log"))
	t.Logf("firefox started (pgid %d), page %s", ff.p.PID(), pg.url())

	s := &appServer{node: nodeDir}
	e2etest.NodeJSON(t, nodeDir, "keys.js", nil, &s.keys)

	var summary []string
	scenario := func(name string, fn func(t *testing.T)) bool {
		start := time.Now()
		ok := t.Run(name, fn)
		select {
		case <-ff.p.Exited():
			t.Fatalf("firefox exited during %s: %v", name, ff.p.Wait())
		default:
		}
		summary = append(summary, fmt.Sprintf("%s  %-32s %5.1fs", map[bool]string{true: "PASS", false: "FAIL"}[ok], name, time.Since(start).Seconds()))
		return ok
	}
	defer func() { t.Logf("scenarios:\n  %s", strings.Join(summary, "\n  ")) }()

	if !scenario("subscribe_v2_endpoint", func(t *testing.T) {
		if err := pg.do("subscribe", map[string]any{"key": s.keys.Public}, 90*time.Second, &s.sub); err != nil {
			t.Fatal(err)
		}
		t.Logf("subscribed %.1fs after launch: %s", time.Since(launched).Seconds(), s.sub.Endpoint)
		if !strings.HasPrefix(s.sub.Endpoint, "http://"+d.http+"/wpush/v2/") || s.sub.Keys.P256dh == "" || s.sub.Keys.Auth == "" {
			t.Fatalf("a subscription with an applicationServerKey must get a v2 endpoint and keys: %+v", s.sub)
		}
	}) {
		t.FailNow()
	}

	scenario("payload_byte_for_byte", func(t *testing.T) {
		text := "héllo from web-push ✓ " + strings.Repeat("0123456789", 300)
		from := pg.mark()
		res, err := s.npm(&text, "")
		if err != nil || res.Status != http.StatusCreated {
			t.Fatalf("web-push: %+v %v", res, err)
		}
		expectPushes(t, pg, from, [][]byte{[]byte(text)}, 20*time.Second)

		// Every byte value, not valid UTF-8: the data must not pass
		// through a text decoding anywhere.
		bin := make([]byte, 2048)
		for i := range bin {
			bin[i] = byte(i * 7)
		}
		from = pg.mark()
		if code, err := s.golang(bin, ""); err != nil || code != http.StatusCreated {
			t.Fatalf("webpush-go: %d %v", code, err)
		}
		expectPushes(t, pg, from, [][]byte{bin}, 20*time.Second)
	})

	scenario("no_payload_data_null", func(t *testing.T) {
		from := pg.mark()
		res, err := s.npm(nil, "")
		if err != nil || res.Status != http.StatusCreated {
			t.Fatalf("web-push: %+v %v", res, err)
		}
		expectPushes(t, pg, from, [][]byte{nil}, 20*time.Second)
	})

	scenario("burst_100_delivered_and_acked", func(t *testing.T) { burst(t, d, pg, s, 100) })
	scenario("offline_topic_same_uaid", func(t *testing.T) { offline(t, d, pg, s, ff) })

	scenario("unsubscribe_then_410", func(t *testing.T) {
		m, err := d.metrics()
		if err != nil {
			t.Fatal(err)
		}
		var done bool
		if err := pg.do("unsubscribe", nil, 30*time.Second, &done); err != nil || !done {
			t.Fatalf("unsubscribe() = %v, %v", done, err)
		}
		// unsubscribe() settles once Firefox has queued the unregister,
		// not when the server has it: wait for the server's count.
		const unregisters = "autoconnect_unregisters_total"
		if n, ok := d.waitMetric(unregisters, 10*time.Second, func(v float64) bool { return v > m[unregisters] }); !ok {
			t.Fatalf("the server saw no unregister (%s = %v)", unregisters, n)
		}
		from := pg.mark()
		res, err := s.npm(str("after unsubscribe"), "")
		if err != nil || res.Status != http.StatusGone {
			t.Fatalf("web-push after unsubscribe: %+v %v, want 410", res, err)
		}
		if code, err := s.golang([]byte("after unsubscribe"), ""); err != nil || code != http.StatusGone {
			t.Fatalf("webpush-go after unsubscribe: %d %v, want 410", code, err)
		}
		expectPushes(t, pg, from, nil, time.Second)
	})
}

// expectPushes waits up to d for the service worker to report exactly
// want (in any order) after report index from, and no error or
// subscription change. Wanting none, it watches for all of d.
func expectPushes(t *testing.T, pg *page, from int, want [][]byte, d time.Duration) {
	t.Helper()
	pg.waitFor(from, d, func(reps []report) bool {
		got, trouble := pushes(reps)
		return len(want) > 0 && len(got) >= len(want) || len(trouble) > 0
	})
	if len(want) > 0 {
		time.Sleep(time.Second) // a duplicate or a stale push would come right after
	}
	reps, _ := pg.since(from)
	got, trouble := pushes(reps)
	for _, msg := range trouble {
		t.Errorf("the page reported %s", msg)
	}
	key := func(b []byte) string {
		if b == nil {
			return "<null>"
		}
		return string(b)
	}
	g, w := make([]string, len(got)), make([]string, len(want))
	for i := range got {
		g[i] = key(got[i])
	}
	for i := range want {
		w[i] = key(want[i])
	}
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("the service worker received %d pushes %s, want %d %s", len(g), brief(g), len(w), brief(w))
	}
}

// brief shortens a list of payloads for a failure message.
func brief(list []string) string {
	var b strings.Builder
	for i, s := range list {
		if i == 8 {
			fmt.Fprintf(&b, " …(%d more)", len(list)-i)
			break
		}
		if len(s) > 24 {
			s = fmt.Sprintf("%q…(%d bytes)", s[:24], len(s))
		} else {
			s = fmt.Sprintf("%q", s)
		}
		b.WriteString(" " + s)
	}
	return "[" + strings.TrimSpace(b.String()) + "]"
}

// burst sends n pushes at once with webpush-go; each must reach the
// service worker once, and Firefox must ack every one.
func burst(t *testing.T, d *server, pg *page, s *appServer, n int) {
	const acked, inFlight = "autoconnect_notifications_acked_total", "autoconnect_notifications_in_flight"
	m0, err := d.metrics()
	if err != nil {
		t.Fatal(err)
	}
	from := pg.mark()
	want := make([][]byte, n)
	for i := range want {
		want[i] = fmt.Appendf(nil, "burst %03d", i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan []byte, n)
	for _, w := range want {
		next <- w
	}
	close(next)
	for range 8 {
		wg.Go(func() {
			for p := range next {
				if code, err := s.golang(p, ""); err != nil || code != http.StatusCreated {
					errs <- fmt.Errorf("push %q: %d %v", p, code, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	expectPushes(t, pg, from, want, 60*time.Second)
	v, ok := d.waitMetric(acked, 20*time.Second, func(v float64) bool { return v >= m0[acked]+float64(n) })
	if !ok {
		t.Fatalf("the server counted %v acks for %d pushes", v-m0[acked], n)
	}
	if v, ok := d.waitMetric(inFlight, 10*time.Second, func(v float64) bool { return v == 0 }); !ok {
		t.Fatalf("%v notifications still unacked", v)
	}
	m1, _ := d.metrics()
	t.Logf("%d pushes delivered and acked: %v direct, %v from storage",
		n, m1[`autoconnect_notifications_sent_total{source="direct"}`]-m0[`autoconnect_notifications_sent_total{source="direct"}`],
		m1[`autoconnect_notifications_sent_total{source="stored"}`]-m0[`autoconnect_notifications_sent_total{source="stored"}`])
}

// offline: Firefox has no connection while two pushes with the same Topic
// are sent; once it is back it must say hello with its uaid and its
// service worker must see only the newer push, once.
//
// The connection is cut from the server side: the dev
// server is stopped by its PID. But the server is also the API tier
// that must take (and store) those pushes, so it is started again on the
// same data directory and HTTP port with its websocket listener on a
// spare port, which keeps Firefox (whose profile names the usual port)
// out while the pushes go in. Then it is restarted on the usual ports.
// This exercises what an outage of a connection node does: the stored
// Topic replacement, the uaid surviving in Firefox across its reconnect
// backoff, and delivery from storage to a service worker. (Killing
// Firefox instead would test profile persistence, not the server.)
func offline(t *testing.T, d *server, pg *page, s *appServer, ff *browser) {
	from := pg.mark()
	d.stop(t)
	d.start(t, et.FreeAddr(t))
	const topic = "offline-news"
	older, newer := "offline: the older push (web-push)", "offline: the newer push (webpush-go)"
	if res, err := s.npm(&older, topic); err != nil || res.Status != http.StatusCreated {
		t.Fatalf("web-push while Firefox is offline: %+v %v", res, err)
	}
	if code, err := s.golang([]byte(newer), topic); err != nil || code != http.StatusCreated {
		t.Fatalf("webpush-go while Firefox is offline: %d %v", code, err)
	}
	d.stop(t)
	d.start(t, d.ws)
	back := time.Now()
	expectPushes(t, pg, from, [][]byte{[]byte(newer)}, 60*time.Second)
	// The server's side: the data directory holds one user, so a hello
	// whose uaid it knew is Firefox's.
	m, err := d.metrics()
	if err != nil {
		t.Fatal(err)
	}
	if m["autoconnect_hellos_total"] < 1 || m["autoconnect_hello_new_uaid_total"] != 0 {
		t.Fatalf("after the restart the server had %v hellos, %v of them handed a new uaid", m["autoconnect_hellos_total"], m["autoconnect_hello_new_uaid_total"])
	}
	// Firefox's side: its reconnect said hello with the uaid its first
	// hello got, and the server confirmed it.
	var sent, got []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if sent, got = ff.hellos(); len(sent) >= 2 && len(got) == len(sent) || time.Now().After(deadline) {
			break
		}
	}
	uaid := ""
	if len(got) > 0 {
		uaid = got[0]
	}
	if len(sent) < 2 || len(got) != len(sent) || sent[0] != "" || uaid == "" ||
		slices.ContainsFunc(sent[1:], func(u string) bool { return u != uaid }) ||
		slices.ContainsFunc(got, func(u string) bool { return u != uaid }) {
		t.Fatalf("Firefox's hellos carried uaids %q and got %q back; want a first hello without one, then the one it got each time", sent, got)
	}
	t.Logf("Firefox said hello %d times; after the first, always as uaid %s, which the server kept", len(sent), uaid)
	var sub *subscription
	if err := pg.do("subscription", nil, 20*time.Second, &sub); err != nil {
		t.Fatal(err)
	}
	if sub == nil || sub.Endpoint != s.sub.Endpoint {
		t.Fatalf("after the reconnect getSubscription() = %+v, want %s", sub, s.sub.Endpoint)
	}
	t.Logf("reconnected and delivered %.1fs after the restart", time.Since(back).Seconds())
}

// tail returns the last n lines of the file at path, each cut to 300
// bytes (Firefox's push trace prints whole database records).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	lines = lines[max(0, len(lines)-n):]
	for i, l := range lines {
		if len(l) > 300 {
			lines[i] = append(l[:300:300], "…"...)
		}
	}
	return string(bytes.Join(lines, []byte("\n")))
}
