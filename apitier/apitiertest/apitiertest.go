package apitiertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/storage"
)

// Answer is an HTTP answer as a test looks at it.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body, failing the test when it is not JSON.
func (a Answer) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.Body, &m); err != nil {
		t.Fatalf("body %q is not JSON: %v", a.Body, err)
	}
	return m
}

// Send makes one request with body (none when nil) and headers from name,
// value pairs (an empty value is sent empty).
func Send(t testing.TB, method, url string, body []byte, kv ...string) Answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	return Do(t, req)
}

// Do makes one request and reads the whole answer.
func Do(t testing.TB, req *http.Request) Answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// WantError checks an error answer: its status, its errno (ErrnoNone for
// null) and the error format (code, error, message, more_info, a JSON
// Content-Type, and the headers that go with 410 and 503). It returns the
// decoded body.
func WantError(t testing.TB, a Answer, code int, errnoVal errno.Code) map[string]any {
	t.Helper()
	if a.Status != code {
		t.Fatalf("status %d, want %d (body %s)", a.Status, code, a.Body)
	}
	m := a.JSON(t)
	var want any = float64(errnoVal)
	if errnoVal == errno.None {
		want = nil
	}
	if m["code"] != float64(code) || m["errno"] != want || m["error"] != http.StatusText(code) ||
		m["more_info"] != errno.MoreInfo || m["message"] == "" {
		t.Fatalf("error body %s, want code %d errno %v", a.Body, code, want)
	}
	if ct := a.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q", ct)
	}
	if code == http.StatusGone && a.Header.Get("Cache-Control") != "max-age=86400" {
		t.Fatalf("410 without Cache-Control: max-age=86400: %v", a.Header)
	}
	if code == http.StatusServiceUnavailable && a.Header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", a.Header)
	}
	return m
}

// WantCreated checks a push's 201: the TTL it echoes, and a Location
// {endpointURL}/m/{id}. It returns the message id.
func WantCreated(t testing.TB, a Answer, endpointURL, ttl string) string {
	t.Helper()
	if a.Status != http.StatusCreated {
		t.Fatalf("status %d, want 201 (body %s)", a.Status, a.Body)
	}
	if got := a.Header.Get("TTL"); got != ttl {
		t.Fatalf("TTL header %q, want %q", got, ttl)
	}
	loc := a.Header.Get("Location")
	id, ok := strings.CutPrefix(loc, strings.TrimRight(endpointURL, "/")+"/m/")
	if !ok || id == "" {
		t.Fatalf("Location %q is not %s/m/{id}", loc, endpointURL)
	}
	return id
}

// Stored returns every message stored for uaid: topic messages, then the
// others (up to 100 of each).
func Stored(t testing.TB, store storage.Store, uaid uuid.UUID) []storage.Message {
	t.Helper()
	ctx := context.Background()
	topics, err := store.TopicMessages(ctx, uaid, 100)
	if err != nil {
		t.Fatalf("topic messages: %v", err)
	}
	stamps, err := store.TimestampMessages(ctx, uaid, 0, 100)
	if err != nil {
		t.Fatalf("timestamp messages: %v", err)
	}
	return append(topics, stamps...)
}
