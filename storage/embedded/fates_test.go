package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
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

// encodeWhole is an 'f' record as stores before the split of a fate's
// state ('t') wrote it: the whole fate.
func encodeWhole(f *fateRecord) []byte {
	b := []byte{fateCodecWhole}
	b = append(b, f.CHID[:]...)
	b = append(b, f.Receipt[:]...)
	b = append(b, byte(f.State), byte(f.Reason), boolByte(f.Graced))
	b = binary.AppendVarint(b, f.Expiry.UnixNano())
	b = binary.AppendVarint(b, f.SettledAt)
	b = appendString(b, f.Topic)
	return appendString(b, f.MessageID)
}

// sameFate compares every field a fate record keeps.
func sameFate(a, b *fateRecord) bool {
	return a.CHID == b.CHID && a.Receipt == b.Receipt && a.State == b.State && a.Reason == b.Reason &&
		a.Graced == b.Graced && a.Expiry.Equal(b.Expiry) && a.SettledAt == b.SettledAt &&
		a.Topic == b.Topic && a.MessageID == b.MessageID
}

func TestFateCodecRoundTrip(t *testing.T) {
	f := fateRecord{Fate: testFate(uuid.New(), "mid", time.Unix(0, 1234567), storage.ReceiptSubID{1, 2}), SettledAt: 99, Graced: true}
	f.Topic, f.State, f.Reason = "t", storage.FateDropped, storage.DropMsgLimit
	fixed, state := encodeFixed(&f), encodeState(&f)
	got, err := decodeFate(f.UAID, f.ID, fixed)
	if err == nil {
		err = decodeState(&got, state)
	}
	if err != nil || !sameFate(&got, &f) {
		t.Fatalf("fate round trip: %+v %v", got, err)
	}
	whole, err := decodeFate(f.UAID, f.ID, encodeWhole(&f))
	if err != nil || !sameFate(&whole, &f) {
		t.Fatalf("fate of the form before the split: %+v %v", whole, err)
	}
	for _, enc := range [][]byte{fixed, encodeWhole(&f)} {
		for i := range len(enc) {
			if _, err := decodeFate(f.UAID, f.ID, enc[:i]); err == nil {
				t.Fatalf("truncated fate (%d of %d bytes) decoded", i, len(enc))
			}
		}
	}
	for i := range len(state) {
		if err := decodeState(&fateRecord{}, state[:i]); err == nil {
			t.Fatalf("truncated fate state (%d of %d bytes) decoded", i, len(state))
		}
	}
}

// FuzzDecodeFate: the decoders never panic, and what they accept
// survives an encode/decode round trip unchanged.
func FuzzDecodeFate(f *testing.F) {
	rec := fateRecord{Fate: testFate(uuid.New(), "mid", time.Unix(5, 0), storage.ReceiptSubID{3})}
	for _, enc := range [][]byte{encodeFixed(&rec), encodeWhole(&rec), encodeState(&rec)} {
		for i := range len(enc) + 1 {
			f.Add(enc[:i])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, err := decodeFate(uuid.Nil, storage.FateID{}, b); err == nil {
			enc := encodeFixed(&got)
			if b[0] == fateCodecWhole {
				enc = encodeWhole(&got)
			}
			again, err := decodeFate(uuid.Nil, storage.FateID{}, enc)
			if err != nil || !sameFate(&again, &got) {
				t.Fatalf("round trip of an accepted fate changed it: %+v -> %+v (%v)", got, again, err)
			}
		}
		var st fateRecord
		if err := decodeState(&st, b); err == nil {
			var again fateRecord
			if err := decodeState(&again, encodeState(&st)); err != nil || !sameFate(&again, &st) {
				t.Fatalf("round trip of an accepted fate state changed it: %+v -> %+v (%v)", st, again, err)
			}
		}
	})
}

// TestFatesOfTheFormBeforeTheSplit: a store written before a fate's
// state had a record of its own ('t') keeps each fate whole in 'f'. Its
// fates read as they were, move on (the state goes to 't', which wins,
// and the message id stays), settle with their receipts, are found by
// SettleExpired and SettleUser, and are swept whole.
func TestFatesOfTheFormBeforeTheSplit(t *testing.T) {
	s := open(t, Config{SweepInterval: time.Hour})
	ctx := context.Background()
	uaid, sub := uuid.New(), storage.ReceiptSubID{9}
	exp := time.Now().Add(time.Hour)
	old := func(mid string, expiry time.Time) fateRecord {
		f := fateRecord{Fate: testFate(uaid, mid, expiry, sub)}
		f.State = storage.FateStored
		if err := s.db.Set(fateKey(uaid, f.ID), encodeWhole(&f), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Set(fateExpiryKey(expiry.UnixNano(), uaid, f.ID), nil, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		return f
	}
	stored := old("stored", exp)
	old("dropped", exp)
	old("expired", time.Now().Add(-time.Second))

	got, err := s.GetFate(ctx, uaid, stored.ID)
	if err != nil || got.State != storage.FateStored || got.MessageID != "stored" || got.Receipt != sub || !got.Expiry.Equal(exp) {
		t.Fatalf("old fate: %+v %v", got, err)
	}
	if ok, err := s.Reach(ctx, uaid, stored.ID, storage.FateTransmitted); !ok || err != nil {
		t.Fatalf("reach an old fate: %v %v", ok, err)
	}
	got, err = s.GetFate(ctx, uaid, stored.ID)
	if err != nil || got.State != storage.FateTransmitted || got.MessageID != "stored" || !got.Expiry.Equal(exp) {
		t.Fatalf("old fate moved on: %+v %v", got, err)
	}
	if ok, err := s.Settle(ctx, uaid, stored.ID, storage.FateDelivered, storage.DropNone); !ok || err != nil {
		t.Fatalf("settle an old fate: %v %v", ok, err)
	}
	if ok, err := s.Settle(ctx, uaid, stored.ID, storage.FateExpired, storage.DropNone); ok || err != nil {
		t.Fatalf("settle an old fate twice: %v %v", ok, err)
	}
	if n, err := s.SettleExpired(ctx, time.Now(), 10); n != 1 || err != nil {
		t.Fatalf("settle expired: %d %v, want 1 (the old fate stored past its expiry)", n, err)
	}
	if n, err := s.SettleUser(ctx, uaid, uuid.Nil, storage.DropUserGone); n != 1 || err != nil {
		t.Fatalf("settle user: %d %v, want 1 (the old fate still stored)", n, err)
	}
	rs, err := s.Receipts(ctx, sub, 10)
	if err != nil || len(rs) != 3 {
		t.Fatalf("receipts: %+v %v, want 3", rs, err)
	}
	want := map[string]storage.FateState{"stored": storage.FateDelivered, "dropped": storage.FateDropped, "expired": storage.FateExpired}
	for _, rc := range rs {
		if want[rc.MessageID] != rc.State {
			t.Fatalf("receipt %+v, want %s", rc, want[rc.MessageID])
		}
	}
	if _, err := s.Sweep(time.Now().Add(storage.ReceiptKeep + time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []byte{prefixFate, prefixFateState, prefixFateExpiry, prefixReceipt} {
		if n := countPrefix(t, s, p); n != 0 {
			t.Fatalf("%d keys %q left after the sweep", n, p)
		}
	}
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
