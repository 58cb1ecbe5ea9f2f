// Package providertest is the contract suite every provider passes
// against its fake (provider.Provider): the verdict of each kind of
// answer (429 and 500, 502, 503, 504 retry, with the Retry-After the
// service sent; any other 4xx or 5xx fails, but for the answers a
// provider declares its own: a device gone, refused credentials), a
// send without answer (reset, refused, hung, held) retries with no
// status, Send returns by its context's deadline, and never panics,
// whatever the notification or the answer.
//
// A provider's tests run it (Run) with a Harness that wires the
// provider to its fake (sender/sendertest), as storage/storagetest runs
// the store's conformance suite against each backend. It is a test
// helper: only tests import it (stack/deps_test.go).
package providertest

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/sendertest/tcpfault"
)

// Harness is one provider wired to its fake, made afresh for each case.
// A field left nil is a fault the provider cannot meet (the log provider
// calls no service), whose cases are skipped.
type Harness struct {
	// Provider sends through the fake, by way of Front when set. Its own
	// timeout (Limits().Timeout) must be over ReturnSlack when Front or
	// Hold is set, so that the suite tells ctx's deadline from it.
	Provider provider.Provider
	// Notification is one the provider sends and the fake accepts; each
	// case sends a copy.
	Notification provider.Notification
	// Answer makes the fake answer the next send with a.
	Answer func(a Answer)
	// Hold makes the fake take the next sends and hold their answers
	// until the test ends.
	Hold func()
	// Front stands between the provider and its fake (StartFront): the
	// suite makes it reset, refuse and hang connections.
	Front *tcpfault.Front
	// Break makes the next sends fail without an answer, for a provider
	// whose transport is not a network (the log provider's file).
	Break func()
	// Gone makes the service answer that the device of token is gone.
	Gone func(token string)
	// Except are the provider's own verdicts for statuses outside the
	// retry set (429, 500, 502, 503, 504), whose answers the suite
	// otherwise expects to fail. The retry set cannot be excepted.
	Except map[int]Expect
}

// Answer is what the fake answers one send.
type Answer struct {
	Status int
	// RetryAfter is sent as the Retry-After header when not "".
	RetryAfter string
	// Body, when not nil, is the answer's body as is; nil: the service's
	// own error body for Status.
	Body []byte
}

// Expect is a provider's verdict for an answer.
type Expect struct {
	Verdict provider.Verdict
	// Auth: the answer says the service refused our credentials.
	Auth bool
}

// Timing of the suite's sends.
const (
	// ShortDeadline is the deadline of the sends meant to run out of time.
	ShortDeadline = 300 * time.Millisecond
	// ReturnSlack is how long after its deadline a send may return: the
	// scheduler's delay on a loaded machine, not the provider's.
	ReturnSlack = 10 * time.Second
	// deadline bounds the other sends (the fake answers at once).
	deadline = time.Minute
)

// RetrySet are the statuses every provider retries.
var RetrySet = []int{429, 500, 502, 503, 504}

// others are the statuses the suite expects to fail unless excepted.
var others = []int{400, 401, 403, 404, 405, 409, 410, 413, 422, 501, 505}

// Run runs the suite against the provider start wires to its fake.
func Run(t *testing.T, start func(t *testing.T) *Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, *Harness)
	}{
		{"Sent", testSent},
		{"ConcurrentSends", testConcurrent},
		{"RetrySet", testRetrySet},
		{"RetryAfterDate", testRetryAfterDate},
		{"OtherStatuses", testOtherStatuses},
		{"UnreadableAnswers", testUnreadable},
		{"DeviceGone", testGone},
		{"Reset", transport(tcpfault.Reset)},
		{"Refused", transport(tcpfault.Refuse)},
		{"HungConnection", transport(tcpfault.Hang)},
		{"HeldAnswer", testHeld},
		{"Broken", testBroken},
		{"DeadlinePassed", testDeadlinePassed},
		{"OddNotifications", testOdd},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			for s := range h.Except {
				if slices.Contains(RetrySet, s) {
					t.Fatalf("harness: %d is in the retry set: no provider may except it", s)
				}
			}
			if (h.Front != nil || h.Hold != nil) && h.Provider.Limits().Timeout <= ReturnSlack {
				t.Fatalf("harness: the provider's timeout %s must be over %s, to tell ctx's deadline from it",
					h.Provider.Limits().Timeout, ReturnSlack)
			}
			tc.fn(t, h)
		})
	}
}

// StartFront starts a tcpfault front for the fake at rawURL and returns
// it with rawURL pointed at it; the test closes it.
func StartFront(t *testing.T, rawURL string) (*tcpfault.Front, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	f, err := tcpfault.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, strings.Replace(rawURL, u.Host, f.Addr(), 1)
}

// expected is the verdict h's provider must give an answer of status.
func (h *Harness) expected(status int) Expect {
	switch {
	case status/100 == 2:
		return Expect{Verdict: provider.Sent}
	case slices.Contains(RetrySet, status):
		return Expect{Verdict: provider.Retry}
	}
	if e, ok := h.Except[status]; ok {
		return e
	}
	return Expect{Verdict: provider.Fail}
}

func (h *Harness) notification() *provider.Notification {
	n := h.Notification
	return &n
}

func needAnswer(t *testing.T, h *Harness) {
	t.Helper()
	if h.Answer == nil {
		t.Skip("the provider calls no service")
	}
}

func testSent(t *testing.T, h *Harness) {
	r := send(t, h.Provider, deadline, h.notification())
	want := 0
	if h.Answer != nil {
		want = http.StatusOK
	}
	if r.Verdict != provider.Sent || r.Status != want || r.Err != nil || r.Auth {
		t.Fatalf("%+v, want sent, status %d", r, want)
	}
}

// testConcurrent: Send is called from many goroutines at once (the
// sender's pool); under -race this finds a send that shares state
// unguarded.
func testConcurrent(t *testing.T, h *Harness) {
	const n = 16
	outcomes := make(chan outcome, n)
	for range n {
		go func() { outcomes <- call(h.Provider, deadline, h.notification()) }()
	}
	for range n {
		if r := check(t, <-outcomes, deadline); r.Verdict != provider.Sent {
			t.Errorf("%+v, want sent", r)
		}
	}
}

// testRetrySet: 429 and the retryable 5xx retry, with the wait the
// service asked for in seconds, and none when it named none.
func testRetrySet(t *testing.T, h *Harness) {
	needAnswer(t, h)
	for _, status := range RetrySet {
		for _, after := range []string{"", "7"} {
			h.Answer(Answer{Status: status, RetryAfter: after})
			r := send(t, h.Provider, deadline, h.notification())
			want := time.Duration(0)
			if after != "" {
				want = 7 * time.Second
			}
			if r.Verdict != provider.Retry || r.Status != status || r.RetryAfter != want || r.Auth {
				t.Errorf("%d, Retry-After %q: %+v, want retry after %s", status, after, r, want)
			}
		}
	}
}

// testRetryAfterDate: a Retry-After given as an HTTP date waits until
// then.
func testRetryAfterDate(t *testing.T, h *Harness) {
	needAnswer(t, h)
	h.Answer(Answer{Status: http.StatusServiceUnavailable, RetryAfter: time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)})
	r := send(t, h.Provider, deadline, h.notification())
	if r.Verdict != provider.Retry || r.RetryAfter <= 0 || r.RetryAfter > 90*time.Second {
		t.Fatalf("%+v, want retry within 90 s", r)
	}
}

// testOtherStatuses: any other 4xx or 5xx fails, or gets the verdict
// the provider declares for it; a Retry-After on an answer that does not
// retry is no wait.
func testOtherStatuses(t *testing.T, h *Harness) {
	needAnswer(t, h)
	for _, status := range others {
		h.Answer(Answer{Status: status, RetryAfter: "7"})
		r := send(t, h.Provider, deadline, h.notification())
		want := h.expected(status)
		if r.Verdict != want.Verdict || r.Status != status || r.Auth != want.Auth {
			t.Errorf("%d: %+v, want %v (auth %v)", status, r, want.Verdict, want.Auth)
		}
	}
}

// testUnreadable: an answer whose body is not the service's (empty, a
// proxy's page, cut JSON, the wrong types, far too long) gets the
// verdict of its status.
func testUnreadable(t *testing.T, h *Harness) {
	needAnswer(t, h)
	bodies := map[string][]byte{
		"empty": {}, "html": []byte("<html><body>Bad Gateway</body></html>"), "cut": []byte(`{"error":{"code":`),
		"types":    []byte(`{"code":"x","message":7,"reason":[1],"timestamp":"soon","error":{"details":{}}}`),
		"not utf8": {0xff, 0xfe, '{', 0xc3},
		"long":     []byte(strings.Repeat("x", 256<<10)),
	}
	for _, status := range []int{200, 400, 503} {
		for name, body := range bodies {
			h.Answer(Answer{Status: status, Body: body})
			r := send(t, h.Provider, deadline, h.notification())
			if want := h.expected(status); r.Verdict != want.Verdict || r.Status != status {
				t.Errorf("%d with a body %s: %+v, want %v", status, name, r, want.Verdict)
			}
			if len(r.Message) > 4<<10 {
				t.Errorf("%d with a body %s: a message of %d bytes", status, name, len(r.Message))
			}
		}
	}
}

// testGone: the service's answer that the device is gone is DeviceGone.
func testGone(t *testing.T, h *Harness) {
	if h.Gone == nil {
		t.Skip("the service never says a device is gone")
	}
	n := h.notification()
	h.Gone(n.Token)
	if r := send(t, h.Provider, deadline, n); r.Verdict != provider.DeviceGone || r.Auth {
		t.Fatalf("%+v, want device gone", r)
	}
}

// transport: a connection reset, refused or hung gets no answer: the
// send retries, with no status and a cause, by its deadline.
func transport(m tcpfault.Mode) func(*testing.T, *Harness) {
	return func(t *testing.T, h *Harness) {
		if h.Front == nil {
			t.Skip("the provider calls no service")
		}
		if err := h.Front.Set(m); err != nil {
			t.Fatal(err)
		}
		noAnswer(t, send(t, h.Provider, ShortDeadline, h.notification()))
	}
}

// testHeld: a request the service takes and never answers is given up
// at the deadline.
func testHeld(t *testing.T, h *Harness) {
	if h.Hold == nil {
		t.Skip("the provider calls no service")
	}
	h.Hold()
	noAnswer(t, send(t, h.Provider, ShortDeadline, h.notification()))
}

func testBroken(t *testing.T, h *Harness) {
	if h.Break == nil {
		t.Skip("the provider's transport is a network (Reset, Refused, HungConnection)")
	}
	h.Break()
	noAnswer(t, send(t, h.Provider, deadline, h.notification()))
}

func noAnswer(t *testing.T, r provider.Result) {
	t.Helper()
	if r.Verdict != provider.Retry || r.Status != 0 || r.Err == nil || r.Message == "" || r.RetryAfter != 0 || r.Auth {
		t.Fatalf("%+v, want retry without status, with its cause", r)
	}
}

// testDeadlinePassed: a send whose context has ended returns at once.
func testDeadlinePassed(t *testing.T, h *Harness) {
	send(t, h.Provider, -time.Second, h.notification())
}

// testOdd: notifications the sender should never hand on (no token, no
// app, bytes that are not UTF-8, a token that is a path, a message far
// over any service's limit) get a verdict, not a panic.
func testOdd(t *testing.T, h *Harness) {
	odd := map[string]func(n *provider.Notification){
		"zero":       func(n *provider.Notification) { *n = provider.Notification{} },
		"no token":   func(n *provider.Notification) { n.Token = "" },
		"no app":     func(n *provider.Notification) { n.AppID = "" },
		"not utf8":   func(n *provider.Notification) { n.Token, n.Message = "\xff\xfe", "\xc3(" },
		"path token": func(n *provider.Notification) { n.Token = "../../x?y=1#z%zz/ " },
		"huge":       func(n *provider.Notification) { n.Message = strings.Repeat("é", 1<<18) },
		"odd fields": func(n *provider.Notification) {
			n.TTL, n.Priority, n.Platform, n.ID = -time.Hour, provider.Priority(99), "WINDOWS", "\x00"
			n.Data = map[string]string{"": "", "\xff": strings.Repeat("A", 64<<10)}
		},
	}
	for name, change := range odd {
		n := h.notification()
		change(n)
		r := send(t, h.Provider, deadline, n)
		t.Logf("%s: %v %d %s", name, r.Verdict, r.Status, r.Reason)
	}
}

// outcome is what one Send did: its result or its panic, or neither
// when it did not return in time.
type outcome struct {
	r     provider.Result
	panic any
	late  bool
}

// call calls p.Send with a context of deadline d and waits for it at
// most ReturnSlack after the deadline.
func call(p provider.Provider, d time.Duration, n *provider.Notification) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() {
			o.panic = recover()
			done <- o
		}()
		o.r = p.Send(ctx, n)
	}()
	timer := time.NewTimer(max(d, 0) + ReturnSlack)
	defer timer.Stop()
	select {
	case o := <-done:
		return o
	case <-timer.C:
		return outcome{late: true}
	}
}

// check fails the test when a send panicked, did not return within
// ReturnSlack of its deadline d, or returned a result that breaks the
// contract; it returns the result.
func check(t *testing.T, o outcome, d time.Duration) provider.Result {
	t.Helper()
	switch {
	case o.late:
		t.Fatalf("Send has not returned %s after its deadline of %s", ReturnSlack, d)
	case o.panic != nil:
		t.Fatalf("Send panicked: %v", o.panic)
	}
	checkResult(t, o.r)
	return o.r
}

// send is one checked Send with a context of deadline d.
func send(t *testing.T, p provider.Provider, d time.Duration, n *provider.Notification) provider.Result {
	t.Helper()
	return check(t, call(p, d, n), d)
}

// checkResult checks what every result must be.
func checkResult(t *testing.T, r provider.Result) {
	t.Helper()
	switch {
	case r.Verdict < provider.Sent || r.Verdict > provider.Broken:
		t.Errorf("verdict %v is none of the contract's: %+v", r.Verdict, r)
	case r.Verdict == provider.Sent && (r.Err != nil || r.RetryAfter != 0 || r.Auth):
		t.Errorf("a send that went carries an error, a wait or an auth failure: %+v", r)
	case r.Verdict == provider.Broken && r.Err == nil:
		t.Errorf("broken without its cause: %+v", r)
	case r.RetryAfter < 0 || r.RetryAfter > provider.MaxRetryAfter || r.RetryAfter > 0 && r.Verdict != provider.Retry:
		t.Errorf("wait %s on a %v: %+v", r.RetryAfter, r.Verdict, r)
	case r.Status != 0 && (r.Status < 100 || r.Status > 599):
		t.Errorf("status %d is no HTTP status: %+v", r.Status, r)
	case r.Verdict == provider.Retry && r.Status == 0 && r.Err == nil:
		t.Errorf("a retry without answer has no cause: %+v", r)
	}
}
