package storagetest

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Receipts (storage.FateStore): receipt subscriptions, the receipts of
// their delivered fates, and the subscriptions with a webhook.

func testReceiptSubs(t *testing.T, s storage.Store) {
	sub := storage.ReceiptSub{ID: newSubID(), Webhook: "https://example.com/receipts",
		Created: time.Now().Truncate(time.Millisecond)}
	_, _ = rand.Read(sub.KeyHash[:])
	must(t, s.PutReceiptSub(ctx(t), sub), "put receipt sub")
	same := func(what string) {
		t.Helper()
		got, err := s.GetReceiptSub(ctx(t), sub.ID)
		must(t, err, what)
		if got.ID != sub.ID || got.KeyHash != sub.KeyHash || got.Webhook != sub.Webhook || !got.Created.Equal(sub.Created) {
			t.Fatalf("%s:\n got  %+v\n want %+v", what, got, sub)
		}
	}
	same("get receipt sub")
	again := sub
	again.Webhook, again.KeyHash = "", [32]byte{1}
	wantKind(t, s.PutReceiptSub(ctx(t), again), storage.ErrConflict, "put a receipt sub twice")
	same("get receipt sub after a conflict")
	_, err := s.GetReceiptSub(ctx(t), newSubID())
	wantKind(t, err, storage.ErrNotFound, "get an unknown receipt sub")
}

var receiptIDChars = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func testReceipts(t *testing.T, s storage.Store) {
	a, b := newSubID(), newSubID()
	uaid := uuid.New()
	var wantA, wantB []string
	for i := range 7 {
		sub, want := a, &wantA
		if i%3 == 2 {
			sub, want = b, &wantB
		}
		f := newFate(uaid, uuid.New(), "", time.Now().Add(time.Hour), sub)
		track(t, s, f)
		settle(t, s, f, storage.FateDelivered, storage.DropNone, true)
		*want = append(*want, f.MessageID)
	}
	read := func(sub storage.ReceiptSubID, limit int) ([]storage.Receipt, []string) {
		t.Helper()
		rs, err := s.Receipts(ctx(t), sub, limit)
		must(t, err, "receipts")
		mids := make([]string, len(rs))
		for i, r := range rs {
			mids[i] = r.MessageID
			if !receiptIDChars.MatchString(r.ID) {
				t.Fatalf("receipt id %q is not 1 to 64 of [A-Za-z0-9_-]", r.ID)
			}
			if i > 0 && r.At.Before(rs[i-1].At) {
				t.Fatalf("receipts not oldest first: %+v", rs)
			}
		}
		return rs, mids
	}
	rsA, got := read(a, 100)
	sameList(t, got, wantA, "receipts of a, oldest first")
	_, got = read(b, 100)
	sameList(t, got, wantB, "receipts of b")
	_, got = read(a, 2)
	sameList(t, got, wantA[:2], "receipts of a, limit 2")

	// An ack through another subscription removes nothing.
	must(t, s.AckReceipts(ctx(t), b, []string{rsA[0].ID, rsA[1].ID}), "ack a's receipts through b")
	_, got = read(a, 100)
	sameList(t, got, wantA, "receipts of a after an ack through b")

	must(t, s.AckReceipts(ctx(t), a, []string{rsA[0].ID, "unknown", rsA[1].ID, ""}), "ack receipts")
	_, got = read(a, 100)
	sameList(t, got, wantA[2:], "receipts of a after acking two")
	must(t, s.AckReceipts(ctx(t), a, []string{rsA[0].ID}), "ack a receipt twice")
	must(t, s.AckReceipts(ctx(t), a, nil), "ack nothing")
	_, got = read(b, 100)
	sameList(t, got, wantB, "receipts of b after acks of a")
}

// testReceiptHooks: subscriptions with a webhook are listed, in id
// order, paged; those without are not, nor anything else the store keeps
// (the health probe's key).
func testReceiptHooks(t *testing.T, s storage.Store) {
	// The health probe writes too: whatever it writes is no webhook (the
	// embedded store's probe key once sat in the webhook index's range).
	must(t, s.Health(ctx(t)), "health")
	var want []storage.ReceiptSubID
	for i := range 5 {
		sub := storage.ReceiptSub{ID: newSubID(), Created: time.Now().Truncate(time.Millisecond)}
		if i%2 == 0 {
			sub.Webhook, sub.WebhookSecret = fmt.Sprintf("https://app.example/hook/%d", i), fmt.Sprintf("secret-%d", i)
			want = append(want, sub.ID)
		}
		must(t, s.PutReceiptSub(ctx(t), sub), "put receipt sub")
	}
	var got []storage.ReceiptSub
	var after storage.ReceiptSubID
	for {
		page, err := s.ReceiptHooks(ctx(t), after, 2)
		must(t, err, "receipt hooks")
		if len(page) > 2 {
			t.Fatalf("a page of %d with limit 2", len(page))
		}
		got = append(got, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(got) != len(want) {
		t.Fatalf("%d hooks listed, want %d", len(got), len(want))
	}
	for i := range got {
		if i > 0 && strings.Compare(string(got[i-1].ID[:]), string(got[i].ID[:])) >= 0 {
			t.Fatalf("hooks out of id order at %d", i)
		}
		full, err := s.GetReceiptSub(ctx(t), got[i].ID)
		must(t, err, "get receipt sub")
		if got[i].Webhook == "" || got[i].Webhook != full.Webhook || got[i].WebhookSecret != full.WebhookSecret || full.WebhookSecret == "" {
			t.Fatalf("hook %+v, stored %+v", got[i], full)
		}
	}
	_, err := s.ReceiptHooks(ctx(t), after, 0)
	wantKind(t, err, storage.ErrInvalid, "receipt hooks with limit 0")
	bad := storage.ReceiptSub{ID: newSubID(), Webhook: "ftp://app.example/x"}
	wantKind(t, s.PutReceiptSub(ctx(t), bad), storage.ErrInvalid, "webhook that is not http(s)")
}

// testCountReceiptHooks: a key's subscriptions with a webhook are
// counted, up to the limit; those without a webhook and other keys' are
// not.
func testCountReceiptHooks(t *testing.T, s storage.Store) {
	var key, other, none [32]byte
	_, _ = rand.Read(key[:])
	_, _ = rand.Read(other[:])
	_, _ = rand.Read(none[:])
	put := func(k [32]byte, webhook string) {
		sub := storage.ReceiptSub{ID: newSubID(), KeyHash: k, Created: time.Now().Truncate(time.Millisecond)}
		if webhook != "" {
			sub.Webhook, sub.WebhookSecret = webhook, "secret"
		}
		must(t, s.PutReceiptSub(ctx(t), sub), "put receipt sub")
	}
	for i := range 3 {
		put(key, fmt.Sprintf("https://app.example/hook/%d", i))
		put(key, "")
	}
	put(other, "https://other.example/hook")
	for _, c := range []struct {
		key         [32]byte
		limit, want int
	}{{key, 10, 3}, {key, 3, 3}, {key, 2, 2}, {key, 1, 1}, {other, 10, 1}, {none, 10, 0}} {
		n, err := s.CountReceiptHooks(ctx(t), c.key, c.limit)
		must(t, err, "count receipt hooks")
		if n != c.want {
			t.Errorf("count of key %x with limit %d: %d, want %d", c.key[:4], c.limit, n, c.want)
		}
	}
	_, err := s.CountReceiptHooks(ctx(t), key, 0)
	wantKind(t, err, storage.ErrInvalid, "count receipt hooks with limit 0")
}
