package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/autopush-go/autopush/internal/pushcrypto"
)

// sender is a worker's application server: it posts pushes to the
// subscriptions of the worker's own user agents, so one ledger sees both
// ends. The schedule is open loop: each push has a time fixed in advance,
// is sent then on its own goroutine whatever happened to the ones before,
// and its latency counts from that time.
type sender struct {
	w        *worker
	client   *http.Client
	signer   *pushcrypto.VAPIDSigner
	inFlight atomic.Int64
	accepted atomic.Int64
	wg       sync.WaitGroup

	mu       sync.Mutex
	tokens   map[string]vapidToken // by audience
	errors   map[string]int64
	srcIndex atomic.Uint32
}

type vapidToken struct {
	auth  string
	until time.Time
}

func newSender(w *worker) (*sender, error) {
	a := &w.setup
	signer, err := pushcrypto.ParseVAPIDSigner(a.VAPIDPrivate, a.VAPIDSubject)
	if err != nil {
		return nil, fmt.Errorf("loadtest: sender: %w", err)
	}
	s := &sender{w: w, signer: signer, tokens: map[string]vapidToken{}, errors: map[string]int64{}}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		// Each connection from its own 127.0.0.x, like the user agents.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := *dialer
			i := s.srcIndex.Add(1)
			d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+int(i)%a.SourceIPs))}
			return d.DialContext(ctx, network, addr)
		},
		MaxConnsPerHost:     a.SenderConns,
		MaxIdleConnsPerHost: a.SenderConns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	s.client = &http.Client{Transport: tr, Timeout: a.PushTimeout}
	return s, nil
}

// phase runs one push schedule and waits for its answers (and, with a
// grace, for its accepted pushes to arrive).
func (s *sender) phase(a sendArgs) sendResult {
	w := s.w
	subs := w.subscriptions()
	if len(subs) == 0 {
		return sendResult{Errors: map[string]int64{"sender: no registered user agent": 1}}
	}
	count := a.Count
	if count == 0 {
		count = int(a.Rate * a.Duration.Seconds())
	}
	period := 1e9 / a.Rate
	lo := w.ledger.len()
	before := w.problemCounts()
	errsBefore := s.errorCounts()
	start := w.clock() + int64(time.Millisecond)
	end := start + int64(float64(count)*period)
	from := start + int64(a.Warmup)
	w.lat.startStage(from, end+1)
	w.resp.startStage(from, end)
	w.lag.startStage(from, end)
	for i := range count {
		at := start + int64(float64(i)*period)
		if wait := at - w.clock(); wait > int64(time.Millisecond) {
			// Go's timers are about 1ms coarse: nearer pushes go out now,
			// and their lateness counts in their latency.
			time.Sleep(time.Duration(wait))
		}
		sub := subs[s.pick(a.Pick, i, len(subs))]
		seq := w.ledger.add(sub.ua)
		if s.inFlight.Load() >= int64(w.setup.MaxInFlight) {
			w.ledger.answered(seq, statusNotSent, "")
			s.count("sender: in-flight cap")
			continue
		}
		s.inFlight.Add(1)
		s.wg.Add(1)
		go s.post(sub, seq, at)
	}
	s.wg.Wait()
	hi := w.ledger.len()
	res := sendResult{Scheduled: int64(count), Seconds: float64(w.clock()-start) / 1e9}
	if a.Grace > 0 {
		deadline := time.Now().Add(a.Grace)
		for w.ledger.outstanding(lo, hi) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !a.Keep {
		res.Hist = w.lat.takeStage()
	}
	res.Resp = w.resp.takeStage()
	w.lag.takeStage()
	res.Account = w.ledger.account(lo, hi)
	after := w.problemCounts()
	after.sub(before)
	res.Account.addProblems(after)
	res.Errors = diffCounts(s.errorCounts(), errsBefore)
	return res
}

func (s *sender) pick(how string, i, n int) int {
	if how == pickRandom {
		return rand.IntN(n)
	}
	return i % n
}

// post sends one push: encrypt for the subscription (RFC 8291, a fresh
// sender key each time), sign or reuse a VAPID JWT, POST, record.
func (s *sender) post(sub *subscription, seq uint64, at int64) {
	defer s.wg.Done()
	defer s.inFlight.Add(-1)
	w := s.w
	status, location := statusNoAnswer, ""
	defer func() {
		w.resp.record(at, w.clock())
		w.ledger.answered(seq, status, location)
		w.tracef("ua %d push seq %d at %s answered %d %s", w.uas[sub.ua].gid, seq, w.wall(at), status, location)
	}()
	w.lag.record(at, w.clock())
	id := pushID{run: w.setup.Run, worker: uint32(w.setup.Index), ua: uint32(sub.ua), seq: seq, at: at}
	plain := appendPayload(make([]byte, 0, w.setup.PayloadSize), id, w.setup.PayloadSize)
	body, err := pushcrypto.EncryptAES128GCM(plain, sub.keys.pub, sub.keys.auth)
	if err != nil {
		s.count("sender: encrypt: " + err.Error())
		return
	}
	endpoint := sub.endpoints[int(seq)%len(sub.endpoints)]
	auth, err := s.authorization(endpoint)
	if err != nil {
		s.count("sender: vapid: " + err.Error())
		return
	}
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		s.count("sender: request: " + err.Error())
		return
	}
	req.Header.Set("TTL", strconv.Itoa(w.setup.TTL))
	req.Header.Set("Content-Encoding", "aes128gcm")
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", auth)
	resp, err := s.client.Do(req)
	if err != nil {
		s.count("transport: " + transportReason(err))
		return
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	status, location = resp.StatusCode, resp.Header.Get("Location")
	if status == http.StatusCreated {
		s.accepted.Add(1)
	} else {
		s.count(statusReason(status, reply))
	}
}

// authorization returns the VAPID header for endpoint's origin: a fresh
// signature, or one reused for VAPIDReuse.
func (s *sender) authorization(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	aud := u.Scheme + "://" + u.Host
	reuse := s.w.setup.VAPIDReuse
	now := time.Now()
	if reuse > 0 {
		s.mu.Lock()
		t, ok := s.tokens[aud]
		s.mu.Unlock()
		if ok && now.Before(t.until) {
			return t.auth, nil
		}
	}
	tok, err := s.signer.Token(aud, now.Add(12*time.Hour))
	if err != nil {
		return "", err
	}
	auth := s.signer.Authorization(tok)
	if reuse > 0 {
		s.mu.Lock()
		s.tokens[aud] = vapidToken{auth: auth, until: now.Add(reuse)}
		s.mu.Unlock()
	}
	return auth, nil
}

func (s *sender) count(key string) {
	s.mu.Lock()
	s.errors[key]++
	s.mu.Unlock()
}

func (s *sender) errorCounts() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int64, len(s.errors))
	for k, v := range s.errors {
		m[k] = v
	}
	return m
}

func (s *sender) errorTotal() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, v := range s.errors {
		n += v
	}
	return n
}

// statusReason is how a refused push is counted: status and errno.
func statusReason(status int, body []byte) string {
	var e struct {
		Errno int `json:"errno"`
	}
	if json.Unmarshal(body, &e) == nil && e.Errno != 0 {
		return fmt.Sprintf("HTTP %d errno %d", status, e.Errno)
	}
	return fmt.Sprintf("HTTP %d", status)
}

// transportReason names a failed request by its cause: a timeout, an
// errno, or the error without the request's URL (one key per cause, not
// per endpoint).
func transportReason(err error) string {
	var ne net.Error
	var en unix.Errno
	var ue *url.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &en):
		return unix.ErrnoName(en)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.As(err, &ue):
		return ue.Err.Error()
	}
	return err.Error()
}

func diffCounts(now, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range now {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
