package embedded

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Receipts (storage.FateStore): receipt subscriptions ('g'), their
// webhook indexes ('h', 'j') and the receipts of their delivered fates
// ('w'); fates.go lists every key space, and fatesettle.go writes a
// fate's receipt in its settling batch.

func receiptSubKey(id storage.ReceiptSubID) []byte {
	return append([]byte{prefixReceiptSub}, id[:]...)
}

func receiptPrefix(sub storage.ReceiptSubID) []byte {
	return append([]byte{prefixReceipt}, sub[:]...)
}

// receiptKey: the receipt's ID is the hex of what follows the
// subscription in its key, so the key order is the IDs' order and an ack
// needs no read.
func receiptKey(sub storage.ReceiptSubID, at int64, id storage.FateID) []byte {
	k := binary.BigEndian.AppendUint64(receiptPrefix(sub), uint64(at))
	return append(k, id[:]...)
}

// receiptKeyOf parses a receipt ID back into its key and settling time.
func receiptKeyOf(sub storage.ReceiptSubID, rid string) ([]byte, int64, bool) {
	b, err := hex.DecodeString(rid)
	if err != nil || len(b) != 8+16 {
		return nil, 0, false
	}
	return append(receiptPrefix(sub), b...), int64(binary.BigEndian.Uint64(b)), true
}

func encodeReceipt(f *fateRecord) []byte {
	b := []byte{fateCodec, byte(f.State), byte(f.Reason)}
	return appendString(b, f.MessageID)
}

func decodeReceipt(k, v []byte) (storage.Receipt, error) {
	var rc storage.Receipt
	if len(k) != 1+16+8+16 || len(v) < 3 || v[0] != fateCodec {
		return rc, errCorrupt
	}
	rc.ID = hex.EncodeToString(k[17:])
	rc.At = time.Unix(0, int64(binary.BigEndian.Uint64(k[17:25])))
	rc.State, rc.Reason = storage.FateState(v[1]), storage.DropReason(v[2])
	r := reader{b: v[3:]}
	rc.MessageID = r.string()
	return rc, r.done()
}

func encodeReceiptSub(sub *storage.ReceiptSub) []byte {
	b := append([]byte{fateCodec}, sub.KeyHash[:]...)
	b = binary.AppendVarint(b, sub.Created.UnixNano())
	b = appendString(b, sub.Webhook)
	return appendString(b, sub.WebhookSecret)
}

func decodeReceiptSub(id storage.ReceiptSubID, v []byte) (storage.ReceiptSub, error) {
	sub := storage.ReceiptSub{ID: id}
	if len(v) == 0 || v[0] != fateCodec {
		return sub, errCorrupt
	}
	r := reader{b: v[1:]}
	copy(sub.KeyHash[:], r.bytes(32))
	sub.Created = time.Unix(0, r.varint())
	sub.Webhook = r.string()
	sub.WebhookSecret = r.string()
	return sub, r.done()
}

// PutReceiptSub implements storage.FateStore. One local read and one
// durable write, under the stripe lock of the id.
func (s *Store) PutReceiptSub(ctx context.Context, sub storage.ReceiptSub) error {
	if err := storage.ValidateReceiptSub(&sub); err != nil {
		return fmt.Errorf("embedded: put receipt sub: %w", err)
	}
	if err := s.enter(ctx, "put receipt sub"); err != nil {
		return err
	}
	defer s.leave()
	l := s.stripe(uuid.UUID(sub.ID))
	l.Lock()
	defer l.Unlock()
	k := receiptSubKey(sub.ID)
	if v, err := s.get(k); err != nil || v != nil {
		if err == nil {
			return fmt.Errorf("embedded: put receipt sub %x: exists: %w", sub.ID, storage.ErrConflict)
		}
		return failed("put receipt sub", err)
	}
	b := s.db.NewBatch()
	b.Set(k, encodeReceiptSub(&sub), nil)
	if sub.Webhook != "" {
		b.Set(append([]byte{prefixHook}, sub.ID[:]...), nil, nil)
		b.Set(append(keyHookPrefix(sub.KeyHash), sub.ID[:]...), nil, nil)
	}
	if err := s.commit(b); err != nil {
		return failed("put receipt sub", err)
	}
	return nil
}

// hookKeyLen is the length of a webhook index key: the prefix and an id.
const hookKeyLen = 1 + len(storage.ReceiptSubID{})

// hookKeys lists up to most subscription ids of the webhook index from
// lower on. Keys of another length are skipped: stores written before
// Health's probe key moved out of the prefixes hold it as "health",
// under prefixHook.
func (s *Store) hookKeys(lower []byte, most int) ([]storage.ReceiptSubID, error) {
	var out []storage.ReceiptSubID
	err := s.scan([]byte{prefixHook}, lower, func(k, _ []byte) (bool, error) {
		if len(k) == hookKeyLen {
			out = append(out, storage.ReceiptSubID(k[1:]))
		}
		return len(out) < most, nil
	})
	return out, err
}

// ReceiptHooks implements storage.FateStore: a scan of the webhook
// index, then a read of each subscription.
func (s *Store) ReceiptHooks(ctx context.Context, after storage.ReceiptSubID, limit int) ([]storage.ReceiptSub, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("embedded: receipt hooks: limit %d: %w", limit, storage.ErrInvalid)
	}
	if err := s.enter(ctx, "receipt hooks"); err != nil {
		return nil, err
	}
	defer s.leave()
	lower := append(append([]byte{prefixHook}, after[:]...), 0) // just after it
	if after == (storage.ReceiptSubID{}) {
		lower = []byte{prefixHook}
	}
	ids, err := s.hookKeys(lower, limit)
	if err != nil {
		return nil, failed("receipt hooks", err)
	}
	out := make([]storage.ReceiptSub, 0, len(ids))
	for _, id := range ids {
		v, err := s.get(receiptSubKey(id))
		if err != nil {
			return nil, failed("receipt hooks", err)
		}
		if v == nil {
			continue
		}
		sub, err := decodeReceiptSub(id, v)
		if err != nil {
			return nil, failed("receipt hooks", err)
		}
		out = append(out, sub)
	}
	return out, nil
}

func keyHookPrefix(key [32]byte) []byte { return append([]byte{prefixKeyHook}, key[:]...) }

// CountReceiptHooks implements storage.FateStore. One local range scan
// of at most limit keys.
func (s *Store) CountReceiptHooks(ctx context.Context, key [32]byte, limit int) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("embedded: count receipt hooks: limit %d: %w", limit, storage.ErrInvalid)
	}
	if err := s.enter(ctx, "count receipt hooks"); err != nil {
		return 0, err
	}
	defer s.leave()
	n, err := s.countKeys(keyHookPrefix(key), limit)
	if err != nil {
		return 0, failed("count receipt hooks", err)
	}
	return n, nil
}

// GetReceiptSub implements storage.FateStore. One local read.
func (s *Store) GetReceiptSub(ctx context.Context, id storage.ReceiptSubID) (storage.ReceiptSub, error) {
	if err := s.enter(ctx, "get receipt sub"); err != nil {
		return storage.ReceiptSub{}, err
	}
	defer s.leave()
	v, err := s.get(receiptSubKey(id))
	if err != nil {
		return storage.ReceiptSub{}, failed("get receipt sub", err)
	}
	if v == nil {
		return storage.ReceiptSub{}, fmt.Errorf("embedded: get receipt sub %x: %w", id, storage.ErrNotFound)
	}
	sub, err := decodeReceiptSub(id, v)
	if err != nil {
		return storage.ReceiptSub{}, failed("get receipt sub", fmt.Errorf("receipt sub %x: %w", id, err))
	}
	return sub, nil
}

// Receipts implements storage.FateStore. One local range scan; receipts
// past ReceiptKeep the sweeper has not reached yet are skipped.
func (s *Store) Receipts(ctx context.Context, sub storage.ReceiptSubID, limit int) ([]storage.Receipt, error) {
	if err := storage.ValidateLimit(limit); err != nil {
		return nil, fmt.Errorf("embedded: receipts: %w", err)
	}
	if err := s.enter(ctx, "receipts"); err != nil {
		return nil, err
	}
	defer s.leave()
	oldest := time.Now().Add(-storage.ReceiptKeep)
	out := []storage.Receipt{}
	err := s.scan(receiptPrefix(sub), nil, func(k, v []byte) (bool, error) {
		rc, err := decodeReceipt(k, v)
		if err != nil {
			return false, fmt.Errorf("receipt %x: %w", k, err)
		}
		if rc.At.After(oldest) {
			out = append(out, rc)
		}
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, failed("receipts", err)
	}
	return out, nil
}

// AckReceipts implements storage.FateStore. One durable write, nothing
// read: a receipt's key and expiry entry follow from its ID, and deleting
// what is not there is harmless.
func (s *Store) AckReceipts(ctx context.Context, sub storage.ReceiptSubID, ids []string) error {
	if err := s.enter(ctx, "ack receipts"); err != nil {
		return err
	}
	defer s.leave()
	b := s.db.NewBatch()
	for _, rid := range ids {
		if k, at, ok := receiptKeyOf(sub, rid); ok {
			// Written once each (singleWrite, fates.go); an ID that
			// names nothing deletes nothing.
			b.SingleDelete(k, nil)
			b.SingleDelete(expiryKey(at+int64(storage.ReceiptKeep), k), nil)
		}
	}
	if b.Empty() {
		b.Close()
		return nil
	}
	if err := s.commit(b); err != nil {
		return failed("ack receipts", err)
	}
	return nil
}
