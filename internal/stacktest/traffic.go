package stacktest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/pushcrypto"
)

// PushResult is an endpoint node's answer to a push.
type PushResult struct {
	Status   int
	Location string
	Body     string
}

// Push sends data to endpoint as an application server does: encrypted
// (aes128gcm) for sub when data is not empty, signed by signer unless it
// is nil, with TTL 60 unless hdr (name, value pairs) sets it.
func (s *Stack) Push(t testing.TB, endpoint string, sub *Subscriber, data string, signer *pushcrypto.VAPIDSigner, hdr ...string) PushResult {
	t.Helper()
	var body []byte
	h := http.Header{"Ttl": {"60"}}
	if data != "" {
		var err error
		body, err = pushcrypto.EncryptAES128GCM([]byte(data), sub.Private.PublicKey().Bytes(), sub.Auth)
		if err != nil {
			t.Fatalf("encrypt: %v", err)
		}
		h.Set("Content-Encoding", "aes128gcm")
	}
	if signer != nil {
		tok, err := signer.Token(s.EndpointURL, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		h.Set("Authorization", signer.Authorization(tok))
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			h.Del(hdr[i])
		} else {
			h.Set(hdr[i], hdr[i+1])
		}
	}
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	return do(t, req)
}

func do(t testing.TB, req *http.Request) PushResult {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return PushResult{Status: resp.StatusCode, Location: resp.Header.Get("Location"), Body: string(b)}
}

// Exercise drives one of each kind of traffic the nodes count, so that
// every metric family (labelled ones included) appears in /metrics:
// direct and stored deliveries, a busy client, a TTL 0 drop, a delete,
// VAPID successes and refusals, error answers, register and unregister,
// and the operations routes.
func (s *Stack) Exercise(t testing.TB) {
	t.Helper()
	signer, err := pushcrypto.NewVAPIDSigner("mailto:ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	want := func(what string, r PushResult, status int) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: status %d, want %d: %s", what, r.Status, status, r.Body)
		}
	}

	// Direct, v2 with VAPID.
	a := s.Subscribe(t, signer.Public)
	want("direct v2 push", s.Push(t, a.Endpoint, a, "hello", signer), 201)
	if got := a.Receive(t); got != "hello" {
		t.Fatalf("received %q", got)
	}
	// A busy client: max-unacked pushes in flight, then one more is
	// stored and the node told to check storage; acks drain it all.
	b := s.Subscribe(t, "")
	const n = 11 // enginetest's config keeps max-unacked at its default, 10
	for i := range n {
		want("push to a busy client", s.Push(t, b.Endpoint, b, "", nil, "Topic", topicFor(i)), 201)
	}
	for range n {
		b.Receive(t)
	}
	// A client that left: stored, deleted by its Location, TTL 0 dropped.
	c := s.Subscribe(t, "")
	c.Close()
	et.Eventually(t, 5*time.Second, "the closed client to leave", func() bool { return s.clients(t) == 2 })
	r := s.Push(t, c.Endpoint, c, "for later", nil)
	want("stored push", r, 201)
	req, _ := http.NewRequest(http.MethodDelete, r.Location, nil)
	want("DELETE its Location", do(t, req), 204)
	want("TTL 0 push to nobody", s.Push(t, c.Endpoint, c, "", nil, "TTL", "0"), 201)

	// Refusals: a v2 push without VAPID (109), a bad token (102), no TTL
	// (111), a bad message id (102).
	want("v2 push without VAPID", s.Push(t, a.Endpoint, a, "x", nil), 401)
	want("bad token", s.Push(t, s.EndpointURL+"/wpush/v1/gAAAAAnotatoken", nil, "", nil), 404)
	want("no TTL", s.Push(t, b.Endpoint, b, "", nil, "TTL", ""), 400)
	req, _ = http.NewRequest(http.MethodDelete, s.EndpointURL+"/m/nope", nil)
	want("bad message id", do(t, req), 404)

	b.Send(map[string]any{"messageType": "unregister", "channelID": b.CHID})
	if m := b.Read(); m["messageType"] != "unregister" || m["status"] != 200.0 {
		t.Fatalf("unregister reply %v", m)
	}
	for _, u := range []string{s.EndpointURL + "/__heartbeat__", "http://" + s.Engine.RouterAddr() + "/__heartbeat__"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		want("GET "+u, do(t, req), 200)
	}
}

func topicFor(i int) string { return "t" + base64.RawURLEncoding.EncodeToString([]byte{byte(i)}) }

// clients is the engine's registered client count (its /health).
func (s *Stack) clients(t testing.TB) int {
	var h struct{ Clients int }
	if err := json.Unmarshal([]byte(get(t, "http://"+s.Engine.RouterAddr()+"/health")), &h); err != nil {
		t.Fatal(err)
	}
	return h.Clients
}

// Series is one sample line of a /metrics text.
type Series struct {
	Name   string
	Labels map[string]string
}

// ParseMetrics reads the Prometheus text exposition format (comments
// skipped). It fails the test on a line it cannot read.
func ParseMetrics(t testing.TB, text string) []Series {
	t.Helper()
	var out []Series
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSeries(line)
		if !ok {
			t.Fatalf("unreadable /metrics line %q", line)
		}
		out = append(out, s)
	}
	return out
}

func parseSeries(line string) (Series, bool) {
	end := strings.IndexAny(line, "{ ")
	if end <= 0 {
		return Series{}, false
	}
	s := Series{Name: line[:end], Labels: map[string]string{}}
	rest := line[end:]
	if rest[0] != '{' {
		return s, true
	}
	rest = rest[1:]
	for {
		rest = strings.TrimLeft(rest, ", ")
		if strings.HasPrefix(rest, "}") {
			return s, true
		}
		eq := strings.Index(rest, `="`)
		if eq <= 0 {
			return s, false
		}
		name := rest[:eq]
		rest = rest[eq+2:]
		var v strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(rest[i])
				}
				continue
			}
			v.WriteByte(rest[i])
		}
		if i == len(rest) {
			return s, false
		}
		s.Labels[name] = v.String()
		rest = rest[i+1:]
	}
}
