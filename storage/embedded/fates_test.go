package embedded

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

func testFate(uaid uuid.UUID, mid string, expiry time.Time, sub storage.ReceiptSubID) storage.Fate {
	return storage.Fate{UAID: uaid, ID: storage.NewFateID(mid), CHID: uuid.New(), MessageID: mid,
		Expiry: expiry, Receipt: sub, State: storage.FateReceived}
}

// TestFatesDurableAcrossReopen: counts, fates and receipts are on disk,
// and a fate left unsettled settles once after a restart.
func TestFatesDurableAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	uaid, sub := uuid.New(), storage.ReceiptSubID{7}
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	done, open1 := testFate(uaid, "done", exp, sub), testFate(uaid, "open", exp, sub)
	for _, f := range []storage.Fate{done, open1} {
		if err := s.Track(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.Reach(ctx, uaid, open1.ID, storage.FateStored); !ok || err != nil {
		t.Fatalf("reach: %v %v", ok, err)
	}
	if ok, err := s.Settle(ctx, uaid, done.ID, storage.FateDelivered, storage.DropNone); !ok || err != nil {
		t.Fatalf("settle: %v %v", ok, err)
	}
	before, err := s.MilestoneCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, Config{Dir: dir})
	after, err := s.MilestoneCounts(ctx)
	if err != nil || !maps.Equal(after, before) {
		t.Fatalf("counts after reopen:\n got  %v (%v)\n want %v", after, err, before)
	}
	if before[storage.Milestone{State: storage.FateReceived}] != 2 || before[storage.Milestone{State: storage.FateStored}] != 1 {
		t.Fatalf("counts before reopen: %v", before)
	}
	if f, err := s.GetFate(ctx, uaid, open1.ID); err != nil || f.State != storage.FateStored || f.MessageID != "open" {
		t.Fatalf("unsettled fate after reopen: %+v %v", f, err)
	}
	for i, want := range []bool{true, false} {
		ok, err := s.Settle(ctx, uaid, open1.ID, storage.FateErrored, storage.DropNone)
		if err != nil || ok != want {
			t.Fatalf("settle %d after reopen: %v %v, want %v", i, ok, err, want)
		}
	}
	after, err = s.MilestoneCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before[storage.Milestone{State: storage.FateErrored}]++
	if !maps.Equal(after, before) {
		t.Fatalf("counts after settling once:\n got  %v\n want %v", after, before)
	}
	rs, err := s.Receipts(ctx, sub, 10)
	if err != nil || len(rs) != 2 || rs[0].MessageID != "done" || rs[1].MessageID != "open" {
		t.Fatalf("receipts after reopen: %+v %v", rs, err)
	}
}

// TestSweeperRemovesSettledFatesAndReceipts: a settled fate goes after
// FateKeep, a receipt after ReceiptKeep, an unsettled fate never, and
// neither leaves an index entry behind.
func TestSweeperRemovesSettledFatesAndReceipts(t *testing.T) {
	s := open(t, Config{SweepInterval: time.Hour})
	ctx := context.Background()
	uaid, sub := uuid.New(), storage.ReceiptSubID{9}
	now := time.Now()
	settled := testFate(uaid, "settled", now.Add(time.Minute), sub)
	acked := testFate(uaid, "acked", now.Add(time.Minute), sub)
	unsettled := testFate(uaid, "unsettled", now.Add(time.Minute), sub)
	for _, f := range []storage.Fate{settled, acked, unsettled} {
		if err := s.Track(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []storage.Fate{settled, acked} {
		if ok, err := s.Settle(ctx, uaid, f.ID, storage.FateDelivered, storage.DropNone); !ok || err != nil {
			t.Fatalf("settle: %v %v", ok, err)
		}
	}
	if got := countPrefix(t, s, prefixFateExpiry); got != 1 {
		t.Fatalf("%d fate expiry entries, want 1 (the settled ones' must go)", got)
	}
	rs, err := s.Receipts(ctx, sub, 10)
	if err != nil || len(rs) != 2 || rs[1].MessageID != "acked" {
		t.Fatalf("receipts: %+v %v", rs, err)
	}
	// Two fates' and two receipts' entries; an ack takes its own.
	if got := countPrefix(t, s, prefixExpiry); got != 4 {
		t.Fatalf("%d expiry entries, want 4", got)
	}
	if err := s.AckReceipts(ctx, sub, []string{rs[1].ID}); err != nil {
		t.Fatal(err)
	}
	if got := countPrefix(t, s, prefixExpiry); got != 3 {
		t.Fatalf("%d expiry entries after an ack, want 3", got)
	}

	sweep := func(at time.Time) {
		t.Helper()
		if _, err := s.Sweep(at); err != nil {
			t.Fatal(err)
		}
	}
	sweep(now.Add(storage.FateKeep - time.Minute))
	if got := countPrefix(t, s, prefixFate); got != 3 {
		t.Fatalf("%d fates before FateKeep, want 3", got)
	}
	sweep(now.Add(storage.FateKeep + time.Minute))
	if got := countPrefix(t, s, prefixFate); got != 1 {
		t.Fatalf("%d fates after FateKeep, want the unsettled one", got)
	}
	if got := countPrefix(t, s, prefixReceipt); got != 1 {
		t.Fatalf("%d receipts after FateKeep, want 1", got)
	}
	sweep(now.Add(storage.ReceiptKeep + time.Minute))
	if got := countPrefix(t, s, prefixReceipt); got != 0 {
		t.Fatalf("%d receipts after ReceiptKeep, want 0", got)
	}
	if got := countPrefix(t, s, prefixExpiry); got != 0 {
		t.Fatalf("%d expiry entries left", got)
	}
	if f, err := s.GetFate(ctx, uaid, unsettled.ID); err != nil || f.State != storage.FateReceived {
		t.Fatalf("unsettled fate after sweeps: %+v %v", f, err)
	}
	if _, err := s.GetFate(ctx, uaid, settled.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("swept fate: %v, want ErrNotFound", err)
	}
}

func TestFateCodecRoundTrip(t *testing.T) {
	f := fateRecord{Fate: testFate(uuid.New(), "mid", time.Unix(0, 1234567), storage.ReceiptSubID{1, 2}), SettledAt: 99}
	f.Topic, f.State, f.Reason = "t", storage.FateDropped, storage.DropMsgLimit
	enc := encodeFate(&f)
	got, err := decodeFate(f.UAID, f.ID, enc)
	if err != nil || got.CHID != f.CHID || got.Receipt != f.Receipt || got.State != f.State || got.Reason != f.Reason ||
		!got.Expiry.Equal(f.Expiry) || got.SettledAt != 99 || got.Topic != "t" || got.MessageID != "mid" {
		t.Fatalf("fate round trip: %+v %v", got, err)
	}
	for i := range len(enc) {
		if _, err := decodeFate(f.UAID, f.ID, enc[:i]); err == nil {
			t.Fatalf("truncated fate (%d of %d bytes) decoded", i, len(enc))
		}
	}
}

// FuzzDecodeFate: the decoder never panics, and what it accepts survives
// an encode/decode round trip unchanged.
func FuzzDecodeFate(f *testing.F) {
	rec := fateRecord{Fate: testFate(uuid.New(), "mid", time.Unix(5, 0), storage.ReceiptSubID{3})}
	enc := encodeFate(&rec)
	for i := range len(enc) + 1 {
		f.Add(enc[:i])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeFate(uuid.Nil, storage.FateID{}, b)
		if err != nil {
			return
		}
		again, err := decodeFate(uuid.Nil, storage.FateID{}, encodeFate(&got))
		if err != nil || again.CHID != got.CHID || again.Receipt != got.Receipt || again.State != got.State ||
			again.Reason != got.Reason || !again.Expiry.Equal(got.Expiry) || again.SettledAt != got.SettledAt ||
			again.Topic != got.Topic || again.MessageID != got.MessageID {
			t.Fatalf("round trip of an accepted fate changed it: %+v -> %+v (%v)", got, again, err)
		}
	})
}

// TestReceiptHooksSkipOldProbeKey: a store whose Health wrote its probe
// as "health" (inside the webhook index's prefix, before the probe key
// moved) still lists every webhook subscription, paged, and never takes
// the probe for one (it once panicked on it).
func TestReceiptHooksSkipOldProbeKey(t *testing.T) {
	s := open(t, Config{})
	ctx := context.Background()
	if err := s.db.Set([]byte("health"), []byte("2026-11-01T00:00:00Z"), nil); err != nil {
		t.Fatal(err)
	}
	// Ids on both sides of the probe key, "h" 0x65...: 0x00.. and 0xff..
	want := map[storage.ReceiptSubID]bool{}
	for _, first := range []byte{0x00, 0x10, 0x65, 0x66, 0xff} {
		sub := storage.ReceiptSub{ID: storage.ReceiptSubID{first, 1}, Webhook: "https://app.example/r", WebhookSecret: "s", Created: time.Now()}
		if err := s.PutReceiptSub(ctx, sub); err != nil {
			t.Fatal(err)
		}
		want[sub.ID] = true
	}
	var after storage.ReceiptSubID
	got := map[storage.ReceiptSubID]bool{}
	for {
		page, err := s.ReceiptHooks(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range page {
			got[sub.ID] = true
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID
	}
	if !maps.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}
