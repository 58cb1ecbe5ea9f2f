package apitier

import (
	"bytes"
	"net/http"
	"runtime/pprof"
	"testing"
	"time"
)

// TestDateWithoutATicker: answers carry a Date of the second they were
// served in, from one second to the next, and Hertz's once-a-second
// refresher never starts.
func TestDateWithoutATicker(t *testing.T) {
	s := startServer(t, newStore(t), nil)
	date := func() time.Time {
		t.Helper()
		before := time.Now().Truncate(time.Second)
		resp, err := http.Get("http://" + s.Addr() + "/__lbheartbeat__")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		after := time.Now()
		d, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			t.Fatalf("Date %q: %v", resp.Header.Get("Date"), err)
		}
		if d.Before(before) || d.After(after) {
			t.Fatalf("Date %v, answered between %v and %v", d, before, after)
		}
		return d
	}
	first := date()
	// The next second's answer: requests until the clock has moved on.
	for time.Now().Unix() == first.Unix() {
		time.Sleep(10 * time.Millisecond)
	}
	if next := date(); !next.After(first) {
		t.Errorf("Date %v after %v", next, first)
	}
	var dump bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&dump, 1)
	if bytes.Contains(dump.Bytes(), []byte("UpdateServerDate")) {
		t.Errorf("Hertz's Date refresher runs:\n%s", dump.Bytes())
	}
}
