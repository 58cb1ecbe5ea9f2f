package stack_test

import (
	"encoding/hex"
	"testing"

	"github.com/autopush-go/autopush/internal/pushcrypto"
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
