package scylla

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// Placeholder until the fate store is written: every call fails.
var errNoFates = errors.New("scylla: fates not built yet")

func (s *Store) Track(context.Context, storage.Fate) error { return errNoFates }
func (s *Store) Reach(context.Context, uuid.UUID, storage.FateID, storage.FateState) (bool, error) {
	return false, errNoFates
}
func (s *Store) Settle(context.Context, uuid.UUID, storage.FateID, storage.FateState, storage.DropReason) (bool, error) {
	return false, errNoFates
}
func (s *Store) SettleUser(context.Context, uuid.UUID, uuid.UUID, storage.DropReason) (int, error) {
	return 0, errNoFates
}
func (s *Store) SettleTopic(context.Context, uuid.UUID, uuid.UUID, string, storage.FateID) (int, error) {
	return 0, errNoFates
}
func (s *Store) SettleExpired(context.Context, time.Time, int) (int, error) { return 0, errNoFates }
func (s *Store) GetFate(context.Context, uuid.UUID, storage.FateID) (storage.Fate, error) {
	return storage.Fate{}, errNoFates
}
func (s *Store) MilestoneCounts(context.Context) (map[storage.Milestone]int64, error) {
	return nil, errNoFates
}
func (s *Store) PutReceiptSub(context.Context, storage.ReceiptSub) error { return errNoFates }
func (s *Store) GetReceiptSub(context.Context, storage.ReceiptSubID) (storage.ReceiptSub, error) {
	return storage.ReceiptSub{}, errNoFates
}
func (s *Store) Receipts(context.Context, storage.ReceiptSubID, int) ([]storage.Receipt, error) {
	return nil, errNoFates
}
func (s *Store) AckReceipts(context.Context, storage.ReceiptSubID, []string) error { return errNoFates }
func (s *Store) ReceiptHooks(context.Context, storage.ReceiptSubID, int) ([]storage.ReceiptSub, error) {
	return nil, errNoFates
}
