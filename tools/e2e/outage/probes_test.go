package outage

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gobwas/ws"
)

// ---- new connections

// The outcomes of a hello probe.
const (
	helloOK      = "hello 200"
	helloRefused = "upgrade 503 with Retry-After"
	helloClosed  = "hello closed with 1013"
	helloBad     = "bad"
)

// helloProber connects a user agent every helloEvery, to each engine in
// turn, alternately a new one (hello without uaid) and a known one (hello
// with the uaid of an agent that subscribed before), and records how the
// engine answered. A hello that succeeds is closed at once.
type helloProber struct {
	sys   *system
	known string
	results[helloResult]
}

type helloResult struct {
	at, done time.Time
	engine   int
	known    bool
	outcome  string
	detail   string
}

func (h *helloProber) run(stop <-chan struct{}) {
	tick := time.NewTicker(helloEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		r := helloResult{at: time.Now(), engine: i % len(h.sys.engines), known: i/2%2 == 1}
		uaid := ""
		if r.known {
			uaid = h.known
		}
		r.outcome, r.detail = tryHello(h.sys.engines[r.engine].Field("listen"), uaid)
		r.done = time.Now()
		h.add(r)
	}
}

// first is when the earliest probe started after since that f accepts
// was answered; zero when none.
func (h *helloProber) first(since time.Time, f func(helloResult) bool) time.Time {
	for _, r := range h.all() {
		if r.at.After(since) && f(r) {
			return r.done
		}
	}
	return time.Time{}
}

// tryHello opens a websocket to addr and says hello (with uaid unless
// empty), as Firefox does; it returns how the engine answered.
func tryHello(addr, uaid string) (outcome, detail string) {
	var status int
	var retryAfter string
	d := ws.Dialer{Protocols: []string{"push-notification"}, Timeout: 10 * time.Second,
		OnStatusError: func(st int, _ []byte, resp io.Reader) {
			status = st
			if r, err := http.ReadResponse(bufio.NewReader(resp), nil); err == nil {
				retryAfter = r.Header.Get("Retry-After")
				r.Body.Close()
			}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, br, _, err := d.Dial(ctx, "ws://"+addr+"/")
	if err != nil {
		if status == http.StatusServiceUnavailable && retryAfter != "" {
			return helloRefused, ""
		}
		return helloBad, fmt.Sprintf("upgrade: status %d, Retry-After %q: %v", status, retryAfter, err)
	}
	defer conn.Close()
	if br != nil {
		ws.PutReader(br) // the engine sends nothing before the hello reply
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	msg := map[string]any{"messageType": "hello", "use_webpush": true, "broadcasts": map[string]any{}}
	if uaid != "" {
		msg["uaid"] = uaid
	}
	b, _ := json.Marshal(msg)
	if err := ws.WriteFrame(conn, ws.MaskFrameInPlace(ws.NewTextFrame(b))); err != nil {
		return helloBad, "write hello: " + err.Error()
	}
	for {
		f, err := readFrame(conn)
		if err != nil {
			return helloBad, "read: " + err.Error()
		}
		switch f.Header.OpCode {
		case ws.OpClose:
			code, reason := ws.ParseCloseFrameData(f.Payload)
			if code == 1013 { // try again later (docs/protocol.md)
				return helloClosed, ""
			}
			return helloBad, fmt.Sprintf("closed with %d %q", code, reason)
		case ws.OpText:
			var m map[string]any
			json.Unmarshal(f.Payload, &m)
			if m["messageType"] != "hello" || m["status"] != 200.0 {
				return helloBad, fmt.Sprintf("hello reply %s", f.Payload)
			}
			// A clean close: the engine answers it and clears the record.
			ws.WriteFrame(conn, ws.MaskFrameInPlace(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))))
			for {
				if f, err := readFrame(conn); err != nil || f.Header.OpCode == ws.OpClose {
					return helloOK, ""
				}
			}
		}
	}
}

// readFrame reads one server frame of at most 64 KiB.
func readFrame(r io.Reader) (ws.Frame, error) {
	h, err := ws.ReadHeader(r)
	if err != nil {
		return ws.Frame{}, err
	}
	if h.Length > 64<<10 {
		return ws.Frame{}, fmt.Errorf("server frame of %d bytes", h.Length)
	}
	f := ws.Frame{Header: h, Payload: make([]byte, h.Length)}
	_, err = io.ReadFull(r, f.Payload)
	return f, err
}

// ---- health checks

// beats asks every /__heartbeat__ of the system every beatEvery and
// records the answers.
type beats struct {
	mu  sync.Mutex
	log map[string][]beat
}

type beat struct {
	at   time.Time
	code int // 0: no answer
	err  string
}

func (b *beats) run(sys *system, stop <-chan struct{}) {
	urls := sys.heartbeats()
	b.mu.Lock()
	b.log = map[string][]beat{}
	b.mu.Unlock()
	client := &http.Client{Timeout: 30 * time.Second}
	tick := time.NewTicker(beatEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		var wg sync.WaitGroup
		for _, u := range urls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := beat{at: time.Now()}
				resp, err := client.Get(u)
				if err != nil {
					r.err = err.Error()
				} else {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					r.code = resp.StatusCode
				}
				b.mu.Lock()
				b.log[u] = append(b.log[u], r)
				b.mu.Unlock()
			}()
		}
		wg.Wait()
	}
}

// allSince reports whether every heartbeat has answered, since at, a
// status ok accepts.
func (b *beats) allSince(at time.Time, ok func(int) bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.log) == 0 {
		return false
	}
	for _, list := range b.log {
		if !slices.ContainsFunc(list, func(r beat) bool { return r.at.After(at) && ok(r.code) }) {
			return false
		}
	}
	return true
}

// lastFirst is when the last heartbeat to do so first answered code
// since at.
func (b *beats) lastFirst(at time.Time, code int) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	var last time.Time
	for _, list := range b.log {
		if i := slices.IndexFunc(list, func(r beat) bool { return r.at.After(at) && r.code == code }); i >= 0 && list[i].at.After(last) {
			last = list[i].at
		}
	}
	return last
}

// bad lists the answers that were neither 200 nor 503.
func (b *beats) bad() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for u, list := range b.log {
		for _, r := range list {
			if r.code != 200 && r.code != 503 {
				out = append(out, fmt.Sprintf("GET %s at %s: %d %s", u, r.at.Format(time.StampMilli), r.code, r.err))
			}
		}
	}
	return out
}
