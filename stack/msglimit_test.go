package stack_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage"
)

// TestE2EMsgLimitAckThenClose is the reference suite's test_msg_limit:
// msg-limit 20, 21 pushes stored while the user agent is away; it comes
// back, acks the 20 it is sent and closes at once (its close frame right
// behind the last ack, while the node still deletes what it acked). The
// node reads the page those acks made owed before it answers the close,
// finds the backlog past the limit and resets the user (1000 "uaid
// reset"): the next hello gets a new uaid. A client must not escape the
// limit by closing quickly (docs/engine.md, Message limit). On the
// embedded store and, with CQL_HOSTS, on scylla.
func TestE2EMsgLimitAckThenClose(t *testing.T) {
	forBackends(t, func(t *testing.T, through func(storage.Store) storage.Store) {
		const limit = 20
		st := stacktest.StartWith(t, stacktest.Options{Through: through, Config: func(c *stack.Config) { c.Engine.MsgLimit = limit }})
		a := st.Left(t)
		for i := range limit + 1 {
			push(t, st, a, "600", fmt.Sprint("backlog ", i))
		}
		b := st.Reconnect(t, a)
		for range limit {
			b.Ack(b.CHID, b.Notification(t).Version)
		}
		b.SendFrame(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
		text, code, err := b.Next(et.Patience)
		if err != et.ErrClosed || code != ws.StatusNormalClosure {
			t.Fatalf("after the acks and the close: %q code %d %v, want the close answered with 1000", text, code, err)
		}
		b.Close()
		c := et.Dial(t, st.WSAddr())
		if got := c.Hello(a.UAID); got == a.UAID {
			t.Fatalf("the backlog passed msg-limit %d and the client closed at once: it kept its uaid", limit)
		}
		if n := storedCount(t, st, a.UAID); n != 0 {
			t.Fatalf("%d messages of the reset user still stored", n)
		}
	})
}

// The burst test's size: AUTOPUSH_BURST_PUSHES pushes a round (burstSuite
// in the suite), AUTOPUSH_BURST_ROUNDS rounds on each backend (1 in the
// suite). The full form, 2,000 pushes 10 times (about 8 minutes a
// backend):
//
//	AUTOPUSH_BURST_PUSHES=2000 AUTOPUSH_BURST_ROUNDS=10 go test -run '^TestE2EMsgLimitSparesAConnectedClient$' ./stack/
const (
	burstPushesEnv = "AUTOPUSH_BURST_PUSHES"
	burstRoundsEnv = "AUTOPUSH_BURST_ROUNDS"
	burstSuite     = 300
	// burstAckEvery paces the client's acks (50 a second): a browser that
	// keeps up, far slower than the burst arrives.
	burstAckEvery = 20 * time.Millisecond
	// burstPushers post the burst in parallel.
	burstPushers = 8
)

// TestE2EMsgLimitSparesAConnectedClient: a connected client that keeps
// acking is never reset, whatever the burst. msg-limit at its default
// (150) and max-unacked at its (10), as burstStack sets them: a burst of
// pushes through the push API fills the client's window at once; the
// rest goes through storage and reaches it from there as it acks, about
// 50 a second. msg-limit counts only the backlog a client comes back to
// (what was received before its hello), so none of this counts: no reset,
// every push answered 201 and delivered exactly once (counted at the
// client), nothing left stored. On the embedded store and, with
// CQL_HOSTS, on scylla.
func TestE2EMsgLimitSparesAConnectedClient(t *testing.T) {
	pushes, rounds := envCount(t, burstPushesEnv, burstSuite), envCount(t, burstRoundsEnv, 1)
	forBackends(t, func(t *testing.T, through func(storage.Store) storage.Store) {
		st := burstStack(t, through)
		for round := range rounds {
			burstRound(t, st, 0, pushes)
			t.Logf("round %d: %d pushes delivered once each, no reset", round+1, pushes)
		}
		if n := engineMetric(t, st, "autoconnect_uaid_resets_total"); n != 0 {
			t.Fatalf("autoconnect_uaid_resets_total %v", n)
		}
	})
}

// TestE2EMsgLimitBacklogThenBurst: a client comes back to a backlog under
// msg-limit (100 of 150) and a burst of 100 arrives while it drains it:
// the node reads more than msg-limit from storage before it finds storage
// empty, but only what was received before the hello counts. No reset;
// everything arrives once.
func TestE2EMsgLimitBacklogThenBurst(t *testing.T) {
	forBackends(t, func(t *testing.T, through func(storage.Store) storage.Store) {
		st := burstStack(t, through)
		burstRound(t, st, 100, 100)
		if n := engineMetric(t, st, "autoconnect_uaid_resets_total"); n != 0 {
			t.Fatalf("autoconnect_uaid_resets_total %v", n)
		}
	})
}

// burstStack starts a stack with msg-limit 150 and max-unacked 10 (their
// defaults, set so that a change of default does not change the test).
func burstStack(t *testing.T, through func(storage.Store) storage.Store) *stacktest.Stack {
	return stacktest.StartWith(t, stacktest.Options{Through: through, Config: func(c *stack.Config) {
		c.Engine.MsgLimit, c.Engine.MaxUnacked = 150, 10
	}})
}

// burstRound connects a new client, first storing backlog pushes for it
// while it is away when backlog > 0, posts pushes to it in a burst and
// reads them as it acks at burstAckEvery; then checks that each push
// answered 201 arrived exactly once and that nothing more comes or stays
// stored.
func burstRound(t *testing.T, st *stacktest.Stack, backlog, pushes int) {
	var a *stacktest.Subscriber
	var stored []string
	if backlog == 0 {
		a = st.Subscribe(t, "")
	} else {
		away := st.Left(t)
		for range backlog {
			stored = append(stored, push(t, st, away, "3600", ""))
		}
		a = st.Reconnect(t, away)
	}
	ids, pushErr := burst(a.Endpoint, pushes)
	total := backlog + pushes
	got := map[string]int{}
	last := time.Now()
	for len(got) < total {
		text, code, err := a.Next(et.Patience)
		if err != nil {
			t.Fatalf("after %d of %d notifications: %v (close code %d; push errors: %v)", len(got), total, err, code, pushErr())
		}
		var m map[string]any
		et.Must(t, json.Unmarshal([]byte(text), &m), "notification JSON")
		v, _ := m["version"].(string)
		if m["messageType"] != "notification" || m["channelID"] != a.CHID || v == "" {
			t.Fatalf("unexpected message %s", text)
		}
		if got[v]++; got[v] > 1 {
			t.Fatalf("%s delivered twice", v)
		}
		time.Sleep(time.Until(last.Add(burstAckEvery)))
		a.Ack(a.CHID, v)
		last = time.Now()
	}
	answered := append(stored, <-ids...)
	if err := pushErr(); err != nil {
		t.Fatal(err)
	}
	for _, id := range answered {
		if got[id] != 1 {
			t.Fatalf("push %s answered 201, delivered %d times", id, got[id])
		}
	}
	if len(answered) != total {
		t.Fatalf("%d pushes answered 201, want %d", len(answered), total)
	}
	et.NothingMore(t, st.NodeURL(), a.Client)
	if n := storedCount(t, st, a.UAID); n != 0 {
		t.Fatalf("%d messages still stored", n)
	}
	a.Leave()
}

// burst posts n pushes (TTL one hour, no payload) to endpoint from
// burstPushers goroutines at once. The ids answered 201 arrive on the
// channel once every push is answered; errs reports what went wrong then.
func burst(endpoint string, n int) (<-chan []string, func() error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: burstPushers}}
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var mu sync.Mutex
	var ids []string
	var errs []error
	out := make(chan []string, 1)
	var wg sync.WaitGroup
	for range burstPushers {
		wg.Go(func() {
			for i := range next {
				id, err := postPush(client, endpoint)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("push %d: %w", i, err))
				} else {
					ids = append(ids, id)
				}
				mu.Unlock()
			}
		})
	}
	go func() {
		wg.Wait()
		client.CloseIdleConnections()
		out <- ids
	}()
	return out, func() error {
		mu.Lock()
		defer mu.Unlock()
		return errors.Join(errs...)
	}
}

// postPush posts one push without payload and returns its message id.
func postPush(client *http.Client, endpoint string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, endpoint, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("TTL", "3600")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return "", err
	}
	id, ok := strings.CutPrefix(loc.Path, "/m/")
	if !ok || id == "" {
		return "", fmt.Errorf("Location %q", resp.Header.Get("Location"))
	}
	return id, nil
}

// envCount is the positive number in the environment variable name, or
// def when it is unset.
func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q is not a positive number", name, v)
	}
	return n
}
