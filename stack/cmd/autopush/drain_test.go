package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/google/uuid"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
)

// drainRoundsEnv sets how many SIGTERM rounds TestDrainLoop runs per
// backend: make drain-loop sets 20; the suite runs drainRoundsSuite.
const (
	drainRoundsEnv   = "AUTOPUSH_DRAIN_ROUNDS"
	drainRoundsSuite = 3
)

// The drain loop's traffic: drainAgents user agents, each pushed to over
// the push API one push after the other, at most drainPushCap pushes a
// round; SIGTERM once each has received drainBeforeSignal notifications of
// the round, and each agent's pushes go on until drainPushesAfter pushes
// past the moment its connection ended (those are stored for the next
// round).
const (
	drainAgents       = 5
	drainBeforeSignal = 8
	drainPushCap      = 400
	drainPushesAfter  = 3
)

// TestDrainLoop is the SIGTERM-during-acks loop (docs/operations.md, Drain):
// real user agents on the single-node server (the built binary), pushes
// through the push API, each agent acking every notification as it
// arrives; SIGTERM while pushes and acks flow; the agents answer the
// node's 1001 close as Firefox does (a close frame); the server must exit
// 0; then it starts again on the same data and the agents reconnect with
// their uaids. After the last round every push answered 201 must have
// arrived, and no notification may arrive again once its agent sent the
// ack (counted at the agents, not in the server's logs). Half the agents
// ack late (read), so acks cross the node's close in every round. On the
// embedded store and, with CQL_HOSTS, on scylla.
func TestDrainLoop(t *testing.T) {
	binary(t)
	rounds := drainRoundsSuite
	if v := os.Getenv(drainRoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", drainRoundsEnv, v)
		}
		rounds = n
	}
	for _, backend := range []string{"embedded", "scylla"} {
		t.Run(backend, func(t *testing.T) {
			// Every listener on a port of its own each start (the ready line
			// names them): the agents reconnect to the new address, as
			// through a load balancer, and push to their endpoint's path
			// there. endpoint-url only names the endpoints.
			vals := map[string]string{"connect-listen": "127.0.0.1:0", "router-listen": "127.0.0.1:0", "endpoint-listen": "127.0.0.1:0",
				"endpoint-url": "http://127.0.0.1:8082", "data-dir": filepath.Join(t.TempDir(), "store")}
			vals["crypto-key"] = token.GenerateKey()
			vals["drain-window"] = "1s"
			vals["msg-limit"] = "0" // a round's backlog is not a flood to reset
			if backend == "scylla" {
				cfg := cqltest.Keyspace(t, "autopush_drain")
				vals["storage"], vals["cql-hosts"], vals["cql-keyspace"] = "scylla", strings.Join(cfg.Hosts, ","), cfg.Keyspace
				vals["cql-consistency"] = "ONE"
			}
			l := newDrainLedger()
			agents := make([]*drainAgent, drainAgents)
			for i := range agents {
				agents[i] = &drainAgent{name: fmt.Sprint("ua", i), late: i%2 == 1, ledger: l}
			}
			for r := range rounds {
				drainRound(t, vals, agents, r)
			}
			// The last start: each agent takes what is left.
			p := start(t, fromFlags, vals)
			nodeURL := "http://" + p.Field("node_api")
			for _, ag := range agents {
				c := ag.connect(t, p.Field("ws_listen"))
				et.Drain(t, nodeURL, c, func(text string) {
					if m := ag.notification(text); m != nil {
						c.Ack(m.chid, m.version)
						l.acked(ag.name, m.payload)
					}
				})
				c.Leave()
			}
			stopGracefully(t, p)
			l.report(t, backend, rounds)
		})
	}
}

// drainRound runs the server once, with traffic, and stops it with
// SIGTERM mid-traffic.
func drainRound(t *testing.T, vals map[string]string, agents []*drainAgent, round int) {
	t.Helper()
	p := start(t, fromFlags, vals)
	reached := make(chan struct{}, len(agents))
	var wg sync.WaitGroup
	api := "http://" + p.Field("push_api")
	for _, ag := range agents {
		c := ag.connect(t, p.Field("ws_listen"))
		ended := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(ended)
			ag.read(c, reached)
		}()
		go func() {
			defer wg.Done()
			ag.push(api, round, ended)
		}()
	}
	for range agents {
		select {
		case <-reached:
		case <-time.After(et.Patience):
			t.Fatalf("round %d: the agents did not each get %d notifications", round, drainBeforeSignal)
		}
	}
	et.Must(t, p.Signal(syscall.SIGTERM), "SIGTERM")
	waitExit(t, p, round)
	wg.Wait()
	if err := agents[0].ledger.failure(); err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
}

// stopGracefully sends SIGTERM and waits for the exit.
func stopGracefully(t *testing.T, p *proc.Proc) {
	t.Helper()
	et.Must(t, p.Signal(syscall.SIGTERM), "SIGTERM")
	waitExit(t, p, -1)
}

func waitExit(t *testing.T, p *proc.Proc, round int) {
	t.Helper()
	select {
	case <-p.Exited():
	case <-time.After(2 * time.Minute):
		t.Fatalf("round %d: no exit within 2 minutes of SIGTERM", round)
	}
	if code := p.ExitCode(); code != 0 || !strings.Contains(string(p.Output()), `"msg":"autopush stopped"`) {
		t.Fatalf("round %d: exit %d after SIGTERM, want 0 after a graceful stop", round, code)
	}
}

// drainAgent is one user agent across the rounds: its uaid, its channel
// and endpoint, kept as Firefox keeps them.
type drainAgent struct {
	name     string
	late     bool // acks one notification behind (read)
	uaid     string
	chid     string
	endpoint string // its path
	ledger   *drainLedger
	seq      int // pushes made, for unique payloads
}

// connect says hello (the first time registers the channel) and returns
// the connection.
func (ag *drainAgent) connect(t *testing.T, addr string) *et.Client {
	t.Helper()
	c := et.Dial(t, addr)
	got := c.Hello(ag.uaid)
	if ag.uaid == "" {
		ag.uaid, ag.chid = got, uuid.NewString()
		reg := c.Register(ag.chid, "")
		endpoint, _ := reg["pushEndpoint"].(string)
		u, err := url.Parse(endpoint)
		if err != nil || endpoint == "" {
			t.Fatalf("%s: register %v", ag.name, reg)
		}
		ag.endpoint = u.Path
	} else if got != ag.uaid {
		t.Fatalf("%s: uaid %s replaced by %s at hello", ag.name, ag.uaid, got)
	}
	return c
}

type drainNotification struct{ chid, version, payload string }

// notification decodes a notification text; nil for anything else.
func (ag *drainAgent) notification(text string) *drainNotification {
	var m struct {
		MessageType string `json:"messageType"`
		ChannelID   string `json:"channelID"`
		Version     string `json:"version"`
		Data        string `json:"data"`
	}
	if json.Unmarshal([]byte(text), &m) != nil || m.MessageType != "notification" {
		return nil
	}
	body, err := base64.RawURLEncoding.DecodeString(m.Data)
	if err != nil {
		ag.ledger.fail(fmt.Errorf("%s: notification data %q: %v", ag.name, m.Data, err))
		return nil
	}
	ag.ledger.arrived(ag.name, string(body))
	return &drainNotification{m.ChannelID, m.Version, string(body)}
}

// read takes notifications until the connection ends, acking each; the
// first drainBeforeSignal notifications of the round are reported on
// reached. The node's close frame is answered with a close frame, as
// Firefox does, and the connection read to its end. A late agent acks
// each notification once the next frame arrives, as a client busy
// elsewhere: the notification it holds when the node's close arrives is
// acked then, before its close answer, so its ack crosses the node's
// close on the wire in every round.
func (ag *drainAgent) read(c *et.Client, reached chan<- struct{}) {
	var held *drainNotification
	ack := func(m *drainNotification) {
		msg := fmt.Sprintf(`{"messageType":"ack","updates":[{"channelID":%q,"version":%q,"code":100}]}`, m.chid, m.version)
		if c.TrySendFrame(ws.OpText, []byte(msg)) == nil {
			ag.ledger.acked(ag.name, m.payload)
		}
	}
	n := 0
	for {
		text, _, err := c.Next(2 * time.Minute)
		if errors.Is(err, et.ErrClosed) {
			if held != nil {
				ack(held)
			}
			c.TrySendFrame(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
			for err == nil || errors.Is(err, et.ErrClosed) {
				_, _, err = c.Next(time.Minute)
			}
			c.Close()
			return
		}
		if err != nil {
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				ag.ledger.fail(fmt.Errorf("%s: the connection stalled: %v", ag.name, err))
			}
			c.Close()
			return
		}
		m := ag.notification(text)
		if m == nil {
			continue
		}
		switch {
		case !ag.late:
			ack(m)
		case held != nil:
			ack(held)
			fallthrough
		default:
			held = m
		}
		if n++; n == drainBeforeSignal {
			reached <- struct{}{}
		}
	}
}

// push posts unique payloads to the agent's endpoint path on api one
// after the other until drainPushesAfter pushes past ended, the cap, or
// the server going away.
func (ag *drainAgent) push(api string, round int, ended <-chan struct{}) {
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	after := -1
	for range drainPushCap {
		if after < 0 {
			select {
			case <-ended:
				after = 0
			default:
			}
		}
		if after >= 0 {
			if after == drainPushesAfter {
				return
			}
			after++
		}
		ag.seq++
		payload := fmt.Sprintf("%s-r%d-%d", ag.name, round, ag.seq)
		req, _ := http.NewRequest(http.MethodPost, api+ag.endpoint, strings.NewReader(payload))
		req.Header.Set("TTL", "3600")
		req.Header.Set("Content-Encoding", "aes128gcm")
		resp, err := client.Do(req)
		if err != nil {
			return // the server is gone: nothing was answered
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			ag.ledger.created(payload)
		}
	}
}

// drainLedger counts at the agents: pushes answered 201, notifications
// that arrived, acks sent. Safe for concurrent use.
type drainLedger struct {
	mu          sync.Mutex
	answered    map[string]bool // 201
	got         map[string]int  // arrivals
	ack         map[string]bool // the agent sent the ack
	redelivered []string        // arrived after the agent acked it
	errs        []error
}

func newDrainLedger() *drainLedger {
	return &drainLedger{answered: map[string]bool{}, got: map[string]int{}, ack: map[string]bool{}}
}

func (l *drainLedger) created(payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answered[payload] = true
}

func (l *drainLedger) arrived(agent, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !strings.HasPrefix(payload, agent+"-") {
		l.errs = append(l.errs, fmt.Errorf("%s got %s's notification %s", agent, strings.SplitN(payload, "-", 2)[0], payload))
	}
	l.got[payload]++
	if l.ack[payload] {
		l.redelivered = append(l.redelivered, payload)
	}
}

func (l *drainLedger) acked(_, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ack[payload] = true
}

func (l *drainLedger) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *drainLedger) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

// report logs the figures and fails on a push answered 201 that never
// arrived or a notification that arrived again after its ack.
func (l *drainLedger) report(t *testing.T, backend string, rounds int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost []string
	for p := range l.answered {
		if l.got[p] == 0 {
			lost = append(lost, p)
		}
	}
	again := 0
	for _, n := range l.got {
		again += max(n-1, 0)
	}
	slices.Sort(lost)
	t.Logf("%s, %d SIGTERM rounds: %d pushes answered 201, %d arrived, %d acked; lost %d, arrived again after the ack %d, arrived again unacked %d",
		backend, rounds, len(l.answered), len(l.got), len(l.ack), len(lost), len(l.redelivered), again-len(l.redelivered))
	if err := errors.Join(l.errs...); err != nil {
		t.Error(err)
	}
	if len(lost) > 0 {
		t.Errorf("%d pushes answered 201 never arrived: %v", len(lost), lost[:min(len(lost), 20)])
	}
	if len(l.redelivered) > 0 {
		t.Errorf("%d notifications arrived again after the agent acked them: %v", len(l.redelivered), l.redelivered[:min(len(l.redelivered), 20)])
	}
}
