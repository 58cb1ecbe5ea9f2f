package scylla

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// TestOnceRetryOnlyWhatDidNotRun: a plain statement that must run at most
// once is tried again only after an error that says it never ran; a write
// or read timeout the server sent back says nothing of the outcome.
func TestOnceRetryOnlyWhatDidNotRun(t *testing.T) {
	p := onceRetry{retries: 2}
	for _, c := range []struct {
		name string
		err  error
		want gocql.RetryType
	}{
		{"write timeout of a counter", &gocql.RequestErrWriteTimeout{WriteType: "COUNTER"}, gocql.Rethrow},
		{"write timeout", &gocql.RequestErrWriteTimeout{WriteType: "SIMPLE"}, gocql.Rethrow},
		{"read timeout", &gocql.RequestErrReadTimeout{}, gocql.Rethrow},
		{"no answer in time", gocql.ErrTimeoutNoResponse, gocql.Rethrow},
		{"connection closed", gocql.ErrConnectionClosed, gocql.Rethrow},
		{"unavailable", &gocql.RequestErrUnavailable{}, gocql.RetryNextHost},
		{"host down", gocql.ErrHostDown, gocql.RetryNextHost},
		{"no connection in the pool", fmt.Errorf("wrapped: %w", gocql.ErrNoConnectionsInPool), gocql.RetryNextHost},
	} {
		if got := p.GetRetryType(c.err); got != c.want {
			t.Errorf("after %s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestUpdateFindingItsOwnWriteApplied: an update whose LWT runs again
// after its first run committed (the driver retrying it after a server's
// timeout that came after the commit) finds its own version stored. It is applied,
// not a conflict: a conflict would delete the push's new index entry as
// another writer's, and no due read would find the push again (a claimed
// push stranded IN_MEMORY for good in TestClusterSenderFaults). Another
// writer's version in its place is still a conflict.
func TestUpdateFindingItsOwnWriteApplied(t *testing.T) {
	s := newTestStore(t)
	ctx := tctx(t)
	for _, batched := range []bool{false, true} {
		name := map[bool]string{false: "UpdatePush", true: "UpdatePushes"}[batched]
		update := func(prev *storage.Push, next storage.Push) error {
			if batched {
				return s.UpdatePushes(ctx, []storage.PushUpdate{{Prev: prev, Next: next}})[0]
			}
			return s.UpdatePush(ctx, prev, next)
		}
		now := time.Now()
		p := storage.Push{
			ID: uuid.Must(uuid.NewV7()), Provider: "swrve", Platform: "IOS", PrototypeKey: "Hello",
			PushKey: "463B3209-6E33-4E88-AF52-CDA87C0550EC", Message: "Hello", State: storage.PushPending,
			At: now.UnixMilli(), Created: now.UnixMilli(), Updated: now.UnixMilli(), Version: 1,
		}
		if err := s.SavePush(ctx, p); err != nil {
			t.Fatal(err)
		}
		// A claim whose lease ends in a second: due for a takeover then.
		claim := p
		claim.State, claim.Owner, claim.Version = storage.PushInMemory, "node-b", 2
		claim.At, claim.Updated = now.Add(time.Second).UnixMilli(), now.UnixMilli()+1
		if err := update(&p, claim); err != nil {
			t.Fatalf("%s: the claim: %v", name, err)
		}
		if err := update(&p, claim); err != nil {
			t.Fatalf("%s: the claim run again after it committed: %v, want applied", name, err)
		}
		other := claim
		other.Owner = "node-c"
		if err := update(&p, other); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("%s: another node's claim of the same version: %v, want ErrConflict", name, err)
		}
		var got []storage.Push
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			due, err := s.DuePushes(ctx, storage.PushInMemory, time.Now().UnixMilli(), 100)
			if err != nil {
				t.Fatal(err)
			}
			got = due[:0]
			for _, d := range due {
				if d.ID == p.ID {
					got = append(got, d)
				}
			}
			if len(got) > 0 {
				break
			}
		}
		if len(got) != 1 || got[0].Owner != "node-b" || got[0].Version != 2 {
			t.Fatalf("%s: due IN_MEMORY once its lease ended: %+v, want node-b's claim (version 2)", name, got)
		}
	}
}
