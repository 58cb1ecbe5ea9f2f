package scylla

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// TestFloorPassesAnUpdateInFlight: an index entry newer than its push (an
// update whose LWT answered with an unknown outcome and did not apply)
// no longer holds its shard's read floor, and is not lost for it: when
// the update applies late, the push is due all the same; once the push
// moves on, the entry is deleted and forgotten.
func TestFloorPassesAnUpdateInFlight(t *testing.T) {
	s := newTestStore(t)
	ctx := tctx(t)
	now := time.Now().UnixMilli()
	// Well below any floor a read can set: the floor rises to the read's
	// due time less floorMargin.
	at := now - 2*floorMargin.Milliseconds()
	p := storage.Push{
		ID: uuid.Must(uuid.NewV7()), Provider: "swrve", Platform: "IOS", PrototypeKey: "Hello",
		PushKey: "463B3209-6E33-4E88-AF52-CDA87C0550EC", Message: "Hello", State: storage.PushScheduled,
		At: now + time.Hour.Milliseconds(), Created: now, Updated: now, Version: 1,
	}
	if err := s.SavePush(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The update's entry: PENDING at at, version 2; the push stays at 1.
	next := p
	next.State, next.At, next.Version = storage.PushPending, at, 2
	if err := s.addIndex(ctx, &next); err != nil {
		t.Fatal(err)
	}
	key := floorKey(storage.PushPending, pushShard(p.ID))
	due := func(what string) []storage.Push {
		t.Helper()
		got, err := s.DuePushes(ctx, storage.PushPending, time.Now().UnixMilli(), 100)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return got
	}
	if got := due("the update in flight"); len(got) != 0 {
		t.Fatalf("due while the update is in flight: %v", got)
	}
	if f := s.floor(key); f <= at {
		t.Fatalf("floor %d at or below the entry in flight (%d): it holds the shard", f, at)
	}

	// The update applies late (Paxos completing it): the push is PENDING
	// at at, version 2, below the shard's floor.
	cur, err := s.GetPush(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	args, err := pushArgs(&next)
	if err != nil {
		t.Fatal(err)
	}
	// The LWT the update made, applied now: UpdatePush's own statement.
	args = append([]any{int32(next.TTL)}, args...)
	var was *int64
	applied, err := s.query(ctx, qUpdatePush, append(args, uuidArg(p.ID), p.Version)...).ScanCAS(&was)
	if err != nil || !applied {
		t.Fatalf("the late update: applied %v, %v", applied, err)
	}
	var got []storage.Push
	deadline := time.Now().Add(10 * time.Second)
	for len(got) == 0 && time.Now().Before(deadline) { // read apart at most once a second
		got = due("the update applied")
		if len(got) == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if len(got) != 1 || got[0].ID != p.ID || got[0].Version != 2 {
		t.Fatalf("after the late update, due %v, want the push at version 2 (it was %d)", got, cur.Version)
	}

	// The push moves on: the entry is stale, deleted and forgotten.
	sent := got[0]
	sent.State, sent.At, sent.Version, sent.TTL = storage.PushSent, time.Now().UnixMilli(), 3, 3600
	if err := s.UpdatePush(ctx, &got[0], sent); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for s.inflight.has(storage.PushPending, indexEntry{shard: pushShard(p.ID), at: at, id: p.ID, version: 2}) {
		if time.Now().After(deadline) {
			t.Fatal("the entry is still remembered after its push moved on")
		}
		if got := due("the push sent"); len(got) != 0 {
			t.Fatalf("due after it was sent: %v", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var n int
	if err := s.session.Query(`SELECT COUNT(*) FROM push_state WHERE state = ? AND shard = ? AND at = ? AND id = ?`,
		string(storage.PushPending), pushShard(p.ID), at, uuidArg(p.ID)).WithContext(ctx).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the stale entry is still in the index (%d)", n)
	}
}
