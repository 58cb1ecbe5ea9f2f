package stacktest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/internal/pushcrypto"
)

// Authorization is signer's RFC 8292 Authorization header for this
// stack's API tier (aud its origin), valid for an hour.
func (s *Stack) Authorization(t testing.TB, signer *pushcrypto.VAPIDSigner) string {
	t.Helper()
	tok, err := signer.Token(s.EndpointURL(), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("VAPID token: %v", err)
	}
	return signer.Authorization(tok)
}

// NewSigner is an application server's VAPID key pair, signing with sub
// mailto:ops@example.com.
func NewSigner(t testing.TB) *pushcrypto.VAPIDSigner {
	t.Helper()
	signer, err := pushcrypto.NewVAPIDSigner("mailto:ops@example.com")
	if err != nil {
		t.Fatalf("VAPID key: %v", err)
	}
	return signer
}

// Push sends data to endpoint as an application server does: encrypted
// (aes128gcm) for sub when data is not empty, signed by signer unless it
// is nil, with TTL 60 unless hdr (name, value pairs; an empty value
// removes the header) sets it.
func (s *Stack) Push(t testing.TB, endpoint string, sub *Subscriber, data string, signer *pushcrypto.VAPIDSigner, hdr ...string) apitiertest.Answer {
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
		h.Set("Authorization", s.Authorization(t, signer))
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
	return apitiertest.Do(t, req)
}

// Exercise drives one of each kind of traffic the nodes count, so that
// every metric family (labelled ones included) appears in /metrics:
// direct and stored deliveries, a busy client, a TTL 0 drop, a delete,
// VAPID successes and refusals, error answers, register and unregister,
// and the operations routes.
func (s *Stack) Exercise(t testing.TB) {
	t.Helper()
	signer := NewSigner(t)
	want := func(what string, r apitiertest.Answer, status int) {
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
	const n = 11 // Config keeps max-unacked at its default, 10
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
	want("DELETE its Location", apitiertest.Send(t, http.MethodDelete, r.Header.Get("Location"), nil), 204)
	want("TTL 0 push to nobody", s.Push(t, c.Endpoint, c, "", nil, "TTL", "0"), 201)

	// Refusals: a v2 push without VAPID (109), a bad token (102), no TTL
	// (111), a bad message id (102).
	want("v2 push without VAPID", s.Push(t, a.Endpoint, a, "x", nil), 401)
	want("bad token", s.Push(t, s.EndpointURL()+"/wpush/v1/gAAAAAnotatoken", nil, "", nil), 404)
	want("no TTL", s.Push(t, b.Endpoint, b, "", nil, "TTL", ""), 400)
	want("bad message id", apitiertest.Send(t, http.MethodDelete, s.EndpointURL()+"/m/nope", nil), 404)

	b.Send(map[string]any{"messageType": "unregister", "channelID": b.CHID})
	if m := b.Read(); m["messageType"] != "unregister" || m["status"] != 200.0 {
		t.Fatalf("unregister reply %v", m)
	}
	for _, u := range []string{s.EndpointURL() + "/__heartbeat__", "http://" + s.NodeAddr() + "/__heartbeat__"} {
		want("GET "+u, apitiertest.Send(t, http.MethodGet, u, nil), 200)
	}
	s.ExercisePushAPI(t)
}

// ExercisePushAPI drives the outbound sender through its API: an
// immediate push sent, one the provider refuses failed, a scheduled one,
// refusals (bad body, an unmapped prototype, no key), and the queries; it
// returns once the sends are recorded.
func (s *Stack) ExercisePushAPI(t testing.TB) {
	t.Helper()
	post := func(body string, key string) apitiertest.Answer {
		return apitiertest.Send(t, http.MethodPost, s.EndpointURL()+"/push", []byte(body), "Authorization", "Bearer "+key,
			"Content-Type", "application/json")
	}
	sent := post(`{"platform":"IOS","messagePrototypeKey":"`+PushPrototype+`","pushKey":"stacktest-device","message":"hi","cronExpression":null}`, PushAPIKey)
	failed := post(`{"platform":"ANDROID","messagePrototypeKey":"`+RefusedPrototype+`","pushKey":"stacktest-device","message":"hi"}`, PushAPIKey)
	later := post(`{"platform":"IOS","messagePrototypeKey":"`+PushPrototype+`","pushKey":"d","message":"m","cronExpression":"0 0 9 1 1 ? 2099"}`, PushAPIKey)
	for what, a := range map[string]apitiertest.Answer{"immediate push": sent, "refused push": failed, "scheduled push": later} {
		if a.Status != http.StatusCreated || a.Header.Get("Location") == "" {
			t.Fatalf("POST /push (%s): %d %s", what, a.Status, a.Body)
		}
	}
	if a := post(`{"platform":"WINDOWS"}`, PushAPIKey); a.Status != http.StatusBadRequest {
		t.Fatalf("POST /push with a bad platform: %d %s", a.Status, a.Body)
	}
	if a := post(`{"platform":"ANDROID","messagePrototypeKey":"Unmapped","pushKey":"d","message":"m"}`, PushAPIKey); a.Status != http.StatusBadRequest ||
		!strings.Contains(string(a.Body), "messagePrototypeKey") {
		t.Fatalf("POST /push with an unmapped prototype: %d %s", a.Status, a.Body)
	}
	if a := post(`{}`, "wrong"); a.Status != http.StatusUnauthorized {
		t.Fatalf("POST /push with a wrong key: %d %s", a.Status, a.Body)
	}
	for loc, state := range map[string]string{sent.Header.Get("Location"): "SENT", failed.Header.Get("Location"): "FAILED"} {
		et.Eventually(t, 30*time.Second, "the push at "+loc+" to be "+state, func() bool {
			a := apitiertest.Send(t, http.MethodGet, s.EndpointURL()+loc, nil, "Authorization", "Bearer "+PushAPIKey)
			return a.Status == http.StatusOK && a.JSON(t)["state"] == state
		})
	}
	if a := apitiertest.Send(t, http.MethodGet, s.EndpointURL()+"/push?state=SCHEDULED", nil, "Authorization", "Bearer "+PushAPIKey); a.Status != http.StatusOK {
		t.Fatalf("GET /push?state=SCHEDULED: %d %s", a.Status, a.Body)
	}
}

func topicFor(i int) string { return "t" + base64.RawURLEncoding.EncodeToString([]byte{byte(i)}) }

// clients is the engine's registered client count (its /health).
func (s *Stack) clients(t testing.TB) int {
	var h struct{ Clients int }
	if err := json.Unmarshal([]byte(get(t, "http://"+s.NodeAddr()+"/health")), &h); err != nil {
		t.Fatal(err)
	}
	return h.Clients
}

// ParseMetrics reads a /metrics text (the Prometheus text exposition
// format); it fails the test on a line it cannot read.
func ParseMetrics(t testing.TB, text string) []promtext.Sample {
	t.Helper()
	samples, err := promtext.ParseAll(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return samples
}
