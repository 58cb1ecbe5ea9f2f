package swrvefake

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/autopush-go/autopush/sender/sendertest/fakelog"
)

// Received is one request the fake got, in arrival order.
type Received struct {
	At      time.Time
	PushKey string
	User    string
	Message string
	// Status is what the fake answered (0: it reset the connection).
	Status int
}

// Fault is what the fake does with one request instead of answering 200.
type Fault struct {
	// Status answers with this status and a Swrve JSON error (0: 200).
	Status int
	// RetryAfter is sent as the Retry-After header when set.
	RetryAfter string
	// Delay waits this long before answering (or resetting).
	Delay time.Duration
	// Reset closes the connection without an answer (after Delay).
	Reset bool
	// Until, when set, holds the answer until it is closed (after Delay),
	// or the caller gives up.
	Until <-chan struct{}
	// Message is the error text (default: the status text).
	Message string
	// Body, when not nil, is the answer's body as is, in place of
	// Swrve's JSON (an answer from something other than Swrve: a proxy's
	// page, a cut or malformed body).
	Body []byte
}

// Fake is the fake push API. Its methods are safe for concurrent use.
type Fake struct {
	srv *http.Server
	ln  net.Listener

	log fakelog.Log[Received]

	mu      sync.Mutex
	faults  func(Received) Fault
	latency func() time.Duration
	keys    map[string]bool
}

// Start listens on 127.0.0.1:0 and serves until the test (or Close) ends.
func Start() (*Fake, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("swrvefake: listen: %w", err)
	}
	f := &Fake{ln: ln}
	f.srv = &http.Server{
		Handler:           http.HandlerFunc(f.serve),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	go f.srv.Serve(ln)
	return f, nil
}

// URL is the push endpoint ("http://127.0.0.1:port/push").
func (f *Fake) URL() string { return "http://" + f.ln.Addr().String() + "/push" }

// Close stops the server, breaking requests in flight.
func (f *Fake) Close() error { return f.srv.Close() }

// SetFaults sets the function that decides each request's fault (nil:
// every request succeeds).
func (f *Fake) SetFaults(fn func(Received) Fault) {
	f.mu.Lock()
	f.faults = fn
	f.mu.Unlock()
}

// SetLatency sets the function that draws each answer's delay (nil: none).
func (f *Fake) SetLatency(fn func() time.Duration) {
	f.mu.Lock()
	f.latency = fn
	f.mu.Unlock()
}

// SetKeys makes every other push_key answer 403, as Swrve does for a key
// it does not know (nil: any key is accepted).
func (f *Fake) SetKeys(keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = map[string]bool{}
	for _, k := range keys {
		f.keys[k] = true
	}
}

// Log returns a copy of every request received so far.
func (f *Fake) Log() []Received { return f.log.All() }

// Count is how many requests were received.
func (f *Fake) Count() int { return f.log.Len() }

// InFlight is how many requests it is handling now.
func (f *Fake) InFlight() int { return f.log.InFlight() }

// MaxInflight is the most requests it was handling at once.
func (f *Fake) MaxInflight() int { return f.log.MaxInFlight() }

// WaitCount blocks until at least n requests were received or ctx ends.
func (f *Fake) WaitCount(ctx context.Context, n int) error {
	return f.log.Wait(ctx, n, "swrvefake: requests")
}

// answer is Swrve's JSON body.
type answer struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	defer f.log.Enter()()
	if r.URL.Path != "/push" {
		reply(w, http.StatusNotFound, "Not found", "")
		return
	}
	if r.Method != http.MethodPost {
		reply(w, http.StatusMethodNotAllowed, "Method not allowed", "")
		return
	}
	if err := r.ParseForm(); err != nil {
		reply(w, http.StatusBadRequest, "Malformed request", "")
		return
	}
	rec := Received{At: time.Now(), PushKey: r.Form.Get("push_key"), User: r.Form.Get("user"), Message: r.Form.Get("message")}
	fault, delay := f.decide(rec)
	rec.Status = fault.Status
	if fault.Reset {
		rec.Status = 0
	}
	f.record(rec)
	if !wait(r, delay, fault.Until) {
		return
	}
	switch {
	case fault.Reset:
		reset(w)
	case fault.Body != nil:
		replyRaw(w, fault.Status, fault.Body, fault.RetryAfter)
	default:
		msg := fault.Message
		if msg == "" {
			msg = http.StatusText(fault.Status)
			if fault.Status == http.StatusOK {
				msg = "OK"
			}
		}
		reply(w, fault.Status, msg, fault.RetryAfter)
	}
}

// decide is the fault of a request (Swrve's own checks first, then
// SetFaults's; a status of 0 is 200) and the delay of its answer.
func (f *Fake) decide(rec Received) (Fault, time.Duration) {
	f.mu.Lock()
	faults, latency, keys := f.faults, f.latency, f.keys
	f.mu.Unlock()
	var fault Fault
	switch {
	case rec.PushKey == "":
		fault = Fault{Status: http.StatusBadRequest, Message: "Missing push_key"}
	case rec.User == "":
		fault = Fault{Status: http.StatusBadRequest, Message: "Missing user"}
	case keys != nil && !keys[rec.PushKey]:
		fault = Fault{Status: http.StatusForbidden, Message: "Invalid push_key"}
	case faults != nil:
		fault = faults(rec)
	}
	if fault.Status == 0 && !fault.Reset {
		fault.Status = http.StatusOK
	}
	d := fault.Delay
	if latency != nil {
		d += latency()
	}
	return fault, d
}

// wait waits d, then until closes (nil: not at all); false when the
// client gave up first.
func wait(r *http.Request, d time.Duration, until <-chan struct{}) bool {
	if d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return false
		}
	}
	if until != nil {
		select {
		case <-until:
		case <-r.Context().Done():
			return false
		}
	}
	return true
}

func (f *Fake) record(rec Received) {
	f.log.Add(rec)
}

func reply(w http.ResponseWriter, status int, msg, retryAfter string) {
	b, _ := json.Marshal(answer{Code: status, Message: msg})
	w.Header().Set("Content-Type", "application/json")
	replyRaw(w, status, b, retryAfter)
}

func replyRaw(w http.ResponseWriter, status int, body []byte, retryAfter string) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	w.Write(body)
}

// reset closes the connection with an RST (SO_LINGER 0), so the client
// sees "connection reset by peer" rather than a clean close.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// MeasuredLatency draws answer times as Swrve's measured under load: a
// log-normal distribution with their median (983 ms) and 99th
// percentile (5,956 ms), within their minimum (233 ms) and maximum
// (7,701 ms). (Unbounded, the log-normal's tail would reach past a
// sender's 30 s timeout about once in 100,000 draws, which Swrve's
// measured answers never did.)
func MeasuredLatency(r *rand.Rand) func() time.Duration {
	const (
		median = 983 * time.Millisecond
		p99    = 5956 * time.Millisecond
		least  = 233 * time.Millisecond
		most   = 7701 * time.Millisecond
		z99    = 2.3263478740408408 // the standard normal's 99th percentile
	)
	sigma := math.Log(float64(p99)/float64(median)) / z99
	var mu sync.Mutex
	return func() time.Duration {
		mu.Lock()
		z := r.NormFloat64()
		mu.Unlock()
		return min(max(time.Duration(float64(median)*math.Exp(sigma*z)), least), most)
	}
}
