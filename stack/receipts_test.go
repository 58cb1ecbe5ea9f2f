package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/apitier/receipts"
	"github.com/autopush-go/autopush/apitier/tracking"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/internal/receiptwire"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/scylla"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
)

// receiptStack runs a stack with receipts on, the tracking key of
// tracker, quick sweeps of expired fates and msg-limit 3, over the
// embedded store or (backend "scylla") a keyspace of the CQL server.
func receiptStack(t *testing.T, backend string, tracker *pushcrypto.VAPIDSigner, change ...func(*stack.Config)) *stacktest.Stack {
	o := stacktest.Options{Bridges: true, Config: func(c *stack.Config) {
		c.API.Receipts = true
		c.API.TrackingKeys = []string{tracker.Public}
		c.API.FateSweepInterval = 100 * time.Millisecond
		c.Engine.MsgLimit = 3
		for _, f := range change {
			f(c)
		}
	}}
	if backend == "scylla" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		store, err := scylla.New(ctx, cqltest.Keyspace(t, "receipts"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		o.Through = func(storage.Store) storage.Store { return store }
	}
	return stacktest.StartWith(t, o)
}

// receipt is one receipt as the GET and the webhooks send it.
type receipt = receiptwire.Receipt

// app is an application server with a receipt subscription.
type app struct {
	st     *stacktest.Stack
	signer *pushcrypto.VAPIDSigner
	sub    string // the receipt subscription's URL
	seen   map[string]receipt
}

// newApp creates a receipt subscription for a new VAPID key, finding the
// subscribe resource from a push answer's Link as a library would.
func newApp(t *testing.T, st *stacktest.Stack, link string) *app {
	t.Helper()
	a := &app{st: st, signer: stacktest.NewSigner(t), seen: map[string]receipt{}}
	ans := apitiertest.Send(t, http.MethodPost, link, nil, "Authorization", st.Authorization(t, a.signer))
	if ans.Status != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", link, ans.Status, ans.Body)
	}
	a.sub = ans.Header.Get("Location")
	if !strings.HasPrefix(a.sub, st.EndpointURL()+"/receipts/") || ans.JSON(t)["receipts"] != a.sub {
		t.Fatalf("receipt subscription %q, body %s", a.sub, ans.Body)
	}
	return a
}

// subscribeLink is the receipt subscribe resource a push's answer names.
func subscribeLink(t *testing.T, ans apitiertest.Answer) string {
	t.Helper()
	l := ans.Header.Get("Link")
	const rel = `>; rel="urn:ietf:params:push:receipt"`
	if !strings.HasPrefix(l, "<") || !strings.HasSuffix(l, rel) {
		t.Fatalf("push answer's Link %q names no receipt subscribe resource", l)
	}
	return strings.TrimSuffix(strings.TrimPrefix(l, "<"), rel)
}

// push sends data to sub with a receipt asked (unless receipt is false).
func (a *app) push(t *testing.T, sub *stacktest.Subscriber, data string, receipt bool, hdr ...string) string {
	t.Helper()
	if receipt {
		hdr = append(hdr, "Push-Receipt", a.sub)
	}
	ans := a.st.Push(t, sub.Endpoint, sub, data, a.signer, hdr...)
	if ans.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", ans.Status, ans.Body)
	}
	return ans.Header.Get("Location")
}

// read is one GET of the subscription, waiting up to wait seconds; the
// receipts read are acknowledged and remembered (a receipt read twice
// fails the test).
func (a *app) read(t *testing.T, wait int) []receipt {
	t.Helper()
	ans := apitiertest.Send(t, http.MethodGet, fmt.Sprintf("%s?wait=%d", a.sub, wait), nil, "Authorization", a.st.Authorization(t, a.signer))
	if ans.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", a.sub, ans.Status, ans.Body)
	}
	var got struct{ Receipts []receipt }
	if err := json.Unmarshal(ans.Body, &got); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got.Receipts {
		if _, dup := a.seen[r.Location]; dup {
			t.Fatalf("a second receipt for %s: %+v", r.Location, r)
		}
		a.seen[r.Location] = r
		ids = append(ids, r.ID)
	}
	if len(ids) > 0 {
		body, _ := json.Marshal(map[string][]string{"ids": ids})
		ack := apitiertest.Send(t, http.MethodPost, a.sub+"/ack", body, "Authorization", a.st.Authorization(t, a.signer),
			"Content-Type", "application/json")
		if ack.Status != http.StatusNoContent {
			t.Fatalf("ack: %d %s", ack.Status, ack.Body)
		}
	}
	return got.Receipts
}

// pending is how many receipts a GET finds, without acknowledging them.
func (a *app) pending(t *testing.T) int {
	t.Helper()
	ans := apitiertest.Send(t, http.MethodGet, a.sub, nil, "Authorization", a.st.Authorization(t, a.signer))
	var got struct{ Receipts []receipt }
	if ans.Status != http.StatusOK || json.Unmarshal(ans.Body, &got) != nil {
		t.Fatalf("GET %s: %d %s", a.sub, ans.Status, ans.Body)
	}
	return len(got.Receipts)
}

// await reads until the receipt of the push at location comes.
func (a *app) await(t *testing.T, location string) receipt {
	t.Helper()
	deadline := time.Now().Add(et.Patience)
	for time.Now().Before(deadline) {
		if r, ok := a.seen[location]; ok {
			return r
		}
		a.read(t, 2)
	}
	t.Fatalf("no receipt for %s within %v (%d others came)", location, et.Patience, len(a.seen))
	return receipt{}
}

func wantReceipt(t *testing.T, r receipt, state, reason string) {
	t.Helper()
	if r.State != state || r.Reason != reason || r.Delivered != (state == "delivered") || r.ID == "" || r.At == 0 {
		t.Fatalf("receipt %+v, want state %q reason %q", r, state, reason)
	}
}

// TestReceipts: RFC 8030 receipts on both storage backends, counted at
// the application server's end (what GET /receipts returns): one
// delivered receipt per acked push, direct or stored; one not-delivered
// receipt, with its reason, per push that expired (TTL passed, or TTL 0
// with nobody connected), was replaced by a newer one of its Topic,
// whose channel was unsubscribed, whose user agent was reset past
// msg-limit, or that its application server withdrew (DELETE) while
// stored or queued for a bridge; for a bridged user agent's, handed to
// the provider or refused by it; none for pushes without Push-Receipt; and nothing of a
// subscription to another VAPID key. Then the milestones add up: every
// tracked push ended in exactly one terminal state.
func TestReceipts(t *testing.T) {
	for _, backend := range []string{"embedded", "scylla"} {
		t.Run(backend, func(t *testing.T) {
			tracker := stacktest.NewSigner(t)
			st := receiptStack(t, backend, tracker)
			tracked := 0
			// The subscribe resource, from any push's answer.
			probe := st.Subscribe(t, "")
			first := st.Push(t, probe.Endpoint, probe, "hello", nil)
			apitiertest.WantCreated(t, first, st.EndpointURL(), "60")
			probe.Receive(t)
			a := newApp(t, st, subscribeLink(t, first))

			// Delivered, directly and from storage.
			on := st.Subscribe(t, "")
			loc := a.push(t, on, "direct", true)
			tracked++
			if got := on.Receive(t); got != "direct" {
				t.Fatalf("received %q", got)
			}
			wantReceipt(t, a.await(t, loc), "delivered", "")
			away := st.Left(t)
			loc = a.push(t, away, "stored", true)
			tracked++
			back := st.Reconnect(t, away)
			if got := back.Receive(t); got != "stored" {
				t.Fatalf("received %q", got)
			}
			wantReceipt(t, a.await(t, loc), "delivered", "")

			// No Push-Receipt, no receipt; the tracking key's pushes are
			// counted, with no receipt either.
			plain := a.push(t, on, "plain", false)
			on.Receive(t)
			trackedPlain := st.Push(t, on.Endpoint, on, "tracked", tracker)
			apitiertest.WantCreated(t, trackedPlain, st.EndpointURL(), "60")
			if trackedPlain.Header.Get("Link") == "" {
				t.Fatal("no Link to the receipt subscribe resource")
			}
			tracked++
			on.Receive(t)
			marker := a.push(t, on, "marker", true)
			tracked++
			on.Receive(t)
			a.await(t, marker)
			if r, ok := a.seen[plain]; ok {
				t.Fatalf("a receipt for a push without Push-Receipt: %+v", r)
			}

			// Expired: TTL 1 stored, and TTL 0 with nobody connected.
			gone := st.Left(t)
			loc = a.push(t, gone, "short", true, "TTL", "1")
			tracked++
			wantReceipt(t, a.await(t, loc), "expired", "")
			loc = a.push(t, gone, "now or never", true, "TTL", "0")
			tracked++
			wantReceipt(t, a.await(t, loc), "expired", "")

			// Topic replaced (RFC 8030 §5.4): the older version gets no
			// delivery receipt; the newer one is delivered.
			old := a.push(t, gone, "v1", true, "Topic", "weather")
			tracked++
			newer := a.push(t, gone, "v2", true, "Topic", "weather")
			tracked++
			wantReceipt(t, a.await(t, old), "dropped", "topic_replaced")
			gone = st.Reconnect(t, gone)
			if got := gone.Receive(t); got != "v2" {
				t.Fatalf("received %q, want the newer version", got)
			}
			wantReceipt(t, a.await(t, newer), "delivered", "")

			// Unsubscribed before its ack.
			loc = a.push(t, gone, "unwanted", true)
			tracked++
			gone.Notification(t)
			gone.Send(map[string]any{"messageType": "unregister", "channelID": gone.CHID})
			if r := gone.Read(); r["messageType"] != "unregister" || r["status"] != 200.0 {
				t.Fatalf("unregister: %v", r)
			}
			wantReceipt(t, a.await(t, loc), "dropped", "unsubscribed")

			// Its route cached, then unsubscribed and gone: the push is
			// tracked before the cached route misses and the
			// subscription is found gone (410); its fate ends errored.
			cached := st.Subscribe(t, "")
			loc = a.push(t, cached, "route cached", true)
			tracked++
			cached.Receive(t)
			wantReceipt(t, a.await(t, loc), "delivered", "")
			cached.Send(map[string]any{"messageType": "unregister", "channelID": cached.CHID})
			if r := cached.Read(); r["messageType"] != "unregister" || r["status"] != 200.0 {
				t.Fatalf("unregister: %v", r)
			}
			cached.Close()
			et.Eventually(t, 5*time.Second, "node_id cleared by the node", func() bool { return st.NodeID(t, cached.UAID) == "" })
			late := st.Push(t, cached.Endpoint, cached, "too late", a.signer, "Push-Receipt", a.sub)
			apitiertest.WantError(t, late, http.StatusGone, errno.InvalidSubscription)
			tracked++
			var errored receipt
			for deadline := time.Now().Add(et.Patience); errored.ID == "" && time.Now().Before(deadline); {
				for _, r := range a.read(t, 2) {
					if r.State == "errored" {
						errored = r
					}
				}
			}
			wantReceipt(t, errored, "errored", "")

			// Withdrawn (DELETE of its Location) while stored: dropped,
			// and never delivered. A DELETE of one already written to its
			// user agent changes nothing: its ack still counts.
			away = st.Left(t)
			withdrawn := a.push(t, away, "withdrawn", true)
			tracked++
			deleteMessage(t, withdrawn)
			wantReceipt(t, a.await(t, withdrawn), "dropped", "withdrawn")
			back = st.Reconnect(t, away)
			a.push(t, back, "after", false)
			if got := back.Receive(t); got != "after" {
				t.Fatalf("received %q after the withdrawn push, want the next one", got)
			}
			loc = a.push(t, on, "in hands", true)
			tracked++
			n := on.Notification(t)
			deleteMessage(t, loc)
			on.Ack(on.CHID, n.Version)
			wantReceipt(t, a.await(t, loc), "delivered", "")

			// msg-limit 3: a backlog of 4 resets the user agent.
			flood := st.Left(t)
			var backlog []string
			for i := range 4 {
				backlog = append(backlog, a.push(t, flood, fmt.Sprint("flood ", i), true))
				tracked++
			}
			st.Reconnect(t, flood)
			for _, loc := range backlog {
				wantReceipt(t, a.await(t, loc), "dropped", "msg_limit")
			}

			// Bridged user agents: handed to FCM, or refused by it (the
			// device is gone).
			d := registerDevice(t, st, "fcm", stacktest.FCMApp, "fcm-receipt-token-0001")
			loc = a.push(t, &stacktest.Subscriber{Endpoint: d.Endpoint}, "", true)
			tracked++
			wantReceipt(t, a.await(t, loc), "bridge_transmitted", "")
			d = registerDevice(t, st, "fcm", stacktest.FCMApp, "fcm-receipt-token-0002")
			st.FCM.SetGone(d.token)
			loc = a.push(t, &stacktest.Subscriber{Endpoint: d.Endpoint}, "", true)
			tracked++
			wantReceipt(t, a.await(t, loc), "errored", "")

			// Withdrawn while it waits out FCM's 429 in the sender.
			throttled := fcmfake.Error(429, "RESOURCE_EXHAUSTED", "quota", "QUOTA_EXCEEDED")
			throttled.Header = http.Header{"Retry-After": {"3600"}}
			st.FCM.Queue(throttled)
			d = registerDevice(t, st, "fcm", stacktest.FCMApp, "fcm-receipt-token-0003")
			loc = a.push(t, &stacktest.Subscriber{Endpoint: d.Endpoint}, "", true)
			tracked++
			waitFor(t, "the bridged push to wait for its retry", func() bool {
				ps := pushesOf(t, st, d.UAID)
				return len(ps) == 1 && ps[0].State == storage.PushRetry
			})
			deleteMessage(t, loc)
			wantReceipt(t, a.await(t, loc), "dropped", "withdrawn")

			// Another key can neither read the subscription nor name it.
			b := newApp(t, st, subscribeLink(t, first))
			other := apitiertest.Send(t, http.MethodGet, a.sub, nil, "Authorization", st.Authorization(t, b.signer))
			apitiertest.WantError(t, other, http.StatusNotFound, errno.None)
			body := []byte(`{"ids":["x"]}`)
			other = apitiertest.Send(t, http.MethodPost, a.sub+"/ack", body, "Authorization", st.Authorization(t, b.signer))
			apitiertest.WantError(t, other, http.StatusNotFound, errno.None)
			named := st.Push(t, on.Endpoint, on, "x", b.signer, "Push-Receipt", a.sub)
			apitiertest.WantError(t, named, http.StatusBadRequest, errno.None)
			named = st.Push(t, on.Endpoint, on, "x", nil, "Push-Receipt", a.sub)
			apitiertest.WantError(t, named, http.StatusUnauthorized, errno.InvalidAuth)
			if got := b.read(t, 0); len(got) != 0 {
				t.Fatalf("the other key's subscription has receipts: %+v", got)
			}
			if extra := a.read(t, 0); len(extra) != 0 {
				t.Fatalf("receipts nobody asked for: %+v", extra)
			}

			// Conservation: every tracked push ended in one terminal state.
			m := milestones(t, st)
			if m.Counts["received"] != int64(tracked) || m.Terminal != int64(tracked) || m.Pending != 0 {
				t.Fatalf("milestones %+v: want %d received, all settled", m, tracked)
			}
			for name, want := range map[string]int64{"delivered": 7, "expired": 2, "dropped_topic_replaced": 1,
				"dropped_unsubscribed": 1, "dropped_msg_limit": 4, "dropped_withdrawn": 2, "bridge_transmitted": 1, "errored": 2} {
				if m.Counts[name] != want {
					t.Errorf("milestone %s: %d, want %d (%+v)", name, m.Counts[name], want, m.Counts)
				}
			}
		})
	}
}

// deleteMessage is the application server's DELETE of a push's Location.
func deleteMessage(t *testing.T, location string) {
	t.Helper()
	if del := apitiertest.Send(t, http.MethodDelete, location, nil); del.Status != http.StatusNoContent {
		t.Fatalf("DELETE %s: %d %s", location, del.Status, del.Body)
	}
}

// milestones reads GET /__milestones__ of the operator's listener.
func milestones(t *testing.T, st *stacktest.Stack) tracking.Milestones {
	t.Helper()
	ans := apitiertest.Send(t, http.MethodGet, "http://"+st.MetricsAddr()+"/__milestones__", nil)
	var m tracking.Milestones
	if ans.Status != http.StatusOK || json.Unmarshal(ans.Body, &m) != nil {
		t.Fatalf("GET /__milestones__: %d %s", ans.Status, ans.Body)
	}
	return m
}

// hookReceiver is an application server's webhook: it checks each POST's
// signature, refuses the first fail POSTs with 503, and records the
// receipts of those it takes.
type hookReceiver struct {
	mu     sync.Mutex
	secret string
	fail   int
	posts  int
	got    map[string]int // receipts by location
	badSig int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.posts++
	sig := r.Header.Get(receipts.SignatureHeader)
	ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
	sec, _ := strconv.ParseInt(ts, 10, 64)
	if sig == "" || sig != receipts.Sign(h.secret, time.Unix(sec, 0), body) {
		h.badSig++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if h.fail > 0 {
		h.fail--
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var in struct{ Receipts []receipt }
	json.Unmarshal(body, &in)
	for _, rc := range in.Receipts {
		h.got[rc.Location+" "+rc.State]++
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[key]
}

// TestReceiptWebhook: a subscription with a webhook gets its receipts
// POSTed, signed with the secret its creation answered; a refused POST
// is tried again, and receipts a webhook took are acknowledged (the GET
// finds none left). Both storage backends. Webhooks off, or a webhook
// that is not https, are refused.
func TestReceiptWebhook(t *testing.T) {
	for _, backend := range []string{"embedded", "scylla"} {
		t.Run(backend, func(t *testing.T) {
			st := receiptStack(t, backend, stacktest.NewSigner(t), func(c *stack.Config) {
				c.API.ReceiptWebhooks, c.API.ReceiptWebhookInsecure = true, true
				c.API.ReceiptWebhookInterval = 50 * time.Millisecond
			})
			hook := &hookReceiver{fail: 2, got: map[string]int{}}
			srv := httptest.NewServer(hook)
			t.Cleanup(srv.Close)
			a := &app{st: st, signer: stacktest.NewSigner(t), seen: map[string]receipt{}}
			body, _ := json.Marshal(map[string]string{"webhook": srv.URL + "/receipts"})
			ans := apitiertest.Send(t, http.MethodPost, st.EndpointURL()+"/receipts", body, "Authorization", st.Authorization(t, a.signer))
			if ans.Status != http.StatusCreated {
				t.Fatalf("POST /receipts with a webhook: %d %s", ans.Status, ans.Body)
			}
			m := ans.JSON(t)
			a.sub = ans.Header.Get("Location")
			hook.mu.Lock()
			hook.secret, _ = m["webhook_secret"].(string)
			hook.mu.Unlock()
			if len(hook.secret) < 32 || m["webhook"] != srv.URL+"/receipts" {
				t.Fatalf("subscription %v", m)
			}
			on := st.Subscribe(t, "")
			loc := a.push(t, on, "hooked", true)
			on.Receive(t)
			gone := st.Left(t)
			expired := a.push(t, gone, "short", true, "TTL", "1")
			for _, key := range []string{loc + " delivered", expired + " expired"} {
				et.Eventually(t, et.Patience, "the webhook to take "+key, func() bool { return hook.count(key) > 0 })
			}
			hook.mu.Lock()
			posts, bad := hook.posts, hook.badSig
			hook.mu.Unlock()
			if posts < 3 || bad != 0 {
				t.Fatalf("%d POSTs (2 refused), %d with a bad signature", posts, bad)
			}
			// Acknowledged once the webhook answered 2xx.
			et.Eventually(t, et.Patience, "the receipts the webhook took to be acknowledged", func() bool { return a.pending(t) == 0 })
			for _, key := range []string{loc + " delivered", expired + " expired"} {
				if n := hook.count(key); n != 1 {
					t.Errorf("%s taken %d times", key, n)
				}
			}

			for _, c := range []struct{ webhook, why string }{
				{"ftp://app.example/x", "not http(s)"},
				{"not a url", "not a URL"},
			} {
				body, _ := json.Marshal(map[string]string{"webhook": c.webhook})
				ans := apitiertest.Send(t, http.MethodPost, st.EndpointURL()+"/receipts", body, "Authorization", st.Authorization(t, a.signer))
				apitiertest.WantError(t, ans, http.StatusBadRequest, errno.None)
			}
		})
	}
	// Off by default: a webhook is refused.
	st := receiptStack(t, "embedded", stacktest.NewSigner(t))
	signer := stacktest.NewSigner(t)
	ans := apitiertest.Send(t, http.MethodPost, st.EndpointURL()+"/receipts", []byte(`{"webhook":"https://app.example/r"}`),
		"Authorization", st.Authorization(t, signer))
	apitiertest.WantError(t, ans, http.StatusBadRequest, errno.None)
}

// TestReceiptWebhooksPerKey: a VAPID key may create
// receipt-webhooks-per-key (here 3) subscriptions with a webhook,
// counted in storage, on both backends: the next is refused 403 with
// errno null, naming the setting, and stored nowhere; the key may still
// subscribe without a webhook, and another key's count is its own.
func TestReceiptWebhooksPerKey(t *testing.T) {
	for _, backend := range []string{"embedded", "scylla"} {
		t.Run(backend, func(t *testing.T) {
			st := receiptStack(t, backend, stacktest.NewSigner(t), func(c *stack.Config) {
				c.API.ReceiptWebhooks, c.API.ReceiptWebhookInsecure = true, true
				c.API.ReceiptWebhooksPerKey = 3
			})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
			t.Cleanup(srv.Close)
			subscribe := func(signer *pushcrypto.VAPIDSigner, body string) apitiertest.Answer {
				return apitiertest.Send(t, http.MethodPost, st.EndpointURL()+"/receipts", []byte(body), "Authorization", st.Authorization(t, signer))
			}
			hook := func(i int) string { return fmt.Sprintf(`{"webhook": "%s/hook/%d"}`, srv.URL, i) }
			one, other := stacktest.NewSigner(t), stacktest.NewSigner(t)
			for i := range 3 {
				if ans := subscribe(one, hook(i)); ans.Status != http.StatusCreated {
					t.Fatalf("webhook %d of 3: %d %s", i+1, ans.Status, ans.Body)
				}
			}
			for range 2 {
				ans := subscribe(one, hook(9))
				apitiertest.WantError(t, ans, http.StatusForbidden, errno.None)
				if !strings.Contains(string(ans.Body), "receipt-webhooks-per-key") || ans.Header.Get("Location") != "" {
					t.Fatalf("the 4th webhook: %s, Location %q", ans.Body, ans.Header.Get("Location"))
				}
			}
			if ans := subscribe(one, ""); ans.Status != http.StatusCreated {
				t.Fatalf("a subscription without a webhook at the limit: %d %s", ans.Status, ans.Body)
			}
			if ans := subscribe(other, hook(0)); ans.Status != http.StatusCreated {
				t.Fatalf("another key's webhook: %d %s", ans.Status, ans.Body)
			}
			_, api := st.Metrics(t)
			if !strings.Contains(api, `autoendpoint_receipts_total{result="subscribed"} 5`+"\n") {
				t.Errorf("subscriptions created, want 5 (3 + 1 + 1):\n%s", grepLines(api, "autoendpoint_receipts_total"))
			}
		})
	}
}

// TestReceiptReadsWaiting: long-polling GETs waiting at once are bounded
// (receipt-max-waiting, here 1): one more that would wait is answered
// 429 with Retry-After at once, while one that need not wait (wait=0) is
// answered as always; the waiting one still gets its receipt, and its
// slot is free again after.
func TestReceiptReadsWaiting(t *testing.T) {
	st := receiptStack(t, "embedded", stacktest.NewSigner(t), func(c *stack.Config) { c.API.ReceiptMaxWaiting = 1 })
	on := st.Subscribe(t, "")
	first := st.Push(t, on.Endpoint, on, "hello", nil)
	on.Receive(t)
	a := newApp(t, st, subscribeLink(t, first))
	get := func(wait int) (*http.Response, []byte, error) {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s?wait=%d", a.sub, wait), nil)
		req.Header.Set("Authorization", st.Authorization(t, a.signer))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	type answer struct {
		status int
		body   []byte
		err    error
	}
	waited := make(chan answer, 1)
	go func() {
		resp, body, err := get(25)
		if err != nil {
			waited <- answer{err: err}
			return
		}
		waited <- answer{status: resp.StatusCode, body: body}
	}()
	const gauge = "autoendpoint_receipt_reads_waiting"
	waitFor(t, "one GET waiting", func() bool { return metric(t, st, gauge) == 1 })
	resp, body, err := get(25)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a second waiting GET: %v %v %s; want 429 with Retry-After 1", resp, err, body)
	}
	if n := a.pending(t); n != 0 {
		t.Fatalf("a GET without wait found %d receipts", n)
	}
	loc := a.push(t, on, "awaited", true)
	on.Receive(t)
	var got answer
	select {
	case got = <-waited:
	case <-time.After(et.Patience):
		t.Fatal("the waiting GET did not answer")
	}
	var in struct{ Receipts []receipt }
	if got.err != nil || got.status != http.StatusOK || json.Unmarshal(got.body, &in) != nil ||
		len(in.Receipts) != 1 || in.Receipts[0].Location != loc || in.Receipts[0].State != "delivered" {
		t.Fatalf("the waiting GET: %d %v %s; want the delivered receipt of %s", got.status, got.err, got.body, loc)
	}
	waitFor(t, "no GET waiting", func() bool { return metric(t, st, gauge) == 0 })
	a.seen = map[string]receipt{}
	if r := a.read(t, 1); len(r) != 1 { // the slot is free: this one may wait
		t.Fatalf("read after the wait: %+v", r)
	}
}

// TestReceiptTTL0Delivered: a TTL 0 push to a connected user agent,
// acked, is delivered, however soon the sweep of expired fates runs (here
// every millisecond): its fate expires as it is tracked, and the sweep
// gives it FateAckGrace while it is still received (storage.InHands),
// before the endpoint node records its hand-over to the connection node.
func TestReceiptTTL0Delivered(t *testing.T) {
	for _, backend := range []string{"embedded", "scylla"} {
		t.Run(backend, func(t *testing.T) {
			st := receiptStack(t, backend, stacktest.NewSigner(t), func(c *stack.Config) {
				c.API.FateSweepInterval = time.Millisecond
			})
			on := st.Subscribe(t, "")
			first := st.Push(t, on.Endpoint, on, "probe", nil)
			on.Receive(t)
			a := newApp(t, st, subscribeLink(t, first))
			for i := range 5 {
				loc := a.push(t, on, "now", true, "TTL", "0")
				if got := on.Receive(t); got != "now" {
					t.Fatalf("push %d: received %q", i, got)
				}
				wantReceipt(t, a.await(t, loc), "delivered", "")
			}
		})
	}
}
