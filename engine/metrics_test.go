package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/engine/session"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
	"github.com/gobwas/ws"
)

// sample returns one series of the node's /metrics, failing if absent.
func sample(t *testing.T, srv *engine.Server, series string) float64 {
	t.Helper()
	v, ok := et.Metric(t, srv.NodeURL(), series)
	if !ok {
		t.Fatalf("/metrics has no %s", series)
	}
	return v
}

// TestDrainingGauge: autoconnect_draining is 0 while serving and 1 from
// the start of a drain, while /metrics is still served.
func TestDrainingGauge(t *testing.T) {
	cfg := et.Config()
	// Two clients over 4s: the second close is at least 2s in, so the
	// drain is still running when the test scrapes.
	cfg.DrainWindow = 4 * time.Second
	srv, err := engine.New(cfg, newStore(t), nil)
	et.Must(t, err, "new")
	et.Must(t, srv.Start(), "start")
	connected(t, srv)
	connected(t, srv)
	if v := sample(t, srv, "autoconnect_draining"); v != 0 {
		t.Fatalf("autoconnect_draining %v before the drain, want 0", v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Drain(ctx) }()
	et.Eventually(t, 2*time.Second, "autoconnect_draining 1", func() bool {
		return sample(t, srv, "autoconnect_draining") == 1
	})
	if v := sample(t, srv, "autoconnect_clients"); v == 0 {
		t.Fatal("every client closed already: the gauge was not seen during the drain")
	}
	cancel()
	et.Must(t, <-done, "drain")
}

// TestDeliveryAckSeconds: autoconnect_delivery_ack_seconds measures from
// the write of a notification, stored or direct, to its ack; acks that
// match nothing are not observed.
func TestDeliveryAckSeconds(t *testing.T) {
	srv, store := node(t, nil)
	c, uaid, chid := connected(t, srv)
	// The client's think time before acking, which the histogram must
	// see: a sleep in the client, not a wait for the node.
	const hold = 30 * time.Millisecond
	var sum float64
	check := func(what string, count float64, start time.Time) {
		t.Helper()
		m := et.Scrape(t, srv.NodeURL())
		got := m["autoconnect_delivery_ack_seconds_sum"] - sum
		sum = m["autoconnect_delivery_ack_seconds_sum"]
		if n := m["autoconnect_delivery_ack_seconds_count"]; n != count {
			t.Fatalf("%s: count %v, want %v", what, n, count)
		}
		if n := m[`autoconnect_delivery_ack_seconds_bucket{le="+Inf"}`]; n != count {
			t.Fatalf("%s: +Inf bucket %v, want %v", what, n, count)
		}
		// At least the client's hold, at most the test's own view of the
		// round trip (a start other than the write would exceed it).
		if elapsed := time.Since(start).Seconds(); got < hold.Seconds() || got > elapsed {
			t.Fatalf("%s: observed %.4fs, want between %v and %.4fs", what, got, hold, elapsed)
		}
	}

	start := time.Now()
	et.Must(t, store.SaveMessage(context.Background(), parseUAID(t, uaid), storedMessage(chid, "stored", "", 60)), "save")
	if code := et.NodeCall(t, http.MethodPut, srv.NodeURL()+"/notif/"+uaid, "", ""); code != http.StatusOK {
		t.Fatalf("notif %d", code)
	}
	wantNotification(t, c, chid, "stored", "c3RvcmVk")
	time.Sleep(hold)
	c.Ack(chid, "stored")
	c.Barrier()
	check("stored", 1, start)
	// The ack's delete holds direct deliveries (503) until it is done.
	et.Settle(t, srv.NodeURL())

	start = time.Now()
	if code := et.Push(t, srv, uaid, et.Notification(chid, "direct", ""), ""); code != http.StatusOK {
		t.Fatalf("push %d", code)
	}
	wantNotification(t, c, chid, "direct", "")
	time.Sleep(hold)
	c.Ack(chid, "direct")
	c.Ack(chid, "direct") // a repeat matches nothing
	c.Ack(chid, "never-sent")
	c.Barrier()
	check("direct", 2, start)
}

// failConnect fails every hello's router-record write with err (a
// returning user agent's, Reconnect).
type failConnect struct {
	storage.Store
	err error
}

func (f failConnect) Reconnect(context.Context, storage.User) (storage.User, error) {
	return storage.User{}, f.err
}

// TestHelloStorageFailureCountedOnce: a hello whose storage write fails
// is one storage error (and one closed connection), not two; a conflict
// is no storage error at all.
func TestHelloStorageFailureCountedOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		close      ws.StatusCode
		storageErr float64
	}{
		{"unavailable", fmt.Errorf("connect: %w", storage.ErrUnavailable), 1013, 1}, // try again later
		{"conflict", fmt.Errorf("connect: %w", storage.ErrConflict), ws.StatusPolicyViolation, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := et.Start(t, failConnect{newStore(t), tc.err}, et.Config())
			c := et.Dial(t, srv.Addr())
			c.Send(map[string]any{"messageType": "hello", "use_webpush": true, "uaid": protocol.FormatUAID(session.NewUAID())})
			if code := c.ExpectClose(); code != tc.close {
				t.Fatalf("hello closed with %d, want %d", code, tc.close)
			}
			m := et.Scrape(t, srv.NodeURL())
			if got := m["autoconnect_storage_errors_total"]; got != tc.storageErr {
				t.Errorf("autoconnect_storage_errors_total %v, want %v", got, tc.storageErr)
			}
			if got := m[`autoconnect_errors_total{kind="storage"}`]; got != 1 {
				t.Errorf(`autoconnect_errors_total{kind="storage"} %v, want 1`, got)
			}
		})
	}
}
