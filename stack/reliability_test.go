package stack_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage"
)

// receiveTracked reads sub's next notification, wants data, and wants a
// reliability_id, the fate id of its version in hex, when tracked and
// none otherwise; it acks the notification unless noAck.
func receiveTracked(t *testing.T, sub *stacktest.Subscriber, data string, tracked, noAck bool) stacktest.Notification {
	t.Helper()
	n := sub.Notification(t)
	if string(n.Data) != data {
		t.Fatalf("received %q, want %q", n.Data, data)
	}
	switch id := storage.NewFateID(n.Version); {
	case !tracked && n.ReliabilityID != nil:
		t.Fatalf("untracked push %q has reliability_id %q", data, *n.ReliabilityID)
	case tracked && (n.ReliabilityID == nil || *n.ReliabilityID != hex.EncodeToString(id[:])):
		t.Fatalf("tracked push %q: reliability_id %v, want %x", data, n.ReliabilityID, id)
	}
	if !noAck {
		sub.Ack(sub.CHID, n.Version)
	}
	return n
}

// TestReliabilityID: a push signed with one of tracking-keys reaches its
// user agent with reliability_id, its fate id in hex, delivered directly
// and from storage (pushed while the user agent was away); a push signed
// with another key, or with none, has no such member. Both backends.
func TestReliabilityID(t *testing.T) {
	for _, backend := range []string{"embedded", "scylla"} {
		t.Run(backend, func(t *testing.T) {
			tracker := stacktest.NewSigner(t)
			st := receiptStack(t, backend, tracker)
			on := st.Subscribe(t, "")
			for _, p := range []struct {
				data    string
				signer  *pushcrypto.VAPIDSigner
				tracked bool
			}{{"direct", tracker, true}, {"other key", stacktest.NewSigner(t), false}, {"no key", nil, false}} {
				st.Push(t, on.Endpoint, on, p.data, p.signer)
				receiveTracked(t, on, p.data, p.tracked, false)
			}
			away := st.Left(t)
			st.Push(t, away.Endpoint, away, "stored", tracker)
			st.Push(t, away.Endpoint, away, "stored, other key", stacktest.NewSigner(t))
			if got := len(st.Stored(t, away.UAID)); got != 2 {
				t.Fatalf("%d messages stored for the user agent away, want 2", got)
			}
			back := st.Reconnect(t, away)
			receiveTracked(t, back, "stored", true, false)
			receiveTracked(t, back, "stored, other key", false, false)
		})
	}
}

// referenceReport reads GET /__milestones__ on the endpoint's origin,
// as the reference's suite reads it from the endpoint URL's host: the
// reference's flat {"state": count}.
func referenceReport(t *testing.T, st *stacktest.Stack) map[string]int64 {
	t.Helper()
	ans := apitiertest.Send(t, http.MethodGet, st.EndpointURL()+"/__milestones__", nil)
	var m map[string]int64
	if ans.Status != http.StatusOK || json.Unmarshal(ans.Body, &m) != nil {
		t.Fatalf("GET /__milestones__ on the endpoint: %d %s", ans.Status, ans.Body)
	}
	return m
}

// TestReferenceReliableReport is the reference's reliable_report
// scenario (its integration suite's basic delivery with a tracked VAPID
// key), with reference-milestones on, on both backends: a user agent
// registers and leaves; a push signed with the tracking key is stored;
// the user agent comes back, says hello and receives it, without acking
// it, with a reliability_id; GET /__milestones__ on the endpoint's origin
// then counts it accepted 1, and received, stored, transmitted_webpush,
// transmitted and accepted_webpush 0. A push signed with a key not
// tracked arrives without reliability_id and counts nowhere (the
// reference's basic delivery with an untracked VAPID key). The
// operator's /__milestones__ on metrics-listen keeps its own shape.
// With reference-milestones off the endpoint's route is 404 errno 102.
func TestReferenceReliableReport(t *testing.T) {
	for _, backend := range []string{"embedded", "scylla"} {
		t.Run(backend, func(t *testing.T) {
			tracker := stacktest.NewSigner(t)
			st := receiptStack(t, backend, tracker, func(c *stack.Config) { c.API.ReferenceMilestones = true })
			away := st.Left(t)
			if ans := st.Push(t, away.Endpoint, away, "tracked", tracker); ans.Status != http.StatusCreated {
				t.Fatalf("push: %d %s", ans.Status, ans.Body)
			}
			back := st.Reconnect(t, away)
			receiveTracked(t, back, "tracked", true, true)
			want := map[string]int64{"accepted": 1, "accepted_webpush": 0, "received": 0, "transmitted_webpush": 0, "transmitted": 0}
			var got map[string]int64
			et.Eventually(t, 5*time.Second, "the report to count the message accepted", func() bool {
				got = referenceReport(t, st)
				for k, v := range want {
					if got[k] != v {
						return false
					}
				}
				return true
			})
			for _, r := range []string{"stored", "int_transmitted", "int_accepted", "retrieved", "delivered", "expired",
				"errored", "bridge_transmitted", "decryption_error", "not_delivered", "dropped"} {
				if n, ok := got[r]; !ok || n != 0 {
					t.Fatalf("report %v: %s %d (present %v), want 0", got, r, n, ok)
				}
			}
			if m := milestones(t, st); m.Counts["received"] != 1 || m.Counts["transmitted"] != 1 || m.Pending != 1 {
				t.Fatalf("the operator's milestones: %+v, want received and transmitted 1, pending 1", m)
			}

			// The reference's basic delivery with an untracked VAPID key.
			on := st.Subscribe(t, "")
			st.Push(t, on.Endpoint, on, "untracked", stacktest.NewSigner(t))
			receiveTracked(t, on, "untracked", false, false)
			on.Barrier() // the ack is handled
			if again := referenceReport(t, st); fmt.Sprint(again) != fmt.Sprint(got) {
				t.Fatalf("an untracked push moved the report: %v, then %v", got, again)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		tracker := stacktest.NewSigner(t)
		st := receiptStack(t, "embedded", tracker)
		ans := apitiertest.Send(t, http.MethodGet, st.EndpointURL()+"/__milestones__", nil)
		if ans.Status != http.StatusNotFound || ans.JSON(t)["errno"] != 102.0 {
			t.Fatalf("GET /__milestones__ on the endpoint, reference-milestones off: %d %s, want 404 errno 102", ans.Status, ans.Body)
		}
		on := st.Subscribe(t, "")
		st.Push(t, on.Endpoint, on, "tracked", tracker)
		receiveTracked(t, on, "tracked", true, false)
		et.Eventually(t, 5*time.Second, "the operator's milestones to count the delivery", func() bool {
			m := milestones(t, st)
			return m.Counts["received"] == 1 && m.Counts["delivered"] == 1 && m.Terminal == 1 && m.Pending == 0
		})
	})
}
