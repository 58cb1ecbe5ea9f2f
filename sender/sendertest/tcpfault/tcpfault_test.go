package tcpfault

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Each mode gives a client the failure it names, and forwarding works
// again after each. (The client drops its idle connection after each
// Set: one it reuses before it noticed the front closed it fails
// otherwise, whatever the mode.)
func TestModes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	f, err := Start(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	client := &http.Client{Transport: &http.Transport{}}
	post := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+f.Addr()+"/x", strings.NewReader("body"))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
			t.Fatalf("forwarded answer %q", b)
		}
		return nil
	}
	forward := func() {
		t.Helper()
		if err := f.Set(Forward); err != nil {
			t.Fatal(err)
		}
		client.CloseIdleConnections()
		if err := post(time.Minute); err != nil {
			t.Fatalf("forward: %v", err)
		}
	}
	forward()
	for _, c := range []struct {
		mode Mode
		want func(error) bool
	}{
		{Reset, func(err error) bool { return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) }},
		{Hang, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{Refuse, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
	} {
		if err := f.Set(c.mode); err != nil {
			t.Fatal(err)
		}
		client.CloseIdleConnections()
		// The hang is the only wait; the others fail at once.
		if err := post(300 * time.Millisecond); err == nil || !c.want(err) {
			t.Errorf("%s: %v", c.mode, err)
		}
		forward()
	}
}
