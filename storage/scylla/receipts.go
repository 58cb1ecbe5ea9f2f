package scylla

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/autopush-go/autopush/storage"
)

// Receipt subscriptions (table receipt_sub) and receipts (table receipt,
// one partition per subscription, written by the winning settle in
// fates.go). A Receipt.ID is "<at>-<fate id in hex>": the row's whole
// clustering key, so an ack deletes without reading.

// PutReceiptSub implements storage.FateStore: INSERT ... IF NOT EXISTS.
// A lost answer is settled by a serial read: the row found is ours when
// it carries our key hash and creation time.
func (s *Store) PutReceiptSub(ctx context.Context, sub storage.ReceiptSub) error {
	if err := storage.ValidateReceiptSub(&sub); err != nil {
		return fmt.Errorf("scylla: put receipt sub: %w", err)
	}
	if err := s.open("put receipt sub"); err != nil {
		return err
	}
	created := sub.Created.UnixNano()
	applied, err := s.query(ctx, qReceiptSubAdd, sub.ID[:], sub.KeyHash[:], sub.Webhook, sub.WebhookSecret, created).MapScanCAS(map[string]any{})
	if err != nil {
		got, found, rerr := s.readReceiptSub(ctx, sub.ID, true)
		if rerr != nil || !found || got.KeyHash != sub.KeyHash || got.Created.UnixNano() != created {
			return wrap("put receipt sub", err)
		}
		applied = true
	}
	if !applied {
		return fmt.Errorf("scylla: put receipt sub %x: %w", sub.ID, storage.ErrConflict)
	}
	if sub.Webhook != "" {
		// Listed after the subscription exists: a failure leaves one
		// without its webhook served, and says so.
		if err := s.query(ctx, qReceiptHookAdd, sub.ID[:], sub.Webhook, sub.WebhookSecret).Exec(); err != nil {
			return wrap("put receipt sub: list its webhook", err)
		}
		if err := s.query(ctx, qKeyHookAdd, sub.KeyHash[:], sub.ID[:]).Exec(); err != nil {
			return wrap("put receipt sub: count its webhook", err)
		}
	}
	return nil
}

// CountReceiptHooks implements storage.FateStore: the head of the key's
// receipt_hook_by_key partition. 1 RT.
func (s *Store) CountReceiptHooks(ctx context.Context, key [32]byte, limit int) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("scylla: count receipt hooks: limit %d: %w", limit, storage.ErrInvalid)
	}
	if err := s.open("count receipt hooks"); err != nil {
		return 0, err
	}
	n := 0
	iter := s.query(ctx, qKeyHooks, key[:], limit).Iter()
	var id []byte
	for iter.Scan(&id) {
		n++
	}
	if err := iter.Close(); err != nil {
		return 0, wrap("count receipt hooks", err)
	}
	return n, nil
}

// ReceiptHooks implements storage.FateStore: a slice of receipt_hook's
// one partition. 1 RT.
func (s *Store) ReceiptHooks(ctx context.Context, after storage.ReceiptSubID, limit int) ([]storage.ReceiptSub, error) {
	if err := storage.ValidateLimit(limit); err != nil {
		return nil, fmt.Errorf("scylla: receipt hooks: %w", err)
	}
	if err := s.open("receipt hooks"); err != nil {
		return nil, err
	}
	iter := s.query(ctx, qReceiptHooks, after[:], limit).Iter()
	var out []storage.ReceiptSub
	var id []byte
	var sub storage.ReceiptSub
	for iter.Scan(&id, &sub.Webhook, &sub.WebhookSecret) {
		copy(sub.ID[:], id)
		out = append(out, sub)
		sub = storage.ReceiptSub{}
	}
	if err := iter.Close(); err != nil {
		return nil, wrap("receipt hooks", err)
	}
	return out, nil
}

// GetReceiptSub implements storage.FateStore. 1 RT.
func (s *Store) GetReceiptSub(ctx context.Context, id storage.ReceiptSubID) (storage.ReceiptSub, error) {
	if err := s.open("get receipt sub"); err != nil {
		return storage.ReceiptSub{}, err
	}
	sub, found, err := s.readReceiptSub(ctx, id, false)
	if err != nil {
		return storage.ReceiptSub{}, wrap("get receipt sub", err)
	}
	if !found {
		return storage.ReceiptSub{}, fmt.Errorf("scylla: get receipt sub %x: %w", id, storage.ErrNotFound)
	}
	return sub, nil
}

func (s *Store) readReceiptSub(ctx context.Context, id storage.ReceiptSubID, serial bool) (storage.ReceiptSub, bool, error) {
	query := s.query
	if serial {
		query = s.serialRead
	}
	sub := storage.ReceiptSub{ID: id}
	var hash []byte
	var created int64
	err := query(ctx, qReceiptSubGet, id[:]).Scan(&hash, &sub.Webhook, &sub.WebhookSecret, &created)
	if errors.Is(err, gocql.ErrNotFound) {
		return storage.ReceiptSub{}, false, nil
	}
	if err != nil {
		return storage.ReceiptSub{}, false, err
	}
	copy(sub.KeyHash[:], hash)
	sub.Created = time.Unix(0, created)
	return sub, true, nil
}

// Receipts implements storage.FateStore: the head of the subscription's
// partition. 1 RT.
func (s *Store) Receipts(ctx context.Context, sub storage.ReceiptSubID, limit int) ([]storage.Receipt, error) {
	if err := storage.ValidateLimit(limit); err != nil {
		return nil, fmt.Errorf("scylla: receipts: %w", err)
	}
	if err := s.open("receipts"); err != nil {
		return nil, err
	}
	iter := s.query(ctx, qReceipts, sub[:], limit).Iter()
	out := []storage.Receipt{}
	for {
		var r storage.Receipt
		var at int64
		var id []byte
		var state, reason int8
		if !iter.Scan(&at, &id, &r.MessageID, &state, &reason) {
			break
		}
		r.ID = receiptID(at, id)
		r.At = time.Unix(0, at)
		r.State, r.Reason = storage.FateState(state), storage.DropReason(reason)
		out = append(out, r)
	}
	if err := iter.Close(); err != nil {
		return nil, wrap("receipts", err)
	}
	return out, nil
}

func receiptID(at int64, id []byte) string {
	return strconv.FormatInt(at, 10) + "-" + hex.EncodeToString(id)
}

// parseReceiptID is receiptID's inverse; ok false for an id it never made.
func parseReceiptID(s string) (at int64, id []byte, ok bool) {
	a, h, found := strings.Cut(s, "-")
	if !found {
		return 0, nil, false
	}
	at, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, nil, false
	}
	id, err = hex.DecodeString(h)
	if err != nil || len(id) != len(storage.FateID{}) || receiptID(at, id) != s {
		return 0, nil, false
	}
	return at, id, true
}

// ackBatch bounds the deletes of one batch (all in one partition, so one
// mutation; the bound keeps it under the batch size warnings).
const ackBatch = 100

// AckReceipts implements storage.FateStore: a delete of each id in
// unlogged single-partition batches, 1 RT per 100 ids. An id this
// backend never made names no row and is skipped, like an unknown one.
func (s *Store) AckReceipts(ctx context.Context, sub storage.ReceiptSubID, ids []string) error {
	if err := s.open("ack receipts"); err != nil {
		return err
	}
	b := s.batch(ctx, classMessageWrite)
	flush := func() error {
		if b.Size() == 0 {
			return nil
		}
		err := s.session.ExecuteBatch(b)
		b = s.batch(ctx, classMessageWrite)
		return err
	}
	seen := map[string]bool{}
	for _, raw := range ids {
		at, id, ok := parseReceiptID(raw)
		if !ok || seen[raw] {
			continue
		}
		seen[raw] = true
		b.Query(qReceiptDel.cql, sub[:], at, id)
		if b.Size() == ackBatch {
			if err := flush(); err != nil {
				return wrap("ack receipts", err)
			}
		}
	}
	return wrap("ack receipts", flush())
}
